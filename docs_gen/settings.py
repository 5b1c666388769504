"""Write docs/configuration.md's example and reference from the settings table in
src/loopwatch/core/config.py (``python -m docs_gen.settings``; ``--check`` for drift). Only the
text between each pair of markers is generated."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterable, Sequence
from itertools import groupby
from pathlib import Path

from docs_gen.blocks import replace_block
from loopwatch.core.config import SETTINGS, VARIABLES, Setting, Variable
from mixin.generate import command_line

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = "docs/configuration.md"
COMMAND = "python -m docs_gen.settings"
BEGIN = (
    f"<!-- settings: generated from src/loopwatch/core/config.py by `{COMMAND}`; "
    "edit the settings table there, not this block -->\n"
)
END = "<!-- end of the generated settings -->\n"
EXAMPLE_BEGIN = (
    f"<!-- settings example: generated from src/loopwatch/core/config.py by `{COMMAND}`; "
    "edit the settings table there, not this block -->\n"
)
EXAMPLE_END = "<!-- end of the generated settings example -->\n"
# the column the comments of the TOML example start at
COMMENT_COLUMN = 28
KINDS = {int: "integer", float: "number", str: "string"}
MIB = 1024 * 1024
# the docs' prose width
WIDTH = 100


def _by_name(settings: Sequence[Setting]) -> dict[str, Setting]:
    return {s.name: s for s in settings}


def _toml_value(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # TOML's integer reads as the same float
    return str(value)


def _toml_line(setting: Setting, settings: Sequence[Setting]) -> str:
    if setting.default is None:  # optional: shown commented out, at the value it follows
        follows = _by_name(settings)[setting.unset]
        line = f"# {setting.key} = {_toml_value(follows.default)}"
        doc = f"{setting.doc} (default: {setting.unset})"
    else:
        line, doc = f"{setting.key} = {_toml_value(setting.default)}", setting.doc
    return f"{line:<{COMMENT_COLUMN - 1}} # {doc}"


def _tables(settings: Sequence[Setting]) -> Iterable[tuple[str, list[Setting]]]:
    for table, rows in groupby(settings, key=lambda s: s.table):
        yield table, list(rows)


def toml_example(settings: Sequence[Setting] = SETTINGS) -> str:
    """loopwatch.toml with every setting at its default, one comment each."""
    blocks = [
        f"[{table}]\n" + "".join(_toml_line(s, settings) + "\n" for s in rows)
        for table, rows in _tables(settings)
    ]
    return "```toml\n" + "\n".join(blocks) + "```\n"


def _variables(setting: Setting) -> str:
    first, *others = setting.variables
    return f"`{first}`" + "".join(f" (or `{v}`)" for v in others)


def example_block(settings: Sequence[Setting] = SETTINGS) -> str:
    """The example's block, markers included: the TOML example and the variables."""
    names = ", ".join(_variables(s) for s in settings)
    prose = (
        f"Environment variables override the file, one for each key: {names}. Each key's type, "
        "default and minimum, and the other variables loopwatch reads, are in the tables below."
    )
    wrapped = textwrap.fill(prose, WIDTH, break_long_words=False, break_on_hyphens=False)
    return EXAMPLE_BEGIN + "\n" + toml_example(settings) + "\n" + wrapped + "\n\n" + EXAMPLE_END


def _size(setting: Setting, value: float) -> str:
    """`` (128 MiB)`` after a byte count, else nothing."""
    if not setting.key.endswith("bytes") or not isinstance(value, int) or value < 1024:
        return ""
    return f" ({value // MIB} MiB)" if value % MIB == 0 else f" ({value // 1024} KiB)"


def _default(setting: Setting) -> str:
    if setting.default is None:
        return f"unset: as `{setting.unset}`"
    assert isinstance(setting.default, (int, float, str)), setting.name
    text = f"`{_toml_value(setting.default)}`"
    return text + (_size(setting, setting.default) if not isinstance(setting.default, str) else "")


def _minimum(setting: Setting) -> str:
    if setting.minimum is None:
        return ""
    return _toml_value(setting.minimum) + _size(setting, setting.minimum)


def reference_block(
    settings: Sequence[Setting] = SETTINGS, variables: Sequence[Variable] = VARIABLES
) -> str:
    """docs/configuration.md's block, markers included: one table per TOML table, then the
    other variables."""
    parts = []
    for table, rows in _tables(settings):
        lines = [
            f"### `[{table}]`",
            "",
            "| key | variable | type | default | minimum | meaning |",
            "|---|---|---|---|---|---|",
        ]
        for s in rows:
            cells = (f"`{s.key}`", _variables(s), KINDS[s.kind], _default(s), _minimum(s), s.doc)
            lines.append("| " + " | ".join(cells) + " |")
        parts.append("\n".join(lines) + "\n")
    other = ["### Other environment variables", "", "| variable | meaning |", "|---|---|"]
    other += [f"| `{v.name}` | {v.doc} |" for v in variables]
    parts.append("\n".join(other) + "\n")
    return BEGIN + "\n" + "\n".join(parts) + "\n" + END


def render() -> dict[str, str]:
    """docs/configuration.md with its blocks as the settings table says."""
    reference = (ROOT / REFERENCE).read_text(encoding="utf-8")
    reference = replace_block(reference, EXAMPLE_BEGIN, EXAMPLE_END, example_block())
    return {REFERENCE: replace_block(reference, BEGIN, END, reference_block())}


def main(argv: list[str] | None = None) -> int:
    return command_line(__doc__, ROOT, render, argv)


if __name__ == "__main__":
    sys.exit(main())
