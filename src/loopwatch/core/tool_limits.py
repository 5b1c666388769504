"""A tool's declaration and loop thresholds under one config, looked up once per tool name: a
finished turn's summary reads them for each tool it called (core.summary), and Config's
lookups (the merged declaration, four thresholds) are Python calls even in the compiled build."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from loopwatch.core.config import Config
from loopwatch.core.declarations import REGISTRY, ToolDeclaration

# Tool names come from spans: past this many the names remembered are forgotten at once, and
# a longer name is looked up each time, never kept (bounded in bytes too).
REMEMBERED_TOOLS: Final = 1024
REMEMBERED_NAME_CHARS: Final = 256


@dataclass(init=False, slots=True)
class ToolLimits:
    """What Config's lookups give for one tool."""

    declaration: ToolDeclaration | None
    loop_threshold: int
    failing_threshold: int
    same_result_threshold: int
    no_rows_threshold: int

    # written out: compiled, a generated __init__ is interpreted (benchmarks/README.md)
    def __init__(self, config: Config, tool: str) -> None:
        declaration = self.declaration = config.declaration(tool)
        self.loop_threshold = config.loop_threshold_for(declaration)
        self.failing_threshold = config.failing_threshold_for(declaration)
        self.same_result_threshold = config.same_result_threshold_for(declaration)
        self.no_rows_threshold = config.no_rows_threshold_for(declaration)


class LimitsByTool:
    """The ToolLimits of each tool under ``config``, remembered. A declaration the decorator
    adds later replaces the registry's map (core.declarations), and with it everything
    remembered. Not thread-safe: one per TurnPublisher, on its worker."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._registry = REGISTRY.by_tool
        self._known: dict[str, ToolLimits] = {}

    def of(self, tool: str) -> ToolLimits:
        known = self._known
        if REGISTRY.by_tool is not self._registry:
            self._registry = REGISTRY.by_tool
            known.clear()
        limits = known.get(tool)
        if limits is None:
            limits = ToolLimits(self.config, tool)
            if len(tool) <= REMEMBERED_NAME_CHARS:
                if len(known) >= REMEMBERED_TOOLS:
                    known.clear()
                known[tool] = limits
        return limits
