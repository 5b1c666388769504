"""Volatile values: what changes on every answer without being news. Results are compared
without them, for progress and for the same-result streak alike (core.fingerprint).

Left out (each replaced by ``~``, so what stands around it still counts):

- the string or number value of a key that names an id, a session, a process, a run, a
  receipt, a clock, a duration or a working directory, in any spelling: ``id``, ``uuid``,
  ``pid``, ``ts``, ``took``, ``cwd``, ``etag``, ``nonce``, ``time``, ``timestamp``; any key
  ending ``_id``/``Id``/``ID``, ``_uuid``, ``_pid``/``Pid``, ``_at``/``At``, ``_ms``/``Ms``,
  ``_ts``, ``_time``/``Time``; any key starting ``session``, ``elapsed``, ``duration``,
  ``latency`` or ``receipt`` (``x-request-id``, ``trace_id``, ``runId``, ``checkedAt`` too),
  in a result's mappings but not in the rows of a list (there an id tells rows apart);
- anywhere, in JSON and text alike: date-times (``2026-03-02T10:00:03Z``, ``2026/03/02 10:00``)
  and clock times with seconds (``12:00:03``); UUIDs; hex of 16 digits or more, and of 8 to 15
  that mixes digits and letters; prefixed counters (``msg_8f3a``, ``sess-41``, ``req-7``,
  ``chatcmpl-9xQ``, and any ``word_`` followed by 8 or more letters and digits with a digit
  among them); epoch seconds and milliseconds (10 or 13 digits from ``1``); the value after
  ``request id``, ``trace id``, ``correlation id`` or ``pid`` (``pid 4312``, ``PID: 4312``);
  a number with a unit of time (``took 0.4s``, ``(12 ms)``, ``3 seconds``).

What remains is what progress is read from: a percentage that moves, a state that changes, rows
that differ, a log that grows. Every rule is a regular expression run once over the text, each
only after a cheap scan finds it may apply: linear in the text. The key rule reads the
result's mappings before they become text (:func:`without_volatile_keys`).
"""

from __future__ import annotations

import re
from typing import Any, Final

PLACEHOLDER: Final = "~"
_KEEP_FIRST: Final = r"\1~"

