"""Which build runs: the compiled one (mypyc C extensions beside their sources) or pure Python.

A compiled build keeps every module's source beside its extension. Python's import system
prefers the extension; with ``LOOPWATCH_PURE_PYTHON=1`` in the environment, a finder placed
first on ``sys.meta_path`` (by ``loopwatch/__init__.py``, before any other loopwatch module
is imported) finds loopwatch's modules from their sources only, so the same installation runs
pure Python. The switch is for the whole process: compiled modules call each other directly,
so mixing the two builds is never attempted. This module itself is never compiled."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.machinery import EXTENSION_SUFFIXES, SOURCE_SUFFIXES, FileFinder, ModuleSpec
from importlib.machinery import SourceFileLoader as _SourceFileLoader
from pathlib import Path
from types import ModuleType

PURE_ENV = "LOOPWATCH_PURE_PYTHON"
# always compiled when the build is (setup.py compiles core/ whole)
_SENTINEL = "loopwatch.core.keys"


def pure_requested() -> bool:
    return os.environ.get(PURE_ENV, "").strip().lower() not in ("", "0", "false", "no")


class SourceOnlyFinder:
    """Finds ``loopwatch.*`` modules by their ``.py`` sources, never their extensions."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if not fullname.startswith("loopwatch.") or not path:
            return None
        for entry in path:
            spec = FileFinder(entry, (_SourceFileLoader, SOURCE_SUFFIXES)).find_spec(fullname)
            if spec is not None:
                return spec
        return None


def force_pure_if_requested() -> None:
    if pure_requested() and not any(isinstance(f, SourceOnlyFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, SourceOnlyFinder())


# On import: loopwatch/__init__.py imports this module before any other of loopwatch's.
force_pure_if_requested()


def _is_extension(module: ModuleType) -> bool:
    return str(getattr(module, "__file__", "")).endswith(tuple(EXTENSION_SUFFIXES))


def running_compiled() -> bool:
    """True when loopwatch's modules run compiled in this process."""
    __import__(_SENTINEL)
    return _is_extension(sys.modules[_SENTINEL])


def compiled_installed() -> bool:
    """True when the installation holds a compiled build (used or not)."""
    # this module is never compiled: its own file is in the package's folder
    parts = _SENTINEL.split(".")[1:]
    root = Path(__file__).parent
    return any(
        Path(root, *parts[:-1], parts[-1] + suffix).is_file() for suffix in EXTENSION_SUFFIXES
    )


def describe() -> str:
    """The build, for ``loopwatch --version``."""
    if running_compiled():
        return "compiled with mypyc"
    if compiled_installed():
        return f"pure Python: {PURE_ENV} is set, a compiled build is installed"
    return "pure Python"
