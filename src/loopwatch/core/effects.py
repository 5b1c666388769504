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

from loopwatch.core.identity import WHITESPACE

READ: Final = "read"
WRITE: Final = "write"
# A write whose server says a repeat has no further effect (MCP ``idempotentHint``): repeats
# are attempts as any write's, but a second success is no duplicate side effect.
IDEMPOTENT_WRITE: Final = "idempotent_write"
DECLARABLE: Final = (READ, WRITE)

# The argument that chooses what a multi-action tool does: message(action="send", ...).
ACTION_PARAMETER: Final = "action"

# Verbs of a tool's name (or its action) that make its text the effect: distinct texts are
# distinct effects, so the text stays in a write's identity.
TEXT_VERBS: Final = frozenset(
    {
        "send", "post", "reply", "write", "comment", "email", "publish", "notify", "message",
        "edit", "patch", "apply", "save", "append", "replace",
    }
)  # fmt: skip
# Nouns that make a write's text its effect wherever they stand (add_issue_comment, add_note).
TEXT_NOUNS: Final = frozenset({"comment", "message", "note", "reply", "email", "post", "review"})
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
        "merge", "commit", "push", "tweet", "enable", "disable", "reset", "restart", "kill",
        "trigger", "generate", "start", "stop",
    }
)  # fmt: skip
# Write verbs that are often nouns: before what a read returns (refund_status, message_history,
# deploy_status, comment_count, book_search) the name reads about the thing.
NOUN_VERBS: Final = frozenset(
    {
        "refund", "transfer", "release", "deploy", "merge", "message", "comment", "post",
        "book", "schedule", "close", "push", "email", "reply", "charge", "bill", "deposit",
        "commit", "publish", "review", "patch", "copy", "mark",
    }
)  # fmt: skip
# What a name that reads about a thing ends in.
READ_NOUNS: Final = frozenset(
    {
        "status", "state", "history", "info", "details", "detail", "count", "logs", "stats",
        "progress", "conflicts", "price", "date", "metadata", "preview", "summary",
    }
)  # fmt: skip
# Verbs that only read: a name whose verb is one of these reads, whatever it names after
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
# a write's identity, however short their value; on a tool whose text is its effect, only the
# body stays (BODY_WORDS).
PROSE_WORDS: Final = frozenset(
    {
        "summary", "description", "desc", "note", "notes", "details", "reason", "explanation",
        "memo", "remarks", "justification", "context", "instructions", "body", "text",
        "content", "comment", "comments", "message",
    }
)  # fmt: skip
# A short text with spaces names the thing written (a person, a title, "Order 19"): at most
# this many words and characters. Longer is prose.
# The names of a text tool's body: its text is what it writes.
BODY_WORDS: Final = frozenset(
    {
        "body", "text", "content", "comment", "comments", "message", "note", "notes", "reply",
        "patch", "diff", "code", "string", "html", "markdown",
    }
)  # fmt: skip
NO_VERB: Final = "no verb that writes in its name"
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


def _verb(found: list[str]) -> str | None:
    """The verb that says what a tool does: its name's first word, or the second after one
    prefix (slack_post_message, github_create_issue); in a name of two words, a second word
    that is often a noun is not its verb (flight_schedule)."""
    for i, w in enumerate(found[:2]):
        if w in READ_VERBS or w in WRITE_VERBS:
            if i and len(found) == 2 and w in NOUN_VERBS:
                return None
            return w
    return None


def _reads_about(found: list[str]) -> bool:
    """A name that ends in what a read returns (a status, a history, a count, a search) and
    starts with no plain write verb: refund_status, message_history, address_book_lookup."""
    if len(found) < 2 or (found[-1] not in READ_NOUNS and found[-1] not in READ_VERBS):
        return False
    return found[0] not in WRITE_VERBS or found[0] in NOUN_VERBS


def sends_text(tool: str, actions: Iterable[Any] = ()) -> bool:
    """True for a write whose text is its effect: the verb of its name, or of an ``action``
    value it is called with (or declares), is one of TEXT_VERBS, or a word of the name of a
    write is one of TEXT_NOUNS (add_issue_comment)."""
    names = itertools.chain((tool,), (a for a in actions if isinstance(a, str)))
    for name in names:
        found = words(name)
        if _reads_about(found):
            continue
        verb = _verb(found)
        if verb in TEXT_VERBS or (verb in WRITE_VERBS and any(w in TEXT_NOUNS for w in found)):
            return True
    return False


def inferred_effect(name: str) -> tuple[str, str]:
    """``(effect, why)`` of a tool or action name, from its verb (_verb), unless it reads about
    a thing (_reads_about)."""
    found = words(name)
    if _reads_about(found):
        return READ, f"its name ends in {found[-1]!r}: it reads about a thing"
    verb = _verb(found)
    if verb is None:
        return READ, NO_VERB
    if verb in READ_VERBS:
        return READ, f"its name's verb is {verb!r}, which reads"
    return WRITE, f"its name's verb is {verb!r}, which writes"


