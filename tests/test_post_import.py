"""The post-import hook: a function run once a module is imported, on real modules written to a
temporary folder on sys.path."""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopwatch.attach import post_import
from loopwatch.attach.post_import import waiting, when_imported


@pytest.fixture
def modules(tmp_path: Path) -> Iterator[Path]:
    """A folder on sys.path for this test's modules; they leave sys.modules after it."""
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    before = set(sys.modules)
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for name in set(sys.modules) - before:
        if name.startswith("lw_probe"):
            del sys.modules[name]


def _write(folder: Path, name: str, body: str) -> None:
    (folder / f"{name}.py").write_text(body, encoding="utf-8")


def test_a_hook_runs_once_after_the_module_executed(modules: Path) -> None:
    _write(modules, "lw_probe_a", "DONE = True\n")
    seen: list[bool] = []
    when_imported("lw_probe_a", lambda: seen.append(sys.modules["lw_probe_a"].DONE))
    assert seen == []
    assert "lw_probe_a" in waiting()
    module = importlib.import_module("lw_probe_a")
    assert seen == [True]
    # the module keeps its own loader; the finder is gone with the last hook
    assert type(module.__loader__).__name__ == "SourceFileLoader"
    assert module.__spec__ is not None
    assert type(module.__spec__.loader).__name__ == "SourceFileLoader"
    assert waiting() == []
    assert post_import._FINDER not in sys.meta_path
    importlib.reload(module)
    assert seen == [True]


def test_an_imported_module_runs_the_hook_at_once(modules: Path) -> None:
    _write(modules, "lw_probe_b", "X = 1\n")
    importlib.import_module("lw_probe_b")
    seen: list[str] = []
    when_imported("lw_probe_b", lambda: seen.append("now"))
    assert seen == ["now"]
    assert waiting() == []


def test_a_submodule_and_a_failing_hook(modules: Path, caplog: pytest.LogCaptureFixture) -> None:
    package = modules / "lw_probe_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    _write(package, "inner", "VALUE = 7\n")
    seen: list[int] = []

    def fails() -> None:
        raise RuntimeError("cannot patch")

    when_imported("lw_probe_pkg.inner", fails)
    when_imported(
        "lw_probe_pkg.inner", lambda: seen.append(sys.modules["lw_probe_pkg.inner"].VALUE)
    )
    importlib.import_module("lw_probe_pkg")
    assert seen == []  # the package alone is not the module watched
    from lw_probe_pkg import inner  # type: ignore[import-not-found]

    assert inner.VALUE == 7
    assert seen == [7]  # the second hook ran; the first one's error was logged, not raised
    assert "after the import of lw_probe_pkg.inner: cannot patch" in caplog.text


def test_two_threads_importing_at_once_run_the_hook_once(modules: Path) -> None:
    # the module waits for the test's word, so the second thread imports while it executes
    gate = type(sys)("lw_probe_gate")
    gate.entered, gate.go = threading.Event(), threading.Event()  # type: ignore[attr-defined]
    sys.modules["lw_probe_gate"] = gate
    _write(modules, "lw_probe_slow", "import lw_probe_gate as g\ng.entered.set()\ng.go.wait(60)\n")
    seen: list[str] = []
    when_imported("lw_probe_slow", lambda: seen.append(threading.current_thread().name))
    threads = [
        threading.Thread(target=importlib.import_module, args=("lw_probe_slow",), name=f"t{i}")
        for i in range(2)
    ]
    threads[0].start()
    assert gate.entered.wait(60)
    threads[1].start()
    gate.go.set()
    for t in threads:
        t.join()
    assert seen == ["t0"]
    assert waiting() == []
