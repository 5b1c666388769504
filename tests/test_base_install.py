"""Each command on what ``pip install loopwatch`` brings alone: pyproject.toml's dependencies
and theirs. A child process refuses to import any other installed distribution's modules (this
venv holds the extras too), so a command that needs a package the base install lacks fails
here as it would for a user."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from loopwatch.demo.scenarios import eleven_empty_searches, fourteen_tickets
from testkit.stored import write_collector_json
from tests.support.replay import batches, jaeger_document, record

ROOT = Path(__file__).resolve().parent.parent

# the child: a finder ahead of all others that refuses the listed modules
CHILD = """
import json, os, sys

REFUSED = frozenset(json.loads(os.environ["LOOPWATCH_TEST_REFUSED"]))

class Refuse:
    @staticmethod
    def find_spec(fullname, path=None, target=None):
        parts = fullname.split(".")
        if parts[0] in REFUSED or ".".join(parts[:2]) in REFUSED:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None

sys.meta_path.insert(0, Refuse)
from loopwatch.cli import main
sys.exit(main(sys.argv[1:]))
"""


def base_distributions() -> set[str]:
    """pyproject.toml's dependencies and, as installed here, theirs (canonical names)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo = [Requirement(r) for r in project["dependencies"]]
    seen = {"loopwatch"}
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # an extra's, or another platform's
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        dist = metadata.distribution(req.name)  # not installed: the test set-up is wrong
        todo.extend(Requirement(r) for r in dist.requires or ())
    return seen


def _module_of(parts: tuple[str, ...]) -> str | None:
    name = parts[0]
    if name.endswith((".dist-info", ".egg-info", ".pth")) or name in ("..", "__pycache__"):
        return None
    if len(parts) == 1:  # a top-level module file: name.py, name.cpython-311-....so
        if not name.endswith((".py", ".so")):
            return None
        return name.split(".", 1)[0]
    return name


def refused_modules(allowed: set[str]) -> list[str]:
    """Top-level modules (or, in a namespace several distributions share, ``top.second``)
    that only distributions outside ``allowed`` provide."""
    owners: dict[str, set[str]] = {}
    for dist in metadata.distributions():
        name = canonicalize_name(dist.metadata["Name"] or "")
        for file in dist.files or ():
            top = _module_of(file.parts)
            if top is None:
                continue
            owners.setdefault(top, set()).add(name)
            if len(file.parts) > 2:  # a package's module or subpackage
                second = file.parts[1].split(".", 1)[0]
                owners.setdefault(f"{top}.{second}", set()).add(name)
    refused = []
    for module, dists in owners.items():
        top, _, second = module.partition(".")
        shared = len(owners[top]) > 1
        if (shared == bool(second)) and dists.isdisjoint(allowed):
            refused.append(module)
    return sorted(refused)


@pytest.fixture(scope="module")
def refused() -> str:
    modules = refused_modules(base_distributions())
    # this venv holds the serve extra: the check can tell a base install from a full one
    assert "grpc" in modules and "tornado" in modules
    return json.dumps(modules)


def run(refused: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOOPWATCH_TEST_REFUSED": refused}
    return subprocess.run(
        [sys.executable, "-c", CHILD, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    spans, p = record([fourteen_tickets(), eleven_empty_searches()])
    p.close()
    directory = tmp_path_factory.mktemp("stored")
    jaeger = directory / "jaeger.json"
    jaeger.write_text(json.dumps(jaeger_document(spans)))
    proto = directory / "request.pb"
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    proto.write_bytes(encode_spans(spans).SerializeToString())
    return {
        "collector-json": write_collector_json(directory / "traces.json", batches(spans)),
        "jaeger": jaeger,
        "protobuf": proto,
    }


@pytest.mark.parametrize("kind", ["collector-json", "jaeger", "protobuf"])
def test_replay_reads_stored_traces(refused: str, stored: dict[str, Path], kind: str) -> None:
    done = run(refused, "replay", str(stored[kind]), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    # the two incidents in three conventions; no loopwatch.toml, so the reworded tickets are
    # told apart by their arguments and only the error class matches: the cap's figures
    assert report["turns"] == 6
    assert report["worst_turns"][0]["max_attempts"] == 14
    assert round(report["over_cap_seconds"]) == 3 * 330


def test_compare_runs(refused: str, stored: dict[str, Path]) -> None:
    path = str(stored["collector-json"])
    done = run(refused, "compare", path, path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("baseline: 6 turns; candidate: 6 turns\n")
    assert "none significantly above the baseline" in done.stdout


def test_demo_runs(refused: str) -> None:
    done = run(refused, "demo", "--exit")
    assert done.returncode == 0, done.stderr
    assert "create_ticket    timeout            repeat      27" in done.stdout
    assert "book_meeting     ok                 duplicate   1" in done.stdout


def test_serve_names_its_extra(refused: str) -> None:
    done = run(refused, "serve")
    assert done.returncode == 1
    assert "No module named 'grpc'; install the serve extra" in done.stderr
    assert "Traceback" not in done.stderr


def test_mcp_guard_names_its_extra(refused: str) -> None:
    done = run(refused, "mcp-guard", "--", "true")
    assert done.returncode == 2
    assert done.stderr == (
        "loopwatch mcp-guard: No module named 'mcp'; install the mcp-guard extra: "
        "pip install 'loopwatch[mcp-guard]'\n"
    )