# Key names whose value is volatile, matched whole (a key is cut at MAX_KEY_CHARS first).
_VOLATILE_KEY: Final = re.compile(
    r"\A(?:(?i:id|uuid|guid|uid|pid|ppid|ts|took|cwd|etag|nonce|time|timestamp|workdir"
    r"|working[_-]?dir(?:ectory)?)"
    r"|(?i:session|receipt)(?:[_-]?(?i:id|key|token))?"
    r"|(?i:elapsed|duration|latency)(?:[_-]?(?i:ms|ns|us|s|secs?|seconds|millis|time))?"
    r"|(?i:x[_-]?)?(?i:request|trace|span|correlation)[_-]?(?i:id)"
    r"|[^\n]{0,64}?(?:_id|-id|Id|ID|_uuid|Uuid|_pid|Pid|_at|At|_ms|Ms|_ts|_time|Time"
    r"|_timestamp|Timestamp))\Z"
)
# The keys of ids: inside a list's rows they tell one row from another, and stay.
_ID_KEY: Final = re.compile(
    r"\A(?:(?i:id|uuid|guid|uid)|[^\n]{0,64}?(?:_id|-id|Id|ID|_uuid|Uuid))\Z"
)
MAX_KEY_CHARS: Final = 64
# Rows of a list read for volatile keys; later ones are compared whole (bounded work).
MAX_ROWS: Final = 1000
# Keys of a row past which its key set is not remembered (judged each time instead).
_ROW_KEYS: Final = 64
# Nesting of mappings read for volatile keys; deeper ones are kept whole (bounded work).
_KEY_DEPTH: Final = 8
# Key names already judged, bounded: results repeat the same few keys.
_KEYS_KEPT: Final = 4096
_DATE_TIMES: Final = re.compile(
    r"\d{4}[-/]\d\d[-/]\d\d[T ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?"
    r"|(?<!\d)\d{1,2}:\d\d:\d\d(?:[.,]\d+)?(?!\d)"
)
# a date-time holds one of these (each starts with a literal: a fast scan)
_DATE_GATE: Final = re.compile(r"-\d\d[T ]\d\d:")
_SLASHED_DATE_GATE: Final = re.compile(r"/\d\d[T ]\d\d:")
_CLOCK_GATE: Final = re.compile(r":\d\d:\d\d")
_UUIDS: Final = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)
_UUID_GATE: Final = re.compile(r"-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-")
# long hex, or shorter hex that mixes digits and letters (a short hash, not a count or a word)
_HEX: Final = re.compile(
    r"(?<![0-9A-Za-z_])(?:[0-9a-fA-F]{16,}"
    r"|(?=[0-9a-fA-F]{0,14}[a-fA-F])(?=[0-9a-fA-F]{0,14}[0-9])[0-9a-fA-F]{8,15})(?![0-9A-Za-z_])"
)
# a text holds a run of 8 hex digits where its UTF-8 bytes, translated, hold 8 h's (a C-speed
# scan: a pattern of hex digits tries a match at every digit of a JSON text, and a str
# translation looks each character up in a dict). A character past ASCII is bytes past 0x7f,
# each a space: it ends a run as it did.
_HEX_RUN: Final = b"h" * 8
_HEX_TABLE: Final = bytes(
    ord("h") if chr(c) in "0123456789abcdefABCDEF" else ord(" ") for c in range(256)
)
# A counter's tail: a separator, then letters and digits with a digit among them. Each is read
# back for the word before it (a pattern that starts with the word tries it at every letter).
_COUNTER_TAIL: Final = re.compile(r"[_-](?=[0-9A-Za-z]*\d)([0-9A-Za-z]++)(?![\w-])")
_WORD_BEFORE: Final = re.compile(r"[A-Za-z]{1,12}\Z")
# words that name what a counter counts: msg_8f3a, sess-41, req-7, chatcmpl-9xQ
COUNTER_WORDS: Final = frozenset(
    {
        "msg", "message", "sess", "session", "req", "request", "evt", "call", "resp",
        "chatcmpl", "toolu", "trace", "span", "conn",
    }
)  # fmt: skip
# the counter words that hold no other one: a text holds a counter word when it holds one of
# these (``session`` holds ``sess``), so fewer substring scans tell the same
_COUNTER_GATE_WORDS: Final = tuple(
    w for w in sorted(COUNTER_WORDS) if not any(o != w and o in w for o in COUNTER_WORDS)
)
# any word_ and this many letters and digits or more (a generated id: ch_3MtwBwLkdIwHu7ix)
_GENERATED_TAIL: Final = 8
# where a generated id may stand (a literal first: a fast scan)
_GENERATED_GATE: Final = re.compile(r"_[0-9A-Za-z]{8}")
# epoch seconds and milliseconds from 2014 to 2033 (a ten-digit byte count is no clock)
_EPOCHS: Final = re.compile(r"1(?<![\w.]1)[4-9]\d{8}(?:\d{3})?(?:\.\d+)?(?![\w.])")
_EPOCHS_20: Final = re.compile(r"2(?<![\w.]2)0\d{8}(?:\d{3})?(?:\.\d+)?(?![\w.])")
_NAMED_IDS: Final = re.compile(
    r"\b((?i:(?:request|trace|correlation)[ _-]?id|pid)\b[\s:=#\"']{0,3})[\w.-]+"
)
_NAMED_ID_WORDS: Final = ("request", "trace", "correlation", "pid")
# a number with a unit of time: a duration (the 1990s too, which is rarely what a poll shows)
_DURATIONS: Final = re.compile(
    r"(?<![\w.])(?:[0-9]+h)?(?:[0-9]+m)?[0-9]+(?:\.[0-9]+)? ?(?:ns|us|µs|ms|s|sec|secs|seconds)\b"
)
_DIGIT: Final = re.compile(r"\d")
_SCALARS: Final = (str, int, float)  # (bool is an int: a flag under a volatile key goes too)


def _sub(pattern: re.Pattern[str], replacement: str, text: str) -> str:
    # a search first: a sub that finds nothing still builds a new string
    return pattern.sub(replacement, text) if pattern.search(text) is not None else text


class _Keys:
    """Key names judged volatile or not: the same few, over and over."""

    def __init__(self) -> None:
        self.judged: dict[str, tuple[bool, bool]] = {}
        self.rows: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    def volatile(self, name: str, in_row: bool) -> bool:
        """Whether ``name``'s value is volatile; ``in_row``: in a list's row, where an id
        key tells rows apart and stays."""
        name = name[:MAX_KEY_CHARS]
        found = self.judged.get(name)
        if found is None:
            found = (
                _VOLATILE_KEY.match(name) is not None,
                _ID_KEY.match(name) is not None,
            )
            if len(self.judged) >= _KEYS_KEPT:
                self.judged.clear()
            self.judged[name] = found
        return found[0] and not (in_row and found[1])

    def of_row(self, row: dict[Any, Any]) -> tuple[Any, ...]:
        """The keys of a row whose values are volatile (ids aside), judged once per key set."""
        keys = tuple(row)
        if len(keys) > _ROW_KEYS:
            return tuple(k for k in keys if type(k) is str and self.volatile(k, True))
        found = self.rows.get(keys)
        if found is None:
            found = tuple(k for k in keys if type(k) is str and self.volatile(k, True))
            # remembered only for short names: the cache holds them (bounded in bytes)
            if all(type(k) is str and len(k) <= MAX_KEY_CHARS for k in keys):
                if len(self.rows) >= _KEYS_KEPT:
                    self.rows.clear()
                self.rows[keys] = found
        return found


