"""Terminal results: what a guard answers instead of running a call, worded per error class."""

from __future__ import annotations

from dataclasses import dataclass

from loopwatch.core.outcomes import EMPTY, OK
from loopwatch.core.words import counted, plural

STOPPED = "stopped"
NO_ROWS_STOPPED = "no_rows_stopped"
BUDGET_EXHAUSTED = "budget_exhausted"
SUPPRESSED = "suppressed"
CIRCUIT_OPEN = "circuit_open"
STORE_UNAVAILABLE = "store_unavailable"
STORE_UNCHECKED = "store_unchecked"  # run unchecked: the store could not be reached
IN_FLIGHT = "in_flight"  # identical calls still running when the next one came
WRITTEN = "written"  # a write's successes: each did it again

# What the repeated attempts mean, and what the model should do instead. Honest above all: a
# timeout is not a failure, the write may have gone through, so the model must not say it failed.
_WHY = {
    "timeout": (
        "timed out. Their outcome is unknown: each of them may have succeeded",
        "Do not retry. Tell the user the request may already have gone through "
        "(possibly more than once) and needs to be checked before anything is sent again.",
    ),
    "rate_limited": (
        "were rate limited",
        "Do not retry in this turn. Tell the user the service is throttling requests and to "
        "try again later.",
    ),
    "unavailable": (
        "found the service unavailable",
        "Do not retry in this turn. Tell the user the service is down right now.",
    ),
    "invalid_arguments": (
        "were rejected as invalid; rewording the same request will not fix it",
        "Do not retry. Tell the user what was rejected and ask for the missing or correct "
        "information.",
    ),
    "unauthorized": (
        "were refused as not authorized",
        "Do not retry. Tell the user this needs someone with access.",
    ),
    "not_found": (
        "found nothing (not found)",
        "Do not retry. Tell the user it was not found.",
    ),
    "conflict": (
        "reported a conflict: it probably exists already",
        "Do not retry. Tell the user it appears to exist already.",
    ),
    "server_error": (
        "failed with a server error; whether anything was changed is not known",
        "Do not retry. Tell the user the service failed and the result needs to be checked.",
    ),
    "tool_error": (
        "failed with an error",
        "Do not retry. Tell the user the tool failed and what it said.",
    ),
    IN_FLIGHT: (
        "are still running; their outcome is not known yet",
        "Do not call it again. Wait for their results and report those.",
    ),
    OK: (
        "already succeeded; calling it again will not change the answer",
        "Do not call it again. Answer with the result you already have.",
    ),
    EMPTY: (
        "returned nothing each time",
        "Do not call it again. Tell the user nothing was found.",
    ),
    WRITTEN: (
        "already succeeded, and each call does it again",
        "Do not call it again: it is done. Tell the user what the first call did.",
    ),
}

# The rest of the answers that say the same whatever the call (after "... was not run").
_IN_PROGRESS = (
    ". The same request is already in progress and its outcome is not known yet. Do not retry. "
    "Tell the user it is being processed."
)
_ALREADY_DONE = (
    " again; the same request was already made. Do not retry. Report the first outcome to the user."
)
_STORE_UNAVAILABLE = (
    ". Whether the same request was already made cannot be checked right now, and running it "
    "twice could repeat its effect. Do not retry in this turn. Tell the user the request was "
    "not sent and to try again later."
)


@dataclass(frozen=True, slots=True)
class TerminalResult:
    """A guard's answer to a call it did not run. ``str()`` is the text to give the model."""

    decision: str  # one of loopwatch.core.records.GUARD_DECISIONS
    tool: str
    error_class: str  # of the attempts that exhausted the key ("ok" for successes)
    attempts: int
    message: str

    def __str__(self) -> str:
        return self.message


def _fields(identity: tuple[str, ...] | None) -> str:
    """``()``: an inferred identity that kept no parameter (all free text)."""
    if identity == ():
        return "the same request (reworded)"
    if identity is None or identity == ("*",):
        return "the same arguments"
    return "the same " + " and ".join(identity)


def _not_run(
    decision: str, tool: str, error_class: str, attempts: int, rest: str
) -> TerminalResult:
    """Every answer opens alike: who refused, and that ``tool`` was not run (``rest`` follows)."""
    who = "SUPPRESSED" if decision == SUPPRESSED else "STOPPED"
    message = f"{who} by loopwatch: {tool} was not run{rest}"
    return TerminalResult(decision, tool, error_class, attempts, message)


def repeat_stop(
    tool: str,
    error_class: str,
    outcome: str,
    attempts: int,
    identity: tuple[str, ...] | None,
    write: bool = False,
) -> TerminalResult:
    """The key (tool, identity, outcome) has used its attempts (``write``: a write's
    successes, each a side effect)."""
    if error_class == OK:
        reason = WRITTEN if write else EMPTY if outcome == EMPTY else OK
    else:
        reason = error_class
    why, what = _WHY.get(reason) or _WHY["tool_error"]
    rest = f" again. The last {attempts} attempts with {_fields(identity)} {why}. {what}"
    return _not_run(STOPPED, tool, error_class, attempts, rest)


def no_rows_stop(tool: str, streak: int) -> TerminalResult:
    rest = (
        f" again. It returned no rows {streak} times in a row; rewording the query will not "
        "find it. Do not search again. Tell the user nothing was found."
    )
    return _not_run(NO_ROWS_STOPPED, tool, OK, streak, rest)


def budget_stop(tool: str, budget: int) -> TerminalResult:
    rest = (
        f". The tool budget of this turn ({counted(budget, 'call')}) is used up. Do not call "
        "tools again. Answer with what you have."
    )
    return _not_run(BUDGET_EXHAUSTED, tool, OK, budget, rest)


def in_progress(tool: str) -> TerminalResult:
    return _not_run(SUPPRESSED, tool, OK, 1, _IN_PROGRESS)


def circuit_open(tool: str, error_class: str, duplicates: int) -> TerminalResult:
    rest = (
        f". The same request was already made and {counted(duplicates, 'duplicate')} of it "
        f"{plural(duplicates, 'was', 'were')} refused. Do not call it again. Report the first "
        "outcome to the user."
    )
    if error_class == "timeout":
        rest += " It timed out: it may have succeeded, and needs to be checked."
    return _not_run(CIRCUIT_OPEN, tool, error_class, duplicates, rest)


def already_done(tool: str, error_class: str, duplicates: int) -> TerminalResult:
    """A duplicate whose first outcome is not replayed (``replay=False``, or a result another
    process could not store as JSON)."""
    return _not_run(SUPPRESSED, tool, error_class, duplicates, _ALREADY_DONE)


def store_unavailable(tool: str) -> TerminalResult:
    return _not_run(STORE_UNAVAILABLE, tool, "unavailable", 0, _STORE_UNAVAILABLE)
