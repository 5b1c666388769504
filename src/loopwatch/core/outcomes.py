"""Outcomes of a tool call: the error class (a closed vocabulary) or, on success, the result
fingerprint (``empty``, ``rows`` or the hash of the declared part of the result), and the
fingerprint that tells progress (core.fingerprint)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

from loopwatch.core import fingerprint as fingerprints
from loopwatch.core.declarations import (
    REGEX_RESULT,
    ROWS,
    WHOLE_RESULT,
    ToolDeclaration,
    declared_pattern,
)
from loopwatch.core.identity import MISSING, canonical_json, get_path, short_hash

OK: Final = "ok"
ERROR_CLASSES: Final = (
    "timeout",
    "rate_limited",
    "unavailable",
    "invalid_arguments",
    "unauthorized",
    "not_found",
    "conflict",
    "server_error",
    "tool_error",
)
EMPTY: Final = "empty"
# the length of a declared part's hash, as an attempt key's outcome
_PART_HASH_CHARS: Final = 12
# How much of one message, error type or status description is read to classify it: what
# names the failure comes first, and a bound keeps a hostile megabyte-long message cheap.
MAX_EXAMINED_CHARS: Final = 4 * 1024

# Exception classes whose name alone decides (last dotted component, lower case).
_SPECIFIC_TYPES: Final = {
    "timeout": "timeout timeouterror readtimeout connecttimeout writetimeout pooltimeout "
    "timeoutexception deadlineexceeded apitimeouterror timeoutexpired",
    "rate_limited": "ratelimiterror ratelimitexceeded toomanyrequests resourceexhausted "
    "throttlingexception",
    "unavailable": "connectionerror connecterror connectionrefusederror connectionreseterror "
    "connectionabortederror brokenpipeerror serviceunavailable unavailable "
    "apiconnectionerror remoteprotocolerror",
    "unauthorized": "permissionerror permissiondenied permissiondeniederror unauthenticated "
    "authenticationerror unauthorized forbidden",
    "not_found": "filenotfounderror notfound notfounderror",
    "conflict": "conflict conflicterror alreadyexists fileexistserror integrityerror",
    "invalid_arguments": "validationerror jsondecodeerror invalidargument badrequest "
    "badrequesterror unprocessableentityerror",
    "server_error": "internalservererror internalerror servererror",
}
_TYPE_CLASS: Final = {name: cls for cls, names in _SPECIFIC_TYPES.items() for name in names.split()}
# Generic builtins: their message is read first, their name is only a fallback.
_WEAK_TYPE_CLASS: Final = {
    "valueerror": "invalid_arguments",
    "typeerror": "invalid_arguments",
    "keyerror": "not_found",
    "lookuperror": "not_found",
}

# Read in this order: the first class whose pattern matches wins.
_MESSAGE_PATTERNS: Final = [
    (
        "timeout",
        re.compile(r"time[sd]?[ _-]?out|deadline[ _]?exceeded|\b(?:408|504)\b", re.IGNORECASE),
    ),
    (
        "rate_limited",
        re.compile(
            r"rate[ _-]?limit|too many requests|throttl|quota|resource[ _]?exhausted|\b429\b",
            re.IGNORECASE,
        ),
    ),
    (
        "unauthorized",
        re.compile(
            r"unauthori[sz]ed|unauthenticated|forbidden|permission denied|access denied"
            r"|invalid api key|\b40[13]\b",
            re.IGNORECASE,
        ),
    ),
    (
        "unavailable",
        re.compile(
            r"unavailable|connection (?:refused|reset|error|aborted)|could not connect"
            r"|\b50[23]\b",
            re.IGNORECASE,
        ),
    ),
    (
        "not_found",
        re.compile(r"not found|no such|does not exist|\b404\b", re.IGNORECASE),
    ),
    (
        "conflict",
        re.compile(r"conflict|already exists|duplicate|\b409\b", re.IGNORECASE),
    ),
    (
        "invalid_arguments",
        re.compile(
            r"invalid|validation|malformed|bad request|missing required|unprocessable"
            r"|parsing tool arguments|\b4(?:00|22)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "server_error",
        re.compile(r"internal (?:server )?error|server error|\b5\d\d\b", re.IGNORECASE),
    ),
]

# A successful call whose result reads as an error (frameworks that hand the error to the model).
_ERROR_RESULT: Final = re.compile(
    r"^\s*(?:error|exception|failed|failure|tool error)\b|an error occurred while",
    re.IGNORECASE,
)


def _type_name(text: str) -> str:
    return text[-MAX_EXAMINED_CHARS:].rsplit(".", 1)[-1].strip().lower()


def classify_error(types: Iterable[str], messages: Iterable[str]) -> str:
    """Error class from exception or ``error.type`` names and from message texts, best first."""
    type_list = [t for t in types if t]
    for t in type_list:
        cls = _TYPE_CLASS.get(_type_name(t))
        if cls:
            return cls
    # error.type is sometimes a message (Logfire's Claude integration), so types are read too.
    for text in [*messages, *type_list]:
        if not text:
            continue
        for cls, pattern in _MESSAGE_PATTERNS:
            if pattern.search(text, 0, MAX_EXAMINED_CHARS):
                return cls
    for t in type_list:
        cls = _WEAK_TYPE_CLASS.get(_type_name(t))
        if cls:
            return cls
    return "tool_error"


def classify_exception(exc: BaseException) -> str:
    """Error class of a Python exception raised by a tool (for the guards)."""
    names = [f"{c.__module__}.{c.__qualname__}" for c in type(exc).__mro__[:-2]]
    return classify_error(names, [str(exc)])


def error_text_in_result(result: Any) -> str | None:
    """The error message a framework returned as the tool's result, if it did."""
    if isinstance(result, str):
        return result if _ERROR_RESULT.search(result[:200]) else None
    if isinstance(result, dict):
        if result.get("isError") is True or result.get("is_error") is True:
            return canonical_json(result)[:500]
        err = result.get("error")
        if err and len(result) <= 3:
            return err if isinstance(err, str) else canonical_json(err)[:500]
    return None