_KEYS: Final = _Keys()


def without_volatile_keys(value: Any, depth: int = 0, in_row: bool = False) -> Any:
    """A mapping with the string or number value of each volatile key replaced by ``~``, in
    nested mappings and in a list's rows too; in a row an id key stays (it tells one row from
    another, and a different row is news). Anything else is returned as it is, and so is a
    value with nothing to replace."""
    kind = type(value)
    if depth >= _KEY_DEPTH or (kind is not dict and kind is not list):
        return value
    if kind is list:
        rows: list[Any] = []
        changed = False
        # (a loop: a comprehension and then a zip over both lists to find a change cost more)
        for v in value if len(value) <= MAX_ROWS else value[:MAX_ROWS]:
            kept = _row(v) if type(v) is dict else without_volatile_keys(v, depth + 1, True)
            changed = changed or kept is not v
            rows.append(kept)
        if not changed:
            return value
        return rows + value[MAX_ROWS:]
    out: dict[Any, Any] = {}
    changed = False
    for k, v in value.items():
        if type(v) is dict or type(v) is list:
            kept = without_volatile_keys(v, depth + 1, in_row)
            changed = changed or kept is not v
            v = kept
        elif isinstance(v, _SCALARS) and type(k) is str and _KEYS.volatile(k, in_row):
            v, changed = PLACEHOLDER, True
        out[k] = v
    return out if changed else value


def _row(row: dict[Any, Any]) -> dict[Any, Any]:
    """One row of a list without its volatile values (its own keys: a row's nested objects are
    compared whole). Rows of one list share their keys: what to replace is judged once for
    each set of keys."""
    names = _KEYS.of_row(row)
    if not names:
        return row
    out = dict(row)
    for name in names:
        if isinstance(out[name], _SCALARS):
            out[name] = PLACEHOLDER
    return out


def _names_a_counter(low: str) -> bool:
    """Whether a lower-case text holds a COUNTER_WORDS word."""
    for word in _COUNTER_GATE_WORDS:  # noqa: SIM110 (any() over a generator costs more here)
        if word in low:
            return True
    return False


def _without_counters(text: str) -> str:
    """``text`` with each prefixed counter (a COUNTER_WORDS word, ``_`` or ``-``, a tail with a
    digit; or any word, ``_`` and a tail of _GENERATED_TAIL or more, not all digits) replaced.
    Looked for only where a counter word or a long ``_`` tail stands (substring scans in C:
    reading every ``-`` of a large JSON answer back for its word costs more)."""
    if not _names_a_counter(text.lower()) and _GENERATED_GATE.search(text) is None:
        return text
    parts: list[str] = []
    kept = 0
    for tail in _COUNTER_TAIL.finditer(text):
        start = tail.start()
        word = _WORD_BEFORE.search(text, max(0, start - 12), start)
        if word is None or (
            word.start() > 0
            and (text[word.start() - 1].isalnum() or text[word.start() - 1] in "_-")
        ):
            continue
        tail_text = tail.group(1)
        generated = (
            text[start] == "_"
            and len(tail_text) >= _GENERATED_TAIL
            and not tail_text.isdigit()  # a date or a count (backup_20260302) is no id
        )
        if word.group().lower() in COUNTER_WORDS or generated:
            parts.append(text[kept : word.start()])
            parts.append(PLACEHOLDER)
            kept = tail.end()
    if not parts:
        return text
    parts.append(text[kept:])
    return "".join(parts)


def without_volatile(text: str, json_text: bool) -> str:
    """``text`` with every volatile value replaced by ``~`` (the module's rules but the key
    rule, which without_volatile_keys applies to the value); ``json_text``: canonical JSON,
    where the rules for text alone (named ids, durations) do not run."""
    if _DIGIT.search(text) is None:
        return text  # every value rule below needs a digit
    if (
        _DATE_GATE.search(text) is not None
        or _CLOCK_GATE.search(text) is not None
        or ("/" in text and _SLASHED_DATE_GATE.search(text) is not None)
    ):
        text = _DATE_TIMES.sub(PLACEHOLDER, text)
    if _UUID_GATE.search(text) is not None:
        text = _UUIDS.sub(PLACEHOLDER, text)
    if _HEX_RUN in text.encode("utf-8", "surrogatepass").translate(_HEX_TABLE):
        text = _sub(_HEX, PLACEHOLDER, text)
    text = _without_counters(text)
    text = _sub(_EPOCHS, PLACEHOLDER, text)
    text = _sub(_EPOCHS_20, PLACEHOLDER, text)
    if json_text:
        return text
    low = text.lower()
    if any(word in low for word in _NAMED_ID_WORDS):
        text = _sub(_NAMED_IDS, _KEEP_FIRST, text)
    return _sub(_DURATIONS, PLACEHOLDER, text)
