"""The build: pure Python by default; ``LOOPWATCH_COMPILE=1`` also compiles the hot modules with
mypyc into C extensions that sit beside their sources in the same wheel (docs/service.md,
"The compiled build"). Everything else about the package is in pyproject.toml."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent
PACKAGE = HERE / "src" / "loopwatch"

# The hot path: every span goes through these (reading conventions, keys, turn assembly,
# summaries, metric updates, both span views). Whole folders, so a new core or conventions
# module is compiled (and checked by mypyc) without anyone remembering to list it.
COMPILED_FOLDERS = ("core", "conventions")
# attach/processor.py: the worker's rounds (LoopwatchSpanProcessor is public and may be
# subclassed, so it allows interpreted subclasses), with attach/queued.py (reading what the queue
# holds) and attach/followed.py (the traces on_start follows); attach/read_fields.py: reading
# each SDK span. service/otlp_json_read.py reads OTLP/JSON's spans; its msgspec structs
# (service/otlp_json.py) stay Python: mypyc compiles no class with another metaclass into its own.
COMPILED_MODULES = (
    "attach/processor.py",
    "attach/queued.py",
    "attach/followed.py",
    "attach/read_fields.py",
    "metrics/exporter.py",
    "metrics/collectors.py",
    "attach/read_api.py",
    "service/otlp.py",
    "service/otlp_json_read.py",
    "service/otlp_lean.py",
    "service/otlp_wire.py",
    "service/pipeline.py",
)
# the shared library mypyc puts every compiled module's code in: loopwatch/_compiled__mypyc*.so
SHARED_LIBRARY_GROUP = "loopwatch._compiled"
# Left pure in those folders, and why:
EXCLUDED = {
    # mypyc compiles a dataclass's defaults into its C struct, so ``Config.grpc_address`` read
    # on the class (help texts, the catalog's help strings) would no longer be the default.
    # Read once at start: nothing to gain.
    "core/config.py",
}


def compiled_sources() -> list[str]:
    paths = [p for folder in COMPILED_FOLDERS for p in sorted((PACKAGE / folder).glob("*.py"))]
    paths += [PACKAGE / name for name in COMPILED_MODULES]
    return [
        str(p.relative_to(HERE))
        for p in paths
        if p.name != "__init__.py" and str(p.relative_to(PACKAGE)) not in EXCLUDED
    ]


def compile_requested() -> bool:
    return os.environ.get("LOOPWATCH_COMPILE", "") not in ("", "0")


def _missing_toolchain() -> str | None:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    compiler = os.environ.get("CC", compiler).split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler: {compiler!r} is not on PATH (install gcc, or set CC)"
    header = Path(sysconfig.get_paths()["include"], "Python.h")
    if not header.is_file():
        return f"no Python headers: {header} is missing (install python3-dev)"
    return None


def _mypycify() -> list[Extension]:
    missing = _missing_toolchain()
    if missing:
        sys.exit(
            f"LOOPWATCH_COMPILE is set, but the compiled build cannot be made: {missing}. "
            "Unset LOOPWATCH_COMPILE for the pure-Python build."
        )
    from mypyc.build import mypycify

    # mypy's settings (strict, the untyped imports) from pyproject.toml; its cache apart from
    # the one `mypy` keeps for the lint step, which runs with other options
    os.environ.setdefault("MYPY_CACHE_DIR", str(HERE / "build" / "mypyc-cache"))
    # The compiled modules are checked; the rest of the package only lends them its types, and
    # what it imports of the frameworks (pydantic-ai, mcp, ...) is not in the build environment.
    options = ["--config-file", str(HERE / "pyproject.toml"), "--follow-imports", "silent"]
    # one named shared library inside the package, rather than a hash-named one at the top of
    # site-packages
    return list(mypycify([*options, *compiled_sources()], group_name=SHARED_LIBRARY_GROUP))


def building_extensions() -> bool:
    """True inside the backend's build_wheel or build_editable hook, which runs this file in its
    own process (build_backend/loopwatch_build.py); not when it is read for the build's
    requirements or its metadata, where mypyc (which type-checks the package first) must not
    run."""
    backend = sys.modules.get("loopwatch_build")
    return bool(getattr(backend, "building_extensions", False))


def main() -> None:
    if compile_requested() and building_extensions():
        setup(ext_modules=_mypycify())
    else:
        setup()


if __name__ == "__main__":  # as setuptools runs it; tests import it
    main()
