"""The two builds: setup.py compiles the hot modules with mypyc only when LOOPWATCH_COMPILE asks
(and says clearly when it cannot), LOOPWATCH_PURE_PYTHON runs an installed compiled build's
sources instead, and `loopwatch --version` says which runs. scripts/test runs the suite on the
compiled build (PYTHONPATH=build/compiled) and the golden and framework tests again on pure
Python; the tests that need a compiled build skip without one."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from loopwatch import compiled
from loopwatch.version import VERSION

ROOT = Path(__file__).resolve().parent.parent
COMPILED = compiled.compiled_installed()
needs_compiled = pytest.mark.skipif(not COMPILED, reason="no compiled build on the path")

# what a child reports: its build and the file each of loopwatch's modules came from
_PROBE = """
import json, sys
import loopwatch, loopwatch.attach.processor, loopwatch.service.otlp, loopwatch.service.pipeline
from loopwatch import compiled
files = {n: m.__file__ for n, m in sys.modules.items() if n.startswith("loopwatch.")}
print(json.dumps({"describe": compiled.describe(), "files": files}))
"""


def _setup_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("loopwatch_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # setup() runs only as __main__
    return module


def _probe(**env: str) -> dict[str, Any]:
    environ = {k: v for k, v in os.environ.items() if k != compiled.PURE_ENV}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def _version(**env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != compiled.PURE_ENV}
    out = subprocess.run(
        [sys.executable, "-m", "loopwatch.cli", "--version"],
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.strip()


def _extension(path: str) -> bool:
    return not path.endswith(".py")


def test_the_compiled_modules_are_the_hot_path_and_config_is_left_out() -> None:
    sources = _setup_module().compiled_sources()
    for name in (
        "core/keys.py",
        "core/assembler.py",
        "conventions/read.py",
        "metrics/exporter.py",
        "attach/read_api.py",
        "service/otlp.py",
        "service/otlp_json_read.py",
    ):
        assert f"src/loopwatch/{name}" in sources
    assert "src/loopwatch/attach/processor.py" in sources
    assert "src/loopwatch/attach/read_fields.py" in sources
    # read on the class: left pure (setup.py says why)
    assert "src/loopwatch/core/config.py" not in sources
    assert not [s for s in sources if s.endswith("__init__.py")]
    # loopwatch.compiled decides the build: it must stay Python
    assert "src/loopwatch/compiled.py" not in sources


def test_a_plain_build_is_pure_python(monkeypatch: pytest.MonkeyPatch) -> None:
    setup = _setup_module()
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(setup, "setup", lambda **kw: calls.append(kw))
    for value in (None, "", "0"):
        if value is None:
            monkeypatch.delenv("LOOPWATCH_COMPILE", raising=False)
        else:
            monkeypatch.setenv("LOOPWATCH_COMPILE", value)
        setup.main()
        assert calls.pop() == {}


def test_only_the_backends_build_hooks_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    """setup.py is also read for the build's requirements and metadata: mypyc runs only inside
    the backend's build_wheel and build_editable (build_backend/loopwatch_build.py)."""
    setup = _setup_module()
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(setup, "setup", lambda **kw: calls.append(kw))
    extensions = [setup.Extension("loopwatch.core.keys", sources=[])]
    monkeypatch.setattr(setup, "_mypycify", lambda: extensions)
    monkeypatch.setenv("LOOPWATCH_COMPILE", "1")
    backend = ModuleType("loopwatch_build")
    monkeypatch.setitem(sys.modules, "loopwatch_build", backend)
    for building, want in ((None, {}), (False, {}), (True, {"ext_modules": extensions})):
        if building is not None:
            backend.building_extensions = building  # type: ignore[attr-defined]
        setup.main()
        assert calls.pop() == want


def test_the_mypy_pin_is_the_mypyc_extra() -> None:
    """One pin: the backend installs the `mypyc` extra to compile, the test extra takes it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    assert [r for r in extras["mypyc"] if r.startswith("mypy==")] == extras["mypyc"][:1]
    assert "loopwatch[mypyc]" in extras["test"]
    pins = [r for rs in extras.values() for r in rs if r.split("=")[0].strip() == "mypy"]
    assert pins == extras["mypyc"][:1]
    assert "mypy-extensions>=1.0" in project["dependencies"]
    spec = importlib.util.spec_from_file_location(
        "loopwatch_build_probe", ROOT / "build_backend" / "loopwatch_build.py"
    )
    assert spec is not None and spec.loader is not None
    backend = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(backend)
    with pytest.MonkeyPatch.context() as m:
        m.chdir(ROOT)  # hooks run in the source tree
        m.setenv("LOOPWATCH_COMPILE", "1")
        assert backend._compiling() == [*extras["mypyc"], *project["dependencies"]]
        m.setenv("LOOPWATCH_COMPILE", "0")
        assert backend._compiling() == []


def test_the_compiled_build_says_clearly_when_it_cannot_be_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    setup = _setup_module()
    monkeypatch.setenv("CC", "no-such-cc --version")
    with pytest.raises(SystemExit) as failed:
        setup._mypycify()
    message = str(failed.value)
    assert "LOOPWATCH_COMPILE is set" in message
    assert "no C compiler: 'no-such-cc' is not on PATH" in message
    assert "Unset LOOPWATCH_COMPILE for the pure-Python build" in message


def test_pure_python_forced_at_run_time() -> None:
    got = _probe(**{compiled.PURE_ENV: "1"})
    assert not [f for f in got["files"].values() if _extension(f)]
    if COMPILED:
        want = "pure Python: LOOPWATCH_PURE_PYTHON is set, a compiled build is installed"
        assert got["describe"] == want
        assert _version(**{compiled.PURE_ENV: "1"}) == f"loopwatch {VERSION} ({want})"
    else:
        assert got["describe"] == "pure Python"
    for off in ("0", ""):  # set but off: the default build
        assert _probe(**{compiled.PURE_ENV: off})["describe"] == _probe()["describe"]


@needs_compiled
def test_the_compiled_build_runs_compiled_by_default() -> None:
    got = _probe()
    assert got["describe"] == "compiled with mypyc"
    assert _version() == f"loopwatch {VERSION} (compiled with mypyc)"
    setup = _setup_module()
    sources = setup.compiled_sources()
    shared = setup.SHARED_LIBRARY_GROUP + "__mypyc"
    # every compiled module's code, in one shared library at the package's top
    assert Path(got["files"].pop(shared)).parent == Path(got["files"]["loopwatch.compiled"]).parent
    for module, path in got["files"].items():
        source = "src/" + module.replace(".", "/") + ".py"
        # exactly the listed modules are extensions (those imported here)
        assert _extension(path) == (source in sources), (module, path)


def test_a_build_without_extensions_is_pure() -> None:
    # the sources alone on the path, whichever build this process runs
    assert _version(PYTHONPATH=str(ROOT / "src")) == f"loopwatch {VERSION} (pure Python)"
