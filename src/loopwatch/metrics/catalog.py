"""Every metric family loopwatch exports, as plain data: name, type, labels, help, buckets.

``LoopwatchMetrics`` registers its families from here, the exposition's size bound is computed
from here, the dashboards and alert rules take their metric names from here, and docs/metrics.md's
metrics tables are generated from here (``python -m docs_gen.metrics``). A name is written as
PromQL selects it: counters with ``_total``, the info family with ``_info``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from loopwatch.core.assembler import DROP_REASONS, EVICT_REASONS
from loopwatch.core.config import Config
from loopwatch.core.log_view import AGENT_SOURCES, DETECTION_TYPES
from loopwatch.core.outcomes import ERROR_CLASSES, OK
from loopwatch.core.records import GUARD_DECISIONS, MALFORMED_REASONS, SPAN_KINDS
from loopwatch.core.summary import DUPLICATE, FAILING, NO_ROWS, REPEAT, SAME_RESULT

PREFIX = "loopwatch_"
ATTEMPT_BUCKETS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 64)
STREAK_BUCKETS = (0, 1, 2, 3, 4, 6, 8, 12, 16)
OTHER = "other"
# Labels whose values come from the spans: each is bounded in distinct values and length, and a
# family with one is held to the series budget. Every other label is a closed vocabulary.
SPAN_LABELS = ("service", "agent", "model", "tool", "tool_version")
TURN_LABELS = ("service", "agent", "model")
# The HTTP endpoints of `loopwatch serve` that cap their open connections.
ENDPOINT_OTLP_HTTP = "otlp_http"
ENDPOINT_METRICS = "metrics"

# README sections, in order
PER_TURN = "per turn"
CHANGE = "change marker"
HEALTH = "self-health"

ERROR_CLASS_VALUES = (*ERROR_CLASSES, OK)
LOOP_KINDS = (REPEAT, DUPLICATE, NO_ROWS, SAME_RESULT, FAILING)
DECISION_VALUES = (*sorted(GUARD_DECISIONS), OTHER)  # an unknown decision is read as other
TOKEN_TYPES = ("input", "output", "unsplit")


@dataclass(frozen=True, eq=False)
class Metric:
    """One metric family."""

    name: str
    type: str  # counter, gauge, histogram or info
    help: str  # the exposition's HELP line, word for word
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()
    # the values of closed labels (for the exposition's bound and the docs)
    values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # every series present at 0 from the start, one per value of its closed label (at most
    # one label): "nothing arrived" reads differently from "not wired"
    at_zero: bool = False
    serve_only: bool = False  # exported by `loopwatch serve` only
    section: str = HEALTH
    note: str = ""  # more for the docs than the HELP line says

    @property
    def family(self) -> str:
        """The family name as prometheus_client takes it (without ``_total`` or ``_info``)."""
        if self.type == "counter":
            return self.name.removesuffix("_total")
        if self.type == "info":
            return self.name.removesuffix("_info")
        return self.name

    @property
    def budgeted(self) -> bool:
        """Held to the series budget: a label of the family comes from the spans."""
        return any(label in SPAN_LABELS for label in self.labels)

    @property
    def bucket(self) -> str:
        return f"{self.name}_bucket"

    @property
    def count(self) -> str:
        return f"{self.name}_count"


def _health_counter(
    name: str, help: str, label: str, values: tuple[str, ...], note: str = ""
) -> Metric:
    """A self-health counter by one closed label, each value's series present at 0 from the
    start."""
    return Metric(name, "counter", help, (label,), values={label: values}, at_zero=True, note=note)


def _calls_counter(name: str, help: str) -> Metric:
    """A per-turn counter of tool calls, by tool and error class."""
    labels = (*TURN_LABELS, "tool", "error_class")
    values = {"error_class": ERROR_CLASS_VALUES}
    return Metric(name, "counter", help, labels, values=values, section=PER_TURN)


TURN_MAX_ATTEMPTS = Metric(
    "loopwatch_turn_max_attempts",
    "histogram",
    "Max attempts over all attempt keys of one turn (one observation per turn).",
    TURN_LABELS,
    ATTEMPT_BUCKETS,
    section=PER_TURN,
    note="Turns without tool calls are not observed. Read p99: healthy is 1.",
)
TOOL_MAX_ATTEMPTS = Metric(
    "loopwatch_tool_max_attempts",
    "histogram",
    "Per tool used in a turn: max attempts over that tool's attempt keys.",
    (*TURN_LABELS, "tool", "tool_version"),
    ATTEMPT_BUCKETS,
    section=PER_TURN,
)
NO_ROWS_STREAK = Metric(
    "loopwatch_no_rows_streak",
    "histogram",
    "Per tool with readable results in a turn: longest run of consecutive empty results.",
    (*TURN_LABELS, "tool"),
    STREAK_BUCKETS,
    section=PER_TURN,
    note="0 when the tool always had rows.",
)
SAME_RESULT_STREAK = Metric(
    "loopwatch_same_result_streak",
    "histogram",
    "Per tool with readable results in a turn: longest run of consecutive calls that got the "
    "same data, whatever the wording of their arguments.",
    (*TURN_LABELS, "tool"),
    STREAK_BUCKETS,
    section=PER_TURN,
    note="Data: rows, a nested record or several lines of text (a one-line or flat answer such "
    "as `sent` is an acknowledgement and breaks the run), or any result of a tool that declares "
    "`result`; compared on the normalized result and the arguments minus free text. 0 when the "
    "tool never returned data.",
)
FAILING_STREAK = Metric(
    "loopwatch_failing_streak",
    "histogram",
    "Per tool used in a turn: longest run of consecutive failures with one error class, "
    "whatever the arguments.",
    (*TURN_LABELS, "tool"),
    STREAK_BUCKETS,
    section=PER_TURN,
    note="0 when the tool never failed.",
)
TURNS = Metric(
    "loopwatch_turns_total",
    "counter",
    "Finished turns, with or without tool calls.",
    TURN_LABELS,
    section=PER_TURN,
)
LOOPS = Metric(
    "loopwatch_loops_total",
    "counter",
    "Turns in which this tool looped, by error class and kind (repeat, duplicate, no_rows, "
    "same_result, failing).",
    (*TURN_LABELS, "tool", "error_class", "kind"),
    values={"error_class": ERROR_CLASS_VALUES, "kind": LOOP_KINDS},
    section=PER_TURN,
    note="repeat: a key's attempts without progress reached the loop threshold; duplicate: a "
    "write succeeded again on an identity that had already succeeded in the turn (error_class "
    '"ok": the side effect happened twice); no_rows: a '
    'no-rows streak reached its threshold (error_class "ok"); same_result: a same-result '
    'streak over more than one key reached its threshold (error_class "ok"); failing: a '
    "failing streak over more than one key reached its threshold (the error class of its "
    "failures).",
)

TOOL_CALLS = _calls_counter("loopwatch_tool_calls_total", "Tool calls (error_class ok on success).")
REPEAT_CALLS = _calls_counter(
    "loopwatch_repeat_calls_total",
    "Tool calls past the first of their attempt key: the duplicates.",
)
OVER_CAP_SECONDS = Metric(
    "loopwatch_over_cap_seconds_total",
    "counter",
    "Wall time of calls past the loop threshold: what a loop breaker would have saved.",
    (*TURN_LABELS, "tool"),
    section=PER_TURN,
)
LOOP_TOKENS = Metric(
    "loopwatch_loop_tokens_total",
    "counter",
    "Tokens of the model calls that asked for a loop's extra attempts (the calls past the "
    "first of a looping key's run or of a looping streak): each such model call once per "
    "turn, the one that started last before the attempt, by token type (input, output; "
    "unsplit: a total reported alone).",
    (*TURN_LABELS, "tool", "error_class", "kind", "token_type"),
    values={"error_class": ERROR_CLASS_VALUES, "kind": LOOP_KINDS, "token_type": TOKEN_TYPES},
    section=PER_TURN,
    note="Read from gen_ai.usage.input_tokens/output_tokens (GenAI), llm.token_count.prompt/"
    "completion, else .total (OpenInference), gen_ai.usage.prompt_tokens/completion_tokens, "
    "else llm.usage.total_tokens (OpenLLMetry). A model call asking for extra attempts of "
    "several loops counts under the first of them; one that reports no usage counts 0. The "
    "first attempt of a loop is not counted, nor is a turn without a loop.",
)
GUARD_DECISIONS_TOTAL = Metric(
    "loopwatch_guard_decisions_total",
    "counter",
    "Tool calls a loopwatch guard answered without executing, by decision.",
    ("service", "agent", "tool", "decision"),
    values={"decision": DECISION_VALUES},
    section=PER_TURN,
    note="No model label. One exception ran: store_unchecked, a call let through unchecked "
    "(its guard store unreachable, on_store_error=allow), also counted as an attempt.",
)
MODEL_FIRST_SEEN = Metric(
    "loopwatch_model_first_seen_timestamp_seconds",
    "gauge",
    "When this process first saw a turn of this model.",
    TURN_LABELS,
    section=CHANGE,
)
TOOL_VERSION_FIRST_SEEN = Metric(
    "loopwatch_tool_version_first_seen_timestamp_seconds",
    "gauge",
    "When this process first saw this tool version (hash of its description).",
    ("service", "tool", "tool_version"),
    section=CHANGE,
)
SPANS = _health_counter(
    "loopwatch_spans_total", "Spans read, by kind (tool, agent, llm, other).", "kind", SPAN_KINDS
)
SPANS_DROPPED = _health_counter(
    "loopwatch_spans_dropped_total",
    "Spans not used, by reason.",
    "reason",
    DROP_REASONS,
    "invalid_id counts in `loopwatch serve` only.",
)
QUEUE_SPANS = Metric(
    "loopwatch_queue_spans",
    "gauge",
    "Items waiting in the queue to loopwatch's worker when it last looked (in process: span "
    "starts and ends; loopwatch serve: spans); the queue holds queue_spans at most.",
    at_zero=True,
    note="Near queue_spans the worker is falling behind: in process, what the queue cannot take "
    "is dropped (queue_full); `loopwatch serve` refuses it with a retryable error.",
)
ALL_STARTS_QUEUED = Metric(
    "loopwatch_all_starts_queued",
    "gauge",
    "1 while the in-process processor queues every span start because it follows as many "
    "traces with agent spans as it may; 0 otherwise.",
    at_zero=True,
    note="It follows 65,536 by default; plain spans then cost its worker more. Off again once "
    "those traces end or their turns are evicted. Always 0 in `loopwatch serve`.",
)
OPEN_TURNS = Metric(
    "loopwatch_open_turns",
    "gauge",
    "Traces buffered, waiting for their turn to end.",
    note="A trace with only plain spans (no agent, model or tool span) is not counted: `serve` "
    "lets it go when its root has come.",
    at_zero=True,
)
TURNS_EVICTED = _health_counter(
    "loopwatch_turns_evicted_total",
    "Turns finalized before their root span ended, by reason (idle, capacity, shutdown).",
    "reason",
    EVICT_REASONS,
    "memory: the span buffer's byte budget was reached.",
)
LATE_SPANS = Metric(
    "loopwatch_late_spans_total",
    "counter",
    "Spans that arrived for a turn already finalized.",
    at_zero=True,
)
LOOP_SPANS_PER_TURN_BOUND = "per_turn_bound"
LOOP_SPANS_EXPORT_FAILED = "export_failed"
LOOP_SPANS_DROPPED = _health_counter(
    "loopwatch_loop_spans_dropped_total",
    "Loop spans not sent, by reason.",
    "reason",
    (LOOP_SPANS_PER_TURN_BOUND, LOOP_SPANS_EXPORT_FAILED),
    "per_turn_bound: loops of one turn past `loop_spans.per_turn`. export_failed: spans "
    "`serve` or `replay --export-otlp` could not deliver to the OTLP endpoint (a full queue "
    "included).",
)
LABEL_OVERFLOW = _health_counter(
    "loopwatch_label_overflow_total",
    "Label values replaced by 'other' because the label reached its bound.",
    "label",
    SPAN_LABELS,
)
CALLS_WITHOUT_ARGUMENTS = Metric(
    "loopwatch_calls_without_arguments_total",
    "counter",
    "Tool calls whose arguments were not captured (a failed one keyed by tool and error class "
    "only; a successful one never counts as a repeat).",
    ("service", "tool"),
)
MESSAGES_MALFORMED = _health_counter(
    "loopwatch_messages_malformed_total",
    "What model calls' messages held that loopwatch could not read as it is, where it reads "
    "tool calls from messages (no span executes the tools).",
    "reason",
    MALFORMED_REASONS,
    "unreadable_history: a history that is not a message list (truncated, not JSON, over "
    "8 MiB): that model call's calls are not seen. result_without_call: a tool result that "
    "answers no call in its history. call_without_id: a requested call with no id or one "
    "another call of the history also carries (the Gemini API has none), joined by its turn, "
    "position, tool and arguments instead. calls_over_limit: calls past max_spans_per_turn, "
    "not read.",
)
CALLS_KEYED_BY_INFERENCE = Metric(
    "loopwatch_calls_keyed_by_inference_total",
    "counter",
    "Calls of tools with no identity declaration keyed on a guess: failed calls on their "
    "arguments minus free text, successful writes on their arguments minus prose.",
    ("service", "tool"),
    section=PER_TURN,
    note="No agent or model label; see Configuration.",
)
AGENT_LOOP_DETECTIONS = Metric(
    "loopwatch_agent_loop_detections_total",
    "counter",
    "Loops a coding agent reported itself (its own guard), by source agent and type: a second "
    "opinion beside loopwatch_loops_total.",
    ("service", "source", "type"),
    values={"source": AGENT_SOURCES, "type": DETECTION_TYPES},
    section=PER_TURN,
    note="Read from OTLP log events: gemini-cli's loop_detected (loop_type). No agent or model "
    "label: the events name no turn.",
)
LOG_RECORDS = Metric(
    "loopwatch_log_records_total",
    "counter",
    "OTLP log records read, by what they gave (tool: a call, llm: a model call, other: "
    "nothing counted, such as a decision or a detection).",
    ("kind",),
    values={"kind": SPAN_KINDS},
    note="The coding agents' events; see docs/coding-agents.md.",
)
# The families registered before SERIES_OVERFLOW, which presets a series for each budgeted one.
_COUNTED = (
    TURN_MAX_ATTEMPTS,
    TOOL_MAX_ATTEMPTS,
    NO_ROWS_STREAK,
    SAME_RESULT_STREAK,
    FAILING_STREAK,
    TURNS,
    LOOPS,
    TOOL_CALLS,
    REPEAT_CALLS,
    OVER_CAP_SECONDS,
    LOOP_TOKENS,
    GUARD_DECISIONS_TOTAL,
    MODEL_FIRST_SEEN,
    TOOL_VERSION_FIRST_SEEN,
    SPANS,
    SPANS_DROPPED,
    QUEUE_SPANS,
    ALL_STARTS_QUEUED,
    OPEN_TURNS,
    TURNS_EVICTED,
    LATE_SPANS,
    LOOP_SPANS_DROPPED,
    LABEL_OVERFLOW,
    CALLS_WITHOUT_ARGUMENTS,
    CALLS_KEYED_BY_INFERENCE,
    MESSAGES_MALFORMED,
    AGENT_LOOP_DETECTIONS,
    LOG_RECORDS,
)
SERIES_OVERFLOW = _health_counter(
    "loopwatch_series_overflow_total",
    "Observations recorded in a family's overflow series (span-derived labels 'other') "
    "because the family reached its series budget.",
    "metric",
    tuple(m.name for m in _COUNTED if m.budgeted),
    "One series per family with span-derived labels.",
)
HTTP_CONNECTIONS_REFUSED = Metric(
    "loopwatch_http_connections_refused_total",
    "counter",
    "HTTP connections answered 503 and closed unread because the endpoint already held its "
    f"maximum of open connections (otlp_http: max_connections, {Config.max_connections} by "
    "default; metrics: 256).",
    ("endpoint",),
    values={"endpoint": (ENDPOINT_OTLP_HTTP, ENDPOINT_METRICS)},
    at_zero=True,
    serve_only=True,
    note="OTLP exporters retry a 503; a steady rate means max_connections is too low for the "
    "senders, or a client holds connections open.",
)
BUILD_INFO = Metric("loopwatch_build_info", "info", "loopwatch version.", ("version",))

# In the order they are registered, so in the order the exposition lists them.
FAMILIES = (*_COUNTED, SERIES_OVERFLOW, HTTP_CONNECTIONS_REFUSED, BUILD_INFO)