def annotated_effect(annotations: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(effect, why)`` from MCP tool annotations; None when they say nothing of it.
    ``readOnlyHint`` true reads; otherwise ``idempotentHint`` true is a write whose repeat has
    no further effect (even when destructive: a second delete deletes nothing), and
    ``destructiveHint`` true or ``readOnlyHint`` false a write."""
    if annotations.get("readOnlyHint") is True:
        return READ, "MCP readOnlyHint"
    if annotations.get("idempotentHint") is True:
        return IDEMPOTENT_WRITE, "MCP idempotentHint"
    if annotations.get("destructiveHint") is True:
        return WRITE, "MCP destructiveHint"
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
        self.body: dict[str, bool] = {}
        self.sends: dict[tuple[str, str | None], bool] = {}
        self.dropped = 0  # tools whose annotations were not kept: the map was full

    def reset(self) -> None:
        with self._lock:
            self.annotated, self.inferred, self.dropped = {}, {}, 0
            self.prose, self.body, self.sends = {}, {}, {}

    def learn(self, learned: dict[str, tuple[str, str]]) -> None:
        """Add a tool list's effects (names of at most _WORD_CHARS), past MAX_TOOLS none."""
        with self._lock:
            merged = dict(self.annotated)  # readers take the map without the lock: a new one
            for tool, effect in learned.items():
                if tool not in merged and len(merged) >= MAX_TOOLS:
                    self.dropped += 1
                    continue
                merged[tool] = effect
            if merged != self.annotated:
                self.annotated = merged

    def by_name(self, name: str) -> tuple[str, str]:
        name = name[:_WORD_CHARS]
        found = self.inferred.get(name)
        if found is None:
            found = inferred_effect(name)
            if len(self.inferred) >= MAX_TOOLS:
                self.inferred = {}
            self.inferred[name] = found
        return found

    def prose_name(self, name: str) -> bool:
        return self._judged(self.prose, name, PROSE_WORDS)

    def body_name(self, name: str) -> bool:
        return self._judged(self.body, name, BODY_WORDS)

    @staticmethod
    def _judged(judged: dict[str, bool], name: str, among: frozenset[str]) -> bool:
        """Whether a word of ``name`` is ``among`` those words, remembered (bounded)."""
        name = name[:_WORD_CHARS]
        found = judged.get(name)
        if found is None:
            found = any(w in among for w in words(name))
            if len(judged) >= MAX_TOOLS:
                judged.clear()
            judged[name] = found
        return found

    def text_tool(self, tool: str, action: Any) -> bool:
        key = (tool[:_WORD_CHARS], action[:_WORD_CHARS] if isinstance(action, str) else None)
        found = self.sends.get(key)
        if found is None:
            found = sends_text(tool, (action,))
            if len(self.sends) >= MAX_TOOLS:
                self.sends = {}
            self.sends[key] = found
        return found


_EFFECTS: Final = _Effects()


def tool_function(definition: Any) -> Mapping[str, Any] | None:
    """A tool definition's function (its name, description, parameters): nested under
    ``function`` (OpenAI's function tools) or the definition itself; None for a definition that
    is not a mapping."""
    if not isinstance(definition, Mapping):
        return None
    inner = definition.get("function")
    return inner if isinstance(inner, Mapping) else definition


def learn_tool_list(tools: Iterable[Any]) -> None:
    """Remember the effects that MCP tool annotations give (``tools/list`` entries, or tool
    definitions carrying ``annotations``); nothing else of a definition is read here."""
    learned: dict[str, tuple[str, str]] = {}
    for d in tools:
        fn = tool_function(d)
        if fn is None:
            continue
        name, annotations = fn.get("name"), fn.get("annotations")
        if isinstance(name, str) and len(name) <= _WORD_CHARS and isinstance(annotations, Mapping):
            effect = annotated_effect(annotations)
            if effect is not None:
                learned[name] = effect
    if learned:
        _EFFECTS.learn(learned)


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
            if why != NO_VERB:  # the action says what this call does, read or write
                return effect, why.replace("its name", f"its {ACTION_PARAMETER}", 1)
    return _EFFECTS.by_name(tool)


def is_prose(name: str, value: Any, body: bool = False) -> bool:
    """A string a model rewords: under a prose name (PROSE_WORDS; with ``body``, one that is not
    a text tool's body), or text with spaces longer than a short name (NAME_WORDS, NAME_CHARS).
    A value without spaces (a path, a URL, an id) is never prose, however long."""
    if not isinstance(value, str):
        return False
    if _EFFECTS.prose_name(name) and not (body and _EFFECTS.body_name(name)):
        return True
    if WHITESPACE.search(value) is None:
        return False
    if body:
        return False  # a text tool's text is its effect
    return len(value) > NAME_CHARS or len(value.split()) > NAME_WORDS


# Nesting of mappings read for prose in a write's arguments; deeper ones are kept whole.
_PROSE_DEPTH: Final = 8


def written_arguments(tool: str, arguments: Any) -> Any:
    """What an undeclared write's success is keyed on: its arguments minus prose, in nested
    mappings too; on a tool whose text is its effect, minus the prose that is not its body (a
    memo, a description). A bare value is kept unless it is prose."""
    if type(arguments) is not dict:
        return None if is_prose("", arguments) else arguments
    return _without_prose(arguments, _EFFECTS.text_tool(tool, arguments.get(ACTION_PARAMETER)), 0)


def _without_prose(arguments: dict[Any, Any], body: bool, depth: int) -> dict[Any, Any]:
    kept: dict[Any, Any] = {}
    for k, v in arguments.items():
        if type(v) is dict and depth < _PROSE_DEPTH:
            kept[k] = _without_prose(v, body, depth + 1)
        elif not is_prose(str(k), v, body):
            kept[k] = v
    return kept
