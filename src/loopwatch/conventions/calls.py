"""A tool call's record made from what was read of it, wherever it was read: a tool span
(conventions.read) or a model call's messages (conventions.messages). The generic rules live
here: results read for the errors they describe, the attempt key, the tool's version."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from loopwatch.conventions import results
from loopwatch.conventions.error_texts import framework_error_result
from loopwatch.conventions.payloads import decode_result
from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.core.effects import READ, effect_of
from loopwatch.core.identity import (
    MISSING,
    WHOLE_ARGUMENTS,
    get_path,
    identity_hash,
    short_hash,
    without_free_text,
)
from loopwatch.core.keys import AttemptKey, attempt_key
from loopwatch.core.outcomes import (
    OK,
    classify_error,
    error_text_in_result,
    progress_fingerprint,
    result_fingerprint,
)
from loopwatch.core.records import ToolCall
from loopwatch.core.undeclared import warn_undeclared

# Tool descriptions hashed (the same few, over and over), bounded in entries and text length.
_DESCRIPTIONS_CACHE_ENTRIES: Final = 64
_DESCRIPTIONS_CACHE_TEXT: Final = 64 * 1024


def read_result(raw_result: Any) -> tuple[bool, Any, str | None, list[str], str | None]:
    """``(known, result, error text, error types, result text)`` of a raw result: decoded,
    unwrapped, and read for an error it describes (only a mapping or a text can describe one;
    a list of rows cannot)."""
    result_known, result, result_error = decode_result(raw_result)
    result_types: list[str] = []
    result_text = None
    if result_known:
        if isinstance(result, str):
            result_text = result
            if result_error is None:
                result_error = framework_error_result(result) or error_text_in_result(result)
        elif isinstance(result, dict):
            described = results.error_in_result(result)
            if described is not None:
                result_types.append(described[0])
                result_error = result_error or described[1] or described[0]
            if result_error is None:
                result_error = error_text_in_result(result)
    return result_known, result, result_error, result_types, result_text


def keyed_call(
    span: tuple[int, int | None, int, int],
    tool: str,
    config: Config,
    arguments_read: tuple[bool, Any],
    result_read: tuple[bool, Any],
    errors: tuple[bool, list[str], list[str]],
    description: str | None = None,
    agent: str | None = None,
    guard: str | None = None,
) -> ToolCall:
    """The ToolCall of one call, its attempt key made from what was read of it: ``span`` is
    ``(span id, parent id, start, end)``, ``errors`` ``(errored, types, messages)``."""
    known, arguments = arguments_read
    result_known, result = result_read
    errored, types, messages = errors
    declaration = config.declaration(tool)
    if known:
        warn_undeclared(
            tool, arguments, declaration, result if result_known and not errored else None
        )
    progress, data = 0, False
    effect = effect_of(tool, arguments, declaration.effect if declaration else None)[0]
    if errored:
        error_class = classify_error(types, messages)
        outcome = error_class
        fingerprint = "unknown"
    else:
        error_class = OK
        fingerprint = result_fingerprint(result, declaration) if result_known else "unknown"
        outcome = fingerprint if result_known else OK
        # a write's answer is never compared: a fresh id is no progress
        if result_known and effect == READ:
            progress, data = progress_fingerprint(result, declaration, fingerprint)
    keying = _keying_declaration(arguments, declaration) if declaration is not None else None
    key = attempt_key(
        tool, arguments, outcome, keying, arguments_known=known, call=span[0], effect=effect
    )
    tool_version = description_hash(description) if description else ""
    failed_identity = (
        None
        if errored or not known or (keying is not None and keying.identity is not None)
        else _failed_identity(arguments, key)
    )
    same_result = _same_result(progress, arguments, known, failed_identity) if data else 0
    span_id, parent_id, start_ns, end_ns = span
    # In field order, without keywords: matching sixteen keywords costs more than the build.
    return ToolCall(
        span_id,
        parent_id,
        start_ns,
        end_ns,
        tool,
        key,
        error_class,
        fingerprint,
        known,
        tool_version,
        agent,
        guard,
        failed_identity,
        progress,
        same_result,
        effect,
    )


def _same_result(progress: int, arguments: Any, known: bool, wording_free: str | None) -> int:
    """What a same-result streak compares: the result's fingerprint with the identity of the
    arguments minus free text (``wording_free``, when already hashed). Equal for calls that got
    the same data for a reworded request, not for calls about another order or file."""
    if not known:
        wording_free = "?"
    elif wording_free is None:
        wording_free = identity_hash(without_free_text(arguments), None)
    same = hash((progress, wording_free))
    return same if same != 0 else 1


def _failed_identity(arguments: Any, key: AttemptKey) -> str:
    """For a successful call of an undeclared tool (``key``), the identity its arguments key to
    had it failed (core.keys: without free text): core.layers uses it when another
    instrumentation layer of the same call saw the failure."""
    kept = without_free_text(arguments)
    # The success's hash is the failure's only when both hashed the same value: nothing free
    # text left out, and a key on all the arguments (not a write's, keyed without its prose).
    return key.identity if kept == arguments and not key.inferred else identity_hash(kept, None)


_DESCRIPTION_HASHES: dict[str, str] = {}


def description_hash(description: str) -> str:
    """A tool's version: the short hash of its description (the same few, over and over)."""
    found = _DESCRIPTION_HASHES.get(description)
    if found is None:
        found = short_hash(description, 8)
        if len(description) <= _DESCRIPTIONS_CACHE_TEXT:  # the cache is bounded in bytes too
            if len(_DESCRIPTION_HASHES) >= _DESCRIPTIONS_CACHE_ENTRIES:
                _DESCRIPTION_HASHES.clear()
            _DESCRIPTION_HASHES[description] = found
    return found


_CONTAINERS: Final = (dict, list)  # (built once: ``dict | list`` builds a new union on every call)


def _keying_declaration(
    arguments: Any, declaration: ToolDeclaration | None
) -> ToolDeclaration | None:
    """The declaration to key with: keyed on all arguments when none of the identity fields can
    be read from the arguments (positional arguments, another shape), so that such calls do not
    all collapse into one identity of nulls."""
    fields = declaration.identity if declaration is not None else None
    if declaration is None or not fields or declaration.whole_arguments:
        return declaration
    if not isinstance(arguments, _CONTAINERS):
        # a bare value stands for the one declared field (core.identity), never for several
        if len(fields) == 1:
            return declaration
    else:
        for field in fields:  # (a loop, not any() over a generator: this runs per call)
            if get_path(arguments, field) is not MISSING:
                return declaration
    return replace(declaration, identity=(WHOLE_ARGUMENTS,))  # built only when needed: slow
