"""One agent's reader per log record: the agents' events into the core's records."""

from __future__ import annotations

from typing import Final

from loopwatch.conventions.coding_agents import claude_code, codex, gemini_cli
from loopwatch.conventions.coding_agents.reader import EventRead, EventReader
from loopwatch.core.config import Config
from loopwatch.core.log_view import LogView

READERS: Final[tuple[EventReader, ...]] = (claude_code.READER, gemini_cli.READER, codex.READER)


def read_log(log: LogView, config: Config) -> EventRead | None:
    """What the record gives, read by the first reader that claims it (None: no agent's, or
    nothing counted: a decision, a prompt, a log line)."""
    for reader in READERS:
        if reader.claims(log):
            return reader.read(log, config)
    return None
