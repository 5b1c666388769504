"""The dashboard's last row: whether loopwatch itself sees every span."""

from __future__ import annotations

from dashboards.lib import Layout, Query, ts
from loopwatch.attach.processor import TURN_TRACES
from loopwatch.core.config import Config
from loopwatch.metrics.catalog import (
    ALL_STARTS_QUEUED,
    BUILD_INFO,
    CALLS_WITHOUT_ARGUMENTS,
    HTTP_CONNECTIONS_REFUSED,
    LABEL_OVERFLOW,
    LATE_SPANS,
    MESSAGES_MALFORMED,
    OPEN_TURNS,
    QUEUE_SPANS,
    SPANS,
    SPANS_DROPPED,
    TURNS_EVICTED,
)

RATE = "$__rate_interval"

# title, description, PromQL, legend, width
PANELS = [
    (
        "Spans/s by kind",
        "Spans loopwatch read per second, by kind (tool, agent, llm, other), over all "
        "replicas. Zero tool spans while agents run means the instrumentation or the "
        "collector route is broken, and every loop panel above reads zero with it.",
        f"sum by (kind) (rate({SPANS.name}[{RATE}]))",
        "{{kind}}",
        8,
    ),
    (
        "Spans dropped by reason",
        "Spans loopwatch could not use (queue_full: the in-process queue bound was hit; "
        "error: a span it could not read). Should be zero; any drop can hide a loop.",
        f"sum by (reason) (rate({SPANS_DROPPED.name}[{RATE}]))",
        "{{reason}}",
        8,
    ),
    (
        "Open turns",
        "Traces buffered per replica, waiting for their turn to end. Flat is healthy; a "
        "steady climb means roots never arrive (broken context propagation) until the "
        "memory bound evicts them.",
        f"sum by (instance) ({OPEN_TURNS.name})",
        "{{instance}}",
        8,
    ),
    (
        "Queue to the worker",
        "Items waiting for loopwatch's worker per replica, as it last found them: span starts "
        "and ends in process, spans in loopwatch serve. Near queue_spans "
        f"({Config.queue_spans:,} by default) the worker is falling behind: in process what the "
        "queue cannot take is dropped (queue_full above), and loopwatch serve refuses it with a "
        "retryable error.",
        f"max by (instance) ({QUEUE_SPANS.name})",
        "{{instance}}",
        12,
    ),
    (
        "Every span start queued",
        "1 while an in-process processor queues every span start, not only those of traces "
        f"with agent spans: it already follows its maximum of such traces ({TURN_TRACES:,}), "
        "as when local roots never end. Plain spans then cost its worker more. It turns off "
        "once those traces end or their turns are evicted; always 0 for loopwatch serve.",
        f"max by (instance) ({ALL_STARTS_QUEUED.name})",
        "{{instance}}",
        12,
    ),
    (
        "Turns evicted",
        "Turns finalized before their root span ended, by reason (idle: root never came; "
        "capacity: memory bound reached; shutdown). Evicted turns are still counted, but "
        "may be split or incomplete.",
        f"sum by (reason) (rate({TURNS_EVICTED.name}[{RATE}]))",
        "{{reason}}",
        8,
    ),
    (
        "Late spans",
        "Spans that arrived for a turn already finalized (counted, never silently dropped). "
        "A steady rate means the service's grace period is shorter than the agents' export "
        "delay, or the collector routes one trace to two replicas.",
        f"sum by (instance) (rate({LATE_SPANS.name}[{RATE}]))",
        "{{instance}}",
        8,
    ),
    (
        "Label overflow",
        "Label values replaced by 'other' because the label reached its bound (default 200 "
        "distinct values). Per-model or per-tool panels undercount while this is above "
        "zero; totals stay right.",
        f"sum by (label) (rate({LABEL_OVERFLOW.name}[{RATE}]))",
        "{{label}}",
        8,
    ),
    (
        "Calls without arguments",
        "Tool calls whose arguments were not captured (content capture off, or a "
        "convention loopwatch cannot read), by tool: a failed one is keyed by tool + error "
        "class only, so distinct failures of one kind may look like repeats; a successful one "
        "is never a repeat.",
        f"sum by (service, tool) (rate({CALLS_WITHOUT_ARGUMENTS.name}"
        f'{{service=~"$service", tool=~"$tool"}}[{RATE}]))',
        "{{service}} {{tool}}",
        12,
    ),
    (
        "Replicas by version",
        "loopwatch processes reporting, by version. With the collector's load-balancing "
        "exporter, every replica should be here; a missing one leaves a share of traces "
        "unread.",
        f"count by (version) ({BUILD_INFO.name})",
        "{{version}}",
        12,
    ),
    (
        "Connections refused",
        "Connections per second that the OTLP/HTTP and /metrics endpoints of loopwatch serve "
        "answered 503 and closed unread, because the endpoint already held its cap of open "
        f"connections (max_connections, {Config.max_connections} by default; 256 for "
        "/metrics). Exporters retry a 503, so spans arrive late rather than never; a steady "
        "rate means the cap is too low for the senders, or clients hold connections open. "
        "No series for loopwatch in process: it has neither endpoint.",
        f"sum by (instance, endpoint) (rate({HTTP_CONNECTIONS_REFUSED.name}[{RATE}]))",
        "{{instance}} {{endpoint}}",
        24,
    ),
    (
        "Messages not readable as they are",
        "Where loopwatch reads tool calls from model calls' messages (a hand-rolled loop: no "
        "span executes the tools), what it could not read as it is, by reason. "
        "unreadable_history: a history that is not a message list (truncated, not JSON, over "
        "8 MiB), whose calls go unseen; result_without_call: a tool result answering no call "
        "in its history; call_without_id: a call with a missing or repeated id, joined by its "
        "turn, position, tool and arguments instead (every call of a Gemini loop); "
        "calls_over_limit: calls past max_spans_per_turn, not read. The others should be zero.",
        f"sum by (reason) (rate({MESSAGES_MALFORMED.name}[{RATE}]))",
        "{{reason}}",
        24,
    ),
]


def health(layout: Layout) -> None:
    layout.row("Pipeline health")
    for title, description, expr, legend, width in PANELS:
        layout.add(ts(title, description, "short", [Query(expr, legend=legend)]), width, 7)
