"""What the conventions stage makes of a span: a tool call, a turn mark, an LLM mark, or a link."""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import Any, Final

from loopwatch.core.effects import READ
from loopwatch.core.keys import AttemptKey

# Span kinds as counted in loopwatch_spans_total{kind}.
KIND_TOOL: Final = "tool"
KIND_TURN: Final = "agent"
KIND_LLM: Final = "llm"
KIND_OTHER: Final = "other"
SPAN_KINDS: Final = (KIND_TOOL, KIND_TURN, KIND_LLM, KIND_OTHER)

# The instrumentation scope of loopwatch's own loop spans and events: never read as an agent's
# spans (serve and replay skip a scope of this name whole; in process the worker knows its own).
OWN_SCOPE: Final = "loopwatch.loop"

# What a guard did with a call, recorded on its span as ``loopwatch.guard.decision`` (or an
# event ``loopwatch.guard`` with attribute ``decision``). A guarded call did not execute, so it
# counts here and not as an attempt (except GUARD_RAN below).
GUARD_ATTRIBUTE: Final = "loopwatch.guard.decision"
GUARD_EVENT: Final = "loopwatch.guard"
GUARD_DECISIONS: Final = frozenset(
    {
        "stopped",
        "no_rows_stopped",
        "budget_exhausted",
        "suppressed",
        "circuit_open",
        "store_unavailable",
        "store_unchecked",
    }
)
# Decisions recorded on a call that did execute (its guard's store could not be reached and
# the policy let it through): counted as a decision and as an attempt.
GUARD_RAN: Final = frozenset({"store_unchecked"})


@dataclass(init=False, slots=True)
class ToolCall:
    span_id: int
    parent_id: int | None
    start_ns: int
    end_ns: int
    tool: str
    key: AttemptKey
    error_class: str  # "ok" on success
    result: str  # "empty", "rows", a declared part's hash, or "unknown" when not readable
    arguments_known: bool
    tool_version: str
    agent: str | None
    guard: str | None = None  # a guard decision: the call was answered without executing
    # a successful call of an undeclared tool: the (inferred) identity its arguments key to as
    # a failed call, for when another layer of the same call saw it fail (core.layers)
    failed_identity: str | None = None
    # a successful call's result fingerprint (core.fingerprint: NOT_KNOWN when failed or not
    # readable, EMPTY when empty): a repeat of a key whose fingerprint changed made progress
    fingerprint: int = 0
    # for a result that is data: the fingerprint with the arguments' identity minus free text,
    # equal in consecutive calls that got the same data for a reworded request (0: no data)
    same_result: int = 0
    # "read", "write" or "idempotent_write" (core.effects): a write's success never progresses
    effect: str = READ

    # written out: compiled, a generated __init__ is interpreted (benchmarks/README.md)
    def __init__(
        self,
        span_id: int,
        parent_id: int | None,
        start_ns: int,
        end_ns: int,
        tool: str,
        key: AttemptKey,
        error_class: str,
        result: str,
        arguments_known: bool,
        tool_version: str,
        agent: str | None,
        guard: str | None = None,
        failed_identity: str | None = None,
        fingerprint: int = 0,
        same_result: int = 0,
        effect: str = READ,
    ) -> None:
        self.span_id = span_id
        self.parent_id = parent_id
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.tool = tool
        self.key = key
        self.error_class = error_class
        self.result = result
        self.arguments_known = arguments_known
        self.tool_version = tool_version
        self.agent = agent
        self.guard = guard
        self.failed_identity = failed_identity
        self.fingerprint = fingerprint
        self.same_result = same_result
        self.effect = effect


@dataclass(init=False, slots=True)
class TurnMark:
    """An agent or workflow span: a turn when it is outermost and holds tool calls."""

    span_id: int
    parent_id: int | None
    start_ns: int
    end_ns: int
    agent: str | None
    model: str | None

    # written out: compiled, a generated __init__ is interpreted (benchmarks/README.md)
    def __init__(
        self,
        span_id: int,
        parent_id: int | None,
        start_ns: int,
        end_ns: int,
        agent: str | None,
        model: str | None,
    ) -> None:
        self.span_id = span_id
        self.parent_id = parent_id
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.agent = agent
        self.model = model


# What a model call's messages can hold that loopwatch cannot read as it is (counted in
# loopwatch_messages_malformed_total{reason}).
UNREADABLE_HISTORY = "unreadable_history"  # not a message list: truncated, not JSON, too large
RESULT_WITHOUT_CALL = "result_without_call"  # a tool result that answers no call in the history
CALL_WITHOUT_ID = "call_without_id"  # a call with no id, or one already taken: keyed by position
CALLS_OVER_LIMIT = "calls_over_limit"  # past max_spans_per_turn: not read
MALFORMED_REASONS = (UNREADABLE_HISTORY, RESULT_WITHOUT_CALL, CALL_WITHOUT_ID, CALLS_OVER_LIMIT)


