"""Whether a tool reads or writes, and why: declared, from MCP tool annotations, or inferred
from its name (or a multi-action tool's ``action`` argument); else a read.

A write's successful call never makes progress (core.summary): its result is not compared, and
its repeats on one identity are attempts of one key. Undeclared, a successful write is keyed on
its arguments minus prose (:func:`written_arguments`), except on a tool whose text *is* its
effect (it sends, posts or writes that text), where every argument stays.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Final

from loopwatch.core.identity import FREE_TEXT_CHARS, WHITESPACE

READ: Final = "read"
WRITE: Final = "write"
# A write whose server says a repeat has no further effect (MCP ``idempotentHint``): repeats
# are attempts as any write's, but a second success is no duplicate side effect.
IDEMPOTENT_WRITE: Final = "idempotent_write"
DECLARABLE: Final = (READ, WRITE)

# The argument that chooses what a multi-action tool does: message(action="send", ...).
ACTION_PARAMETER: Final = "action"

# Words of a tool's name (or its action) that make its text the effect: distinct texts are
# distinct effects, so the text stays in a write's identity.
TEXT_VERBS: Final = frozenset(
    {"send", "post", "reply", "write", "comment", "email", "publish", "notify", "message"}
)
# Words that make a tool a write (TEXT_VERBS included).
WRITE_VERBS: Final = TEXT_VERBS | frozenset(
    {
        "create", "add", "insert", "register", "upsert", "save", "upload", "copy",
        "update", "edit", "set", "put", "patch", "modify", "change", "rename", "move",
        "replace", "append", "mark", "assign", "apply", "restore", "archive",
        "delete", "remove", "drop", "destroy", "purge", "erase", "cancel", "revoke", "close",
        "book", "reserve", "schedule", "invite", "subscribe", "unsubscribe",
        "pay", "charge", "bill", "refund", "transfer", "withdraw", "deposit", "buy", "purchase",
        "sell", "grant", "approve", "reject", "submit", "deploy", "release", "rollback",
        "merge", "commit", "push", "tweet", "enable", "disable",
    }
)  # fmt: skip
# Verbs that only read: a name whose first verb is one of these reads, whatever it names after
# (get_message, list_comments, search_posts).
READ_VERBS: Final = frozenset(
    {
        "get", "list", "search", "find", "fetch", "read", "query", "lookup", "look", "show",
        "describe", "check", "count", "view", "retrieve", "load", "poll", "watch", "inspect",
        "stat", "browse", "explain", "calculate", "compute", "validate", "preview",
        "estimate", "is", "has", "can",
    }
)  # fmt: skip

# Parameter names that hold prose a model rewords (a summary, a description, a note): never
# a write's identity, however short their value.
PROSE_WORDS: Final = frozenset(
    {
        "summary", "description", "desc", "note", "notes", "details", "reason", "explanation",
        "memo", "remarks", "justification", "context", "instructions", "body", "text",
        "content", "comment", "comments", "message",
    }
)  # fmt: skip
# A short text with spaces names the thing written (a person, a title, "Order 19"): at most
# this many words and characters. Longer is prose.
NAME_WORDS: Final = 4
NAME_CHARS: Final = 40

_WORD: Final = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
# Characters of a name or action value read for words (a hostile value is cut).
_WORD_CHARS: Final = 200
# Tools whose effect is remembered (annotations learned, names inferred); past it, the
# inferred cache starts again and annotations of further tools are not kept.
MAX_TOOLS: Final = 4096


def words(name: str) -> list[str]:
    """The lower-case words of a snake_case, camelCase or kebab-case name."""
    return [w.lower() for w in _WORD.findall(name[:_WORD_CHARS])]


def _first_verb(name: str) -> str | None:
    """The first word of a name that is a verb that reads or writes: it says what the tool
    does (get_message reads, slackPostMessage posts)."""
    for w in words(name):
        if w in READ_VERBS or w in WRITE_VERBS:
            return w
    return None


def sends_text(tool: str, actions: Iterable[Any] = ()) -> bool:
    """True for a tool whose text is its effect: the first verb of its name, or of an
    ``action`` value it is called with (or declares), is one of TEXT_VERBS."""
    names = itertools.chain((tool,), (a for a in actions if isinstance(a, str)))
    return any(_first_verb(n) in TEXT_VERBS for n in names)


def inferred_effect(name: str) -> tuple[str, str]:
    """``(effect, why)`` of a tool or action name, from the first verb in it."""
    verb = _first_verb(name)
    if verb is None:
        return READ, "no verb that writes in its name"
    if verb in READ_VERBS:
        return READ, f"its name's first verb is {verb!r}, which reads"
    return WRITE, f"its name's first verb is {verb!r}, which writes"


def annotated_effect(annotations: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(effect, why)`` from MCP tool annotations; None when they say nothing of it.
    ``readOnlyHint`` true reads; otherwise ``destructiveHint`` true, ``idempotentHint`` true or
    ``readOnlyHint`` false writes (the spec's defaults: not read-only, destructive)."""
    if annotations.get("readOnlyHint") is True:
        return READ, "MCP readOnlyHint"
    if annotations.get("destructiveHint") is True:
        return WRITE, "MCP destructiveHint"
    if annotations.get("idempotentHint") is True:
        return IDEMPOTENT_WRITE, "MCP idempotentHint"
    if annotations.get("readOnlyHint") is False:
        return WRITE, "MCP readOnlyHint false"
    return None


