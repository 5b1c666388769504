"""``loopwatch check-tools``: fail CI when a tool's identity declaration is missing or drifted.

Also a pytest helper: ``assert_tools_declared("tools.json", "myapp.agent:agent")``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from loopwatch.core.config import Config, ConfigError, load_config
from loopwatch.core.declarations import DeclarationError, ToolDeclaration, declaration_toml
from loopwatch.core.words import counted
from loopwatch.guards.sources import SourceError, ToolInfo, load
from loopwatch.guards.starter import action_values, starter_toml, suggest_identity


@dataclass(frozen=True, slots=True)
class ToolCheck:
    tool: ToolInfo
    declaration: ToolDeclaration | None
    problems: tuple[str, ...]


def _names(values: Iterable[str]) -> str:
    return ", ".join(values) or "none"


def check_tool(tool: ToolInfo, declaration: ToolDeclaration | None) -> tuple[str, ...]:
    """The problems of one tool, one line each (empty: fine)."""
    name, params = tool.name, tool.parameters
    identity = declaration.identity if declaration is not None else None
    problems: list[str] = []
    if identity is None:
        if params:
            table, suggested, reviewed_line = declaration_toml(
                name, suggest_identity(params, name, action_values(tool)), params
            )
            problems.append(
                f"{name}: has parameters ({_names(params)}) but no identity declaration; declare "
                f"the fields that decide its effect under {table} in loopwatch.toml, e.g. "
                f'{suggested} and {reviewed_line} (identity = "*" keys on all arguments; '
                "`loopwatch check-tools --init` writes a starter file)"
            )
    elif declaration is not None and not declaration.whole_arguments:
        for field in identity:
            if field.split(".", 1)[0] not in params:
                problems.append(
                    f"{name}: identity field {field!r} is not a parameter "
                    f"(parameters: {_names(params)})"
                )
    reviewed = declaration.reviewed_parameters if declaration is not None else None
    if reviewed is not None and set(reviewed) != set(params):
        added = [p for p in params if p not in reviewed]
        removed = [p for p in reviewed if p not in params]
        change = "; ".join(
            part
            for part in (
                f"added {_names(added)}" if added else "",
                f"removed {_names(removed)}" if removed else "",
            )
            if part
        )
        problems.append(
            f"{name}: parameters changed since the declaration was reviewed ({change}); "
            "re-decide its identity and update reviewed_parameters"
        )
    return tuple(problems)


def check(sources: Sequence[Any], config: Config | None = None) -> list[ToolCheck]:
    """Load every source, merge declarations (file < x-loopwatch < decorator), check each tool.

    Raises :class:`SourceError`, :class:`ConfigError` or :class:`DeclarationError` when a
    source or declaration cannot be read.
    """
    tools: dict[str, ToolInfo] = {}
    clashes: dict[str, str] = {}
    for source in sources:
        for t in load(source):
            seen = tools.get(t.name)
            if seen is None:
                tools[t.name] = t
            elif set(seen.parameters) != set(t.parameters):
                clashes[t.name] = (
                    f"{t.name}: defined twice with different parameters "
                    f"({seen.source}: {_names(seen.parameters)}; {t.source}: "
                    f"{_names(t.parameters)})"
                )
    cfg = config if config is not None else load_config()
    cfg = cfg.with_tool_definitions([t.definition for t in tools.values() if t.definition])
    out = []
    for name in sorted(tools):
        declaration = cfg.declaration(name)
        problems = check_tool(tools[name], declaration)
        if name in clashes:
            problems = (clashes[name], *problems)
        out.append(ToolCheck(tools[name], declaration, problems))
    return out


def problems_of(checks: Iterable[ToolCheck]) -> list[str]:
    return [p for c in checks for p in c.problems]


def table(checks: Sequence[ToolCheck]) -> str:
    """A short table: tool, identity, parameters reviewed, result kind."""
    rows = [("tool", "identity", "reviewed", "result")]
    for c in checks:
        d = c.declaration
        identity = "-" if d is None or d.identity is None else ",".join(d.identity)
        if not c.tool.parameters and (d is None or d.identity is None):
            identity = "(no parameters)"
        reviewed = "yes" if d is not None and d.reviewed_parameters is not None else "no"
        result = d.result if d is not None and d.result else "-"
        rows.append((c.tool.name, identity, reviewed, result))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def assert_tools_declared(*sources: Any, config: Config | None = None) -> list[ToolCheck]:
    """For a pytest test: fail with one line per problem; returns the checks otherwise."""
    checks = check(sources, config)
    if not checks:
        raise AssertionError(f"no tools found in {', '.join(map(str, sources))}")
    problems = problems_of(checks)
    if problems:
        raise AssertionError("tool declarations need attention:\n" + "\n".join(problems))
    return checks


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="an OpenAI function-tools JSON file, an MCP tools/list result (JSON), a Python "
        "file (agent.py or agent.py:agent) or an import path (package.module or "
        "package.module:agent; the current directory is on the import path)",
    )
    parser.add_argument(
        "--config",
        metavar="PATH",
        help="loopwatch.toml with [tools.NAME] declarations (default: $LOOPWATCH_CONFIG or "
        "./loopwatch.toml)",
    )
    parser.add_argument(
        "--init",
        action="store_true",
        help="write that loopwatch.toml instead of checking: a suggested identity and the "
        "reviewed parameters of every tool found, each marked for review",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="with --init, overwrite an existing file (its identities are kept, its other "
        "tables are not)",
    )


def _checks(
    sources: Sequence[str], config: Callable[[], Config], err: TextIO
) -> list[ToolCheck] | None:
    """The checks, or None after one line on ``err`` when nothing can be checked."""
    try:
        checks = check(sources, config())
    except (SourceError, ConfigError, DeclarationError) as e:
        print(f"loopwatch check-tools: {e}", file=err)
        return None
    if not checks:
        print(f"loopwatch check-tools: no tools found in {' '.join(sources)}", file=err)
        return None
    return checks


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """0: every tool is declared; 1: problems (one line each on stderr); 2: unreadable input."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # `loopwatch check-tools myagent:agent` from the project
    if args.init:
        return init(args, out, err)
    checks = _checks(args.sources, lambda: load_config(args.config), err)
    if checks is None:
        return 2
    problems = problems_of(checks)
    for line in problems:
        print(line, file=err)
    if problems:
        print(f"{counted(len(problems), 'problem')} in {counted(len(checks), 'tool')}", file=err)
        return 1
    print(table(checks), file=out)
    return 0


def init(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Write a starter loopwatch.toml for the tools found; 2 when it exists (without --force)
    or a source cannot be read."""
    path = Path(args.config or os.environ.get("LOOPWATCH_CONFIG") or "loopwatch.toml")
    if path.exists() and not args.force:
        print(
            f"loopwatch check-tools: {path} exists; pass --force to overwrite it, or check "
            "against it without --init",
            file=err,
        )
        return 2
    checks = _checks(args.sources, lambda: load_config(path) if path.exists() else Config(), err)
    if checks is None:
        return 2
    text = starter_toml([(c.tool, c.declaration) for c in checks], args.sources)
    try:
        with path.open("w" if args.force else "x", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        print(f"loopwatch check-tools: cannot write {path}: {e}", file=err)
        return 2
    declared = sum(1 for c in checks if c.tool.parameters)
    print(
        f"wrote {path}: {declared} tool declaration(s) to review (lines marked "
        f'"# review"), then run loopwatch check-tools without --init',
        file=out,
    )
    return 0