class UnreadableHistory(ValueError):
    """A model call's history that is not a message list."""


@dataclass(slots=True)
class Conversation:
    """The turn a model call's messages show, where no span executes the tools (a hand-rolled
    loop over a raw model SDK): the calls since the turn's user message, read from the model
    calls' histories and joined with their results (conventions.messages says how)."""

    # the model answered in text (no call requested): the turn is complete
    final: bool
    # builds the calls, in history order, each with its result where one was sent back
    # (``span_id`` is derived from the call id, so the same call read from several model calls
    # is one call); built only for a turn read from messages (tool spans usually win)
    # (the argument: ids of calls already known with their outcome, not built again)
    calls: Callable[[Container[int]], tuple[ToolCall, ...]]
    size: int  # how many calls ``calls`` builds
    ids: frozenset[int]  # the stand-in span ids of those calls: what joins the turn's model calls
    # ids of the calls this model call requested (their results come in a later call)
    requested: frozenset[int] = frozenset()
    answered: frozenset[int] = frozenset()  # ids of the calls whose results it was sent
    agent: str | None = None
    # what this model call added that could not be read as it is: (reason, count), reasons
    # from MALFORMED_REASONS (its own output's calls, and the results sent since the last call)
    malformed: tuple[tuple[str, int], ...] = ()
    # (the call's id, unique in the history, as a stand-in id; the call's stand-in id) where
    # they differ: a model call whose history lost the turn's start names the call by the
    # first, and core.conversations joins it to the second
    aliases: tuple[tuple[int, int], ...] = ()
    # results sent in a history that holds no call at all (the Responses API's
    # ``previous_response_id``: the calls are in the previous model call's output), in order:
    # (the stand-in id of their call id, None without one; content; is_error)
    dangling: tuple[tuple[int | None, Any, bool | None], ...] = ()
    # builds one call this model call requested (by its stand-in id) with a result sent later
    answer: Callable[[int, Any, bool | None], ToolCall | None] | None = None


@dataclass(init=False, slots=True)
class Messages:
    """A model call's messages, kept unread: in most traces spans execute the tools, and the
    messages are read only for a turn rebuilt from them."""

    read: Callable[[], Conversation | None]
    size: int  # estimated bytes they hold

    # written out: compiled, a generated __init__ is interpreted (benchmarks/README.md)
    def __init__(
        self,
        read: Callable[[], Conversation | None],
        size: int,
    ) -> None:
        self.read = read
        self.size = size


@dataclass(init=False, slots=True)
class LlmMark:
    span_id: int
    parent_id: int | None
    start_ns: int
    end_ns: int
    model: str | None
    # tool name -> short hash of its description, from tool definitions sent to the model
    tool_versions: tuple[tuple[str, str], ...] = ()
    messages: Messages | None = None
    # the tokens it reported (conventions.usage): input, output, and a total reported alone
    input_tokens: int = 0
    output_tokens: int = 0
    unsplit_tokens: int = 0

    # written out: compiled, a generated __init__ is interpreted (benchmarks/README.md)
    def __init__(
        self,
        span_id: int,
        parent_id: int | None,
        start_ns: int,
        end_ns: int,
        model: str | None,
        tool_versions: tuple[tuple[str, str], ...] = (),
        messages: Messages | None = None,
        input_tokens: int = 0,
        output_tokens: int = 0,
        unsplit_tokens: int = 0,
    ) -> None:
        self.span_id = span_id
        self.parent_id = parent_id
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.model = model
        self.tool_versions = tool_versions
        self.messages = messages
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.unsplit_tokens = unsplit_tokens


@dataclass(init=False, slots=True)
class Link:
    """Any other span: kept only for the parent chain."""

    span_id: int
    parent_id: int | None
    start_ns: int
    end_ns: int

    # written out: compiled, a generated __init__ is interpreted (benchmarks/README.md)
    def __init__(
        self,
        span_id: int,
        parent_id: int | None,
        start_ns: int,
        end_ns: int,
    ) -> None:
        self.span_id = span_id
        self.parent_id = parent_id
        self.start_ns = start_ns
        self.end_ns = end_ns


Record = ToolCall | TurnMark | LlmMark | Link

# Records are built once per span and never changed: plain slots classes build several times
# faster than frozen ones.
_KINDS: dict[type, str] = {
    ToolCall: KIND_TOOL,
    TurnMark: KIND_TURN,
    LlmMark: KIND_LLM,
    Link: KIND_OTHER,
}


def kind_of(record: Record) -> str:
    """The span kind of a record, as counted in loopwatch_spans_total{kind}."""
    return _KINDS[type(record)]