class _Effects:
    """Effects learned from tool lists, and names already judged: both bounded."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.annotated: dict[str, tuple[str, str]] = {}
        # names already judged (the same few tools and parameters, call after call)
        self.inferred: dict[str, tuple[str, str]] = {}
        self.prose: dict[str, bool] = {}
        self.sends: dict[tuple[str, str | None], bool] = {}
        self.dropped = 0  # tools whose annotations were not kept: the map was full

    def reset(self) -> None:
        with self._lock:
            self.annotated, self.inferred, self.dropped = {}, {}, 0
            self.prose, self.sends = {}, {}

    def learn(self, tool: str, effect: tuple[str, str]) -> None:
        with self._lock:
            if tool not in self.annotated and len(self.annotated) >= MAX_TOOLS:
                self.dropped += 1
                return
            # a new dict each time: readers take it without the lock
            self.annotated = {**self.annotated, tool: effect}

    def by_name(self, name: str) -> tuple[str, str]:
        found = self.inferred.get(name)
        if found is None:
            found = inferred_effect(name)
            if len(self.inferred) >= MAX_TOOLS:
                self.inferred = {}
            self.inferred[name] = found
        return found

    def prose_name(self, name: str) -> bool:
        found = self.prose.get(name)
        if found is None:
            found = any(w in PROSE_WORDS for w in words(name))
            if len(self.prose) >= MAX_TOOLS:
                self.prose = {}
            self.prose[name] = found
        return found

    def text_tool(self, tool: str, action: Any) -> bool:
        key = (tool, action if isinstance(action, str) else None)
        found = self.sends.get(key)
        if found is None:
            found = sends_text(tool, (action,))
            if len(self.sends) >= MAX_TOOLS:
                self.sends = {}
            self.sends[key] = found
        return found


_EFFECTS: Final = _Effects()


def learn_tool_list(tools: Iterable[Any]) -> None:
    """Remember the effects that MCP tool annotations give (``tools/list`` entries, or tool
    definitions carrying ``annotations``); nothing else of a definition is read here."""
    for d in tools:
        if not isinstance(d, Mapping):
            continue
        inner = d.get("function")
        fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else d
        name, annotations = fn.get("name"), fn.get("annotations")
        if isinstance(name, str) and isinstance(annotations, Mapping):
            effect = annotated_effect(annotations)
            if effect is not None:
                _EFFECTS.learn(name, effect)


def forget_learned() -> None:
    """Forget the effects learned from tool lists (as a new process starts)."""
    _EFFECTS.reset()


def effect_of(tool: str, arguments: Any, declared: str | None) -> tuple[str, str]:
    """``(effect, why)`` of one call, in order of trust: the declared effect, the tool's MCP
    annotations, the verb of its ``action`` argument (a multi-action tool), the verb of its
    name; else a read."""
    if declared is not None:
        return declared, "declared"
    learned = _EFFECTS.annotated.get(tool)
    if learned is not None:
        return learned
    if type(arguments) is dict:
        action = arguments.get(ACTION_PARAMETER)
        if isinstance(action, str):
            effect, why = _EFFECTS.by_name(action)
            if effect != READ:
                return effect, why.replace("its name", f"its {ACTION_PARAMETER}", 1)
    return _EFFECTS.by_name(tool)


def is_prose(name: str, value: Any) -> bool:
    """A string a model rewords: under a prose name (PROSE_WORDS), long, or more than a short
    name's words."""
    if not isinstance(value, str):
        return False
    if len(value) > FREE_TEXT_CHARS or _EFFECTS.prose_name(name):
        return True
    if WHITESPACE.search(value) is None:
        return False
    return len(value) > NAME_CHARS or len(value.split()) > NAME_WORDS


def written_arguments(tool: str, arguments: Any) -> Any:
    """What an undeclared write's success is keyed on: every argument for a tool whose text is
    its effect, else the arguments minus prose (top-level fields; a bare value is kept unless
    it is prose)."""
    if type(arguments) is not dict:
        return None if is_prose("", arguments) else arguments
    if _EFFECTS.text_tool(tool, arguments.get(ACTION_PARAMETER)):
        return arguments
    return {k: v for k, v in arguments.items() if not is_prose(str(k), v)}
