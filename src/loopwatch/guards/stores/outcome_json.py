"""Outcomes as JSON for the shared stores: the result itself, or an error's type and message.

Never pickle: a store another process or host can write must not be able to run code here.
"""

from __future__ import annotations

import builtins
import json
from typing import Any

from loopwatch.guards.stores.base import Outcome

# a result larger than this is not stored (a duplicate gets the terminal "already done" answer)
MAX_RESULT_CHARS = 1024 * 1024
_MAX_MESSAGE_CHARS = 2000
_VERSION = 1


class ReplayedError(Exception):
    """The first call raised an exception that is not a builtin one; replayed by type name."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type


def encode(outcome: Outcome) -> str:
    """JSON text of ``outcome``; a result that is not JSON (or too large) is marked unshared."""
    doc: dict[str, Any] = {"v": _VERSION, "error_class": outcome.error_class}
    if outcome.error is not None:
        message = str(outcome.error)[:_MAX_MESSAGE_CHARS]
        doc["error"] = {"type": type(outcome.error).__name__, "message": message}
        return json.dumps(doc)
    if outcome.shared:
        try:
            text = json.dumps({**doc, "result": outcome.result}, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            text = ""
        if text and len(text) <= MAX_RESULT_CHARS:
            return text
    doc["shared"] = False
    return json.dumps(doc)


def _error(error_type: str, message: str) -> BaseException:
    cls = getattr(builtins, error_type, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except Exception:  # a builtin whose constructor wants more than a message
            pass
    return ReplayedError(error_type, message)


def decode(text: str) -> Outcome:
    """The outcome :func:`encode` wrote; anything unreadable is an unshared outcome."""
    try:
        doc = json.loads(text)
    except (TypeError, ValueError):
        return Outcome("ok", shared=False)
    if not isinstance(doc, dict) or doc.get("v") != _VERSION:
        return Outcome("ok", shared=False)
    error_class = str(doc.get("error_class", "ok"))
    error = doc.get("error")
    if isinstance(error, dict):
        return Outcome(
            error_class, error=_error(str(error.get("type")), str(error.get("message", "")))
        )
    if "result" not in doc:
        return Outcome(error_class, shared=False)
    return Outcome(error_class, result=doc["result"])
