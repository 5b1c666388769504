"""Internal errors: a bug in loopwatch, or input no rule foresaw. The worker that meets one
goes on and counts it (``loopwatch_spans_dropped_total{reason="error"}``); this module makes
it seen: each kind (where it is caught, the exception's class, where it was raised) is logged
once at WARNING with its traceback, later ones of the kind at DEBUG, so a bug shows in the
log and a flood of it does not. The WARNING carries the exception's class and frames but not
its message, which may quote a span's arguments or results."""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from typing import Final

# Kinds remembered; past it every internal error is logged at DEBUG only (bounded memory).
MAX_KINDS: Final = 256
_Kind = tuple[str, str, str]


class _Seen:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.kinds: set[_Kind] = set()

    def first(self, kind: _Kind) -> bool:
        with self._lock:
            if kind in self.kinds or len(self.kinds) >= MAX_KINDS:
                return False
            self.kinds.add(kind)
            return True


_SEEN: Final = _Seen()


def log_internal_error(log: logging.Logger, what: str) -> None:
    """Log the exception being handled (call it in an ``except`` block): once per kind at
    WARNING, with the frames; at DEBUG, with the message, every time."""
    error = sys.exc_info()[1]
    if error is None:
        return
    frames = traceback.extract_tb(error.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
    name = type(error).__qualname__
    if _SEEN.first((what, name, where)):
        log.warning(
            "internal error (%s): %s, logged once for this kind (every one is counted in "
            'loopwatch_spans_dropped_total{reason="error"}); please report it with these '
            "frames:\n%s",
            what,
            name,
            "".join(traceback.format_list(frames)).rstrip(),
        )
    else:
        log.debug("internal error (%s)", what, exc_info=True)
