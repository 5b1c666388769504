"""The outcome of one executed call, read the way the processor reads its span; and how a guard
hears of it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from loopwatch.core.declarations import ToolDeclaration
from loopwatch.core.outcomes import (
    OK,
    classify_error,
    classify_exception,
    error_text_in_result,
    result_fingerprint,
)


def outcome_of(
    result: Any, error: BaseException | None, declaration: ToolDeclaration | None
) -> tuple[str, str]:
    """``(error_class, outcome)``: outcome is the error class, or on success the result
    fingerprint (``empty``, ``rows`` or a result hash). An error returned as the result (as
    frameworks hand errors to the model) is an error, as it is on a span."""
    if error is not None:
        error_class = classify_exception(error)
        return error_class, error_class
    text = error_text_in_result(result)
    if text is not None:
        error_class = classify_error([], [text])
        return error_class, error_class
    return OK, result_fingerprint(result, declaration)


class Ran:
    """What a guarded block ran: it sets ``result``."""

    result: Any = None


@contextlib.contextmanager
def reported(report: Callable[[Any, BaseException | None], object]) -> Iterator[Ran]:
    """``report(result, None)`` after the block, or ``report(None, exception)`` for what it
    raised (raised again): one way for calls and for coroutines, which the block awaits."""
    ran = Ran()
    try:
        yield ran
    except Exception as e:
        report(None, e)
        raise
    report(ran.result, None)