# "No value" rather than "no rows": what a tool that returns nothing (Python's None) records.
# A side-effect tool called for six orders returns it six times; that is work, not an empty
# search, so it counts as empty only for a tool declared ``result = "rows"``.
_NO_VALUE_TEXTS: Final = ("null", "None")
# isinstance's type tuples, built once (``list | tuple`` builds a new union on every call)
_SEQUENCES: Final = (list, tuple)
_CONTAINERS: Final = (list, dict)


def is_empty(value: Any, *, no_value_is_empty: bool = True) -> bool:
    """No rows: ``[]``, ``{}``, ``""``, or a mapping whose collections are all empty
    (``{"results": []}``); and ``null`` unless ``no_value_is_empty`` is false."""
    if value is None:
        return no_value_is_empty
    if isinstance(value, str):
        text = value.strip()
        if text in _NO_VALUE_TEXTS:
            return no_value_is_empty
        return text in ("", "[]", "{}")
    if isinstance(value, _SEQUENCES):
        return len(value) == 0
    if isinstance(value, dict):
        if not value:
            return True
        collections = [v for v in value.values() if isinstance(v, _CONTAINERS)]
        return bool(collections) and all(len(v) == 0 for v in collections)
    return False


def declared_part(result: Any, part: str) -> Any:
    """The part of a result a ``result`` declaration names: ``"*"`` the whole result; ``"re:"``
    and a regular expression, its first match in the result's text (a text as it is, any
    other value as canonical JSON; at most MAX_HASHED_CHARS of it searched), its groups
    joined when it has any; else a dotted path. MISSING where there is none."""
    if part == WHOLE_RESULT:
        return result
    if part.startswith(REGEX_RESULT):
        text, _ = fingerprints.result_text(result)
        # (validated when declared)
        match = declared_pattern(part).search(text, 0, fingerprints.MAX_HASHED_CHARS)
        if match is None:
            return MISSING
        groups = match.groups()
        if not groups:
            return match.group(0)
        return "\x00".join(g or "" for g in groups) if len(groups) > 1 else (groups[0] or "")
    return get_path(result, part)


def result_fingerprint(result: Any, declaration: ToolDeclaration | None) -> str:
    """``empty``/``rows``, or with a declared part of the result (declared_part), ``empty`` or
    a hash of that part: of its normalized text for the whole result (core.fingerprint)."""
    part = declaration.result if declaration is not None else None
    if part and part != ROWS:
        value = declared_part(result, part)
        if value is MISSING or is_empty(value):
            return EMPTY
        if part == WHOLE_RESULT:
            return fingerprints.stable_fingerprint(value, _PART_HASH_CHARS)
        return short_hash(canonical_json(value), _PART_HASH_CHARS)
    return EMPTY if is_empty(result, no_value_is_empty=part == ROWS) else ROWS


def progress_fingerprint(
    result: Any, declaration: ToolDeclaration | None, outcome: str
) -> tuple[int, bool]:
    """``(fingerprint, data)`` of a successful call's known result whose attempt-key outcome
    is ``outcome`` (result_fingerprint): the fingerprint two calls of one key compare to tell
    progress, and whether the result is data a same-result streak counts (a declared result,
    or core.fingerprint.carries_data). A declared part is its fingerprint; else the whole
    result, normalized."""
    if outcome == EMPTY:
        return fingerprints.EMPTY, False
    part = declaration.result if declaration is not None else None
    if part and part != ROWS:
        found = hash(outcome)
        if found in (fingerprints.NOT_KNOWN, fingerprints.EMPTY):
            found += 2
        return found, True
    return fingerprints.fingerprint(result), part == ROWS or fingerprints.carries_data(result)
