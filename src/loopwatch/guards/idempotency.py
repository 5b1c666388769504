"""Idempotency keys from a tool's identity fields: the same intent always gets the same key."""

from __future__ import annotations

import functools
from typing import Any

from loopwatch.core.config import Config, load_config
from loopwatch.core.identity import MISSING, WHOLE_ARGUMENTS, get_path, short_hash
from loopwatch.core.keys import attempt_key

KEY_PREFIX = "lw1-"


class UndeclaredToolError(LookupError):
    """The tool has no identity declaration, so no idempotency key can be derived."""


@functools.cache
def _default_config() -> Config:
    # read once: a key must not change because a file was edited while the process runs
    return load_config()


def idempotency_key(tool: str, arguments: Any, config: Config | None = None) -> str:
    """A stable key from ``tool``'s declared identity fields, for the write API.

    Free text (a reworded ``summary``) does not change it; a different identity does. A tool
    without an identity declaration raises :class:`UndeclaredToolError`: neither the whole
    arguments nor the metrics' inferred key (arguments minus free text) is exact enough to
    merge writes on (``identity = "*"`` makes the whole arguments an explicit choice).
    ``config`` defaults to :func:`loopwatch.load_config`, read once.
    """
    cfg = config if config is not None else _default_config()
    declaration = cfg.declaration(tool)
    if declaration is None or declaration.identity is None:
        raise UndeclaredToolError(
            f"tool {tool!r} has no identity declaration, so it has no idempotency key (a key "
            "that merges writes must be exact, never inferred): declare "
            f'identity = ["field", ...] in [tools.{tool}] of loopwatch.toml, in x-loopwatch, or '
            f'with @loopwatch.tool(identity=[...]) (identity = "*" keys on all arguments, which '
            "breaks as soon as the model rewords free text)"
        )
    if not declaration.whole_arguments:
        missing = [f for f in declaration.identity if get_path(arguments, f) is MISSING]
        if missing and isinstance(arguments, dict | list):
            raise ValueError(
                f"tool {tool!r}: arguments lack identity field(s) {', '.join(missing)}; "
                "a key without them would merge unrelated requests"
            )
    # the one attempt-key function: the key is its identity half, namespaced by the tool
    key = attempt_key(tool, arguments, WHOLE_ARGUMENTS, declaration)
    return KEY_PREFIX + short_hash(f"{key.tool}\n{key.identity}", 32)
