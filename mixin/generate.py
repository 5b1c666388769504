"""The command line every generator shares: ``python -m <generator> [--check]``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def sync(out: Path, files: dict[str, str], check: bool, command: str) -> int:
    """Write generated files under ``out``; with ``check``, only report the stale ones (exit 1)."""
    stale = []
    for name, text in files.items():
        path = out / name
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(name)
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if check and stale:
        print(f"out of date: {', '.join(stale)} (run {command})", file=sys.stderr)
        return 1
    return 0


def command_line(
    doc: str | None,
    out: Path,
    files: Callable[[], dict[str, str]],
    argv: list[str] | None,
    extra: str | None = None,
) -> int:
    """The ``python -m ... [--check]`` of a generator; ``extra`` is the pyproject extra whose
    packages ``files`` imports: without them, one line naming it (exit 2), not a traceback."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--check", action="store_true", help="exit 1 if a file would change")
    args = parser.parse_args(argv)
    command = f"python -m {_module(files)}"
    try:
        generated = files()
    except ModuleNotFoundError as e:
        if extra is None:
            raise
        print(
            f"{command}: {e}; install the {extra} extra: pip install -e '.[{extra}]'",
            file=sys.stderr,
        )
        return 2
    return sync(out, generated, args.check, command)


def _module(files: Callable[[], dict[str, str]]) -> str:
    module = files.__module__
    if module == "__main__":  # run as python -m: the name it was run by
        spec = sys.modules["__main__"].__spec__
        module = spec.name if spec is not None else module
    return module
