"""Identity of a tool call: the declared identity fields, or for an undeclared tool its
arguments (minus free text when the call failed), as canonical JSON."""

from __future__ import annotations

import hashlib
import importlib
import json
import json.encoder
import re
from collections.abc import Callable
from typing import Any, Final

WHOLE_ARGUMENTS: Final = "*"
# an identity of the whole arguments (built once)
WHOLE_ARGUMENTS_FIELDS: Final = (WHOLE_ARGUMENTS,)
# Free text: a string with whitespace, or longer than this (long enough for a UUID, a SHA-256
# hex digest or an e-mail address, short of a sentence written without spaces).
FREE_TEXT_CHARS: Final = 64
# Nesting read for free text; deeper values are kept whole (bounded work on hostile input).
_FREE_TEXT_DEPTH: Final = 8
WHITESPACE: Final = re.compile(r"\s")
_has_whitespace: Final = WHITESPACE.search
# isinstance's type tuples, built once (``dict | list`` builds a new union on every call)
_CONTAINERS: Final = (dict, list)


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


# One encoder for every call: json.dumps with options builds a new one each time.
_CANONICAL: Final = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
)
# The same encoder's C core, built once: JSONEncoder.encode builds it anew on every call (half
# of a small value's cost). Built without the circular-reference check (its shared memo would
# not be thread-safe): a cycle recurses until RecursionError, and then _CANONICAL runs, with the
# check, and raises what it always raised.
_make_encoder: Callable[..., Any] | None = getattr(json.encoder, "c_make_encoder", None)
_C_ENCODE: Final = (
    _make_encoder(None, repr, json.encoder.encode_basestring, None, ":", ",", True, False, True)
    if _make_encoder is not None
    else None
)


def canonical_json(value: Any) -> str:
    """Keys sorted recursively, no insignificant whitespace, numbers as JSON writes them."""
    if _C_ENCODE is not None:
        try:
            return "".join(_C_ENCODE(value, 0))
        except RecursionError:
            pass
    return _CANONICAL.encode(value)


def _builtin_sha256() -> Callable[[bytes], Any]:
    """CPython's own SHA-256 (hashlib's fallback without OpenSSL): for texts this short,
    OpenSSL's per-object set-up makes it the slower of the two (same digests)."""
    for module in ("_sha2", "_sha256"):  # (named _sha2 from Python 3.12)
        try:
            return importlib.import_module(module).sha256  # type: ignore[no-any-return]
        except (ImportError, AttributeError):
            pass
    return hashlib.sha256


_sha256: Final = _builtin_sha256()


def short_hash(text: str, length: int = 16) -> str:
    digest: str = _sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return digest[:length]


def get_path(value: Any, dotted: str) -> Any:
    """``a.b.0.c`` into nested mappings and lists; MISSING where the path does not lead."""
    if type(value) is dict and "." not in dotted:  # a top-level field: the common case
        return value.get(dotted, MISSING)
    current = value
    for part in dotted.split("."):
        if isinstance(current, dict):
            if part not in current:
                return MISSING
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return MISSING
    return current


def identity_values(arguments: Any, fields: tuple[str, ...] | None) -> Any:
    """The JSON value whose canonical form is the identity.

    ``fields`` None (or ``("*",)``) means the whole arguments. A bare scalar argument (a
    single-argument tool recorded without its parameter name) stands for the one declared field.
    """
    if not fields or fields == WHOLE_ARGUMENTS_FIELDS:
        return arguments
    if not isinstance(arguments, _CONTAINERS):
        if len(fields) == 1:
            return {fields[0]: arguments}
        return {f: None for f in fields}
    out: dict[str, Any] = {}
    for f in fields:
        v = get_path(arguments, f)
        out[f] = None if v is MISSING else v
    return out


# Identities already hashed, by canonical JSON: a loop repeats one call's arguments, and their
# SHA-256 costs several times the lookup. Bounded in entries and in text length.
IDENTITIES_KEPT: Final = 512
IDENTITY_TEXT_KEPT: Final = 512
_IDENTITIES: dict[str, str] = {}


def identity_hash(arguments: Any, fields: tuple[str, ...] | None) -> str:
    value = arguments if fields is None else identity_values(arguments, fields)
    text = canonical_json(value)
    found = _IDENTITIES.get(text)
    if found is None:
        found = short_hash(text)
        if len(text) <= IDENTITY_TEXT_KEPT:
            if len(_IDENTITIES) >= IDENTITIES_KEPT:
                _IDENTITIES.clear()
            _IDENTITIES[text] = found
    return found


def is_free_text(value: Any) -> bool:
    return isinstance(value, str) and (
        len(value) > FREE_TEXT_CHARS or _has_whitespace(value) is not None
    )


def without_free_text(arguments: Any, depth: int = 0) -> Any:
    """``arguments`` with every free-text string left out (mapping entries and list items;
    ``None`` for a bare free-text value): what an undeclared tool's failed call is keyed on."""
    if depth >= _FREE_TEXT_DEPTH:
        return arguments
    # Only containers are walked into; a mapping's values (most arguments) are tested inline:
    # an is_free_text call per value costs more than the test.
    if isinstance(arguments, dict):
        kept: dict[Any, Any] = {}
        for k, v in arguments.items():
            if isinstance(v, str):
                if len(v) > FREE_TEXT_CHARS or _has_whitespace(v) is not None:
                    continue
            elif isinstance(v, _CONTAINERS):
                v = without_free_text(v, depth + 1)
            kept[k] = v
        return kept
    if isinstance(arguments, list):
        return [
            without_free_text(v, depth + 1) if isinstance(v, _CONTAINERS) else v
            for v in arguments
            if not is_free_text(v)
        ]
    return None if is_free_text(arguments) else arguments
