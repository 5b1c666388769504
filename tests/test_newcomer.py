"""A newcomer's path, end to end: a fresh clone of the repository, the README's demo command with
its exit flag, then an example the way the README gives it; what they see is checked (the demo's
summary, a loop on the example's /metrics, the line it logs at exit).

The clone's ``.venv`` is made here, before the README's commands run, as a venv that sees this
test venv's packages (a ``.pth`` line), so the commands' ``pip install -e`` installs the clone's
loopwatch and downloads nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sysconfig
import venv
from pathlib import Path

import pytest

from testkit.serve_process import free_port

pytestmark = [pytest.mark.frameworks, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(p.stem for p in (ROOT / "examples").glob("*.py") if p.stem != "support_incident")


def first_screen_block(readme: str) -> list[str]:
    """The commands of the first fenced block in the README's first 30 lines."""
    head = readme.splitlines()[:30]
    start = head.index("```sh")
    end = head.index("```", start + 1)
    return [line.split("#")[0].strip() for line in head[start + 1 : end]]


def test_the_readme_gives_the_two_commands_first_and_one_per_example() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert first_screen_block(readme) == ["scripts/demo", "scripts/test"]
    lines = readme.splitlines()
    for name in EXAMPLES:
        assert f"scripts/example {name}" in lines, name
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "exec scripts/test" in ci


def _run(clone: Path, *command: str, port: int) -> subprocess.CompletedProcess[str]:
    # the clone's own code: nothing of this checkout's build on PYTHONPATH
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OTEL_", "LOOPWATCH_")) and k != "PYTHONPATH"
    }
    env["LOOPWATCH_METRICS_PORT"] = str(port)
    return subprocess.run(
        list(command), cwd=clone, env=env, capture_output=True, text=True, timeout=600
    )


def test_a_fresh_clone_runs_the_demo_and_an_example(tmp_path: Path) -> None:
    clone = tmp_path / "loopwatch"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    venv.create(clone / ".venv", with_pip=True)
    site = next((clone / ".venv" / "lib").glob("python3*/site-packages"))
    (site / "test-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")

    demo = _run(clone, "scripts/demo", "--exit", port=free_port())
    assert demo.returncode == 0, demo.stdout + demo.stderr
    text = demo.stdout
    assert "turns finished" in text
    # the fourteen tickets: the worst key, by its hash, at 14 attempts; the empty searches
    worst = next(line for line in text.splitlines() if "attempts  create_ticket/" in line)
    assert worst.split()[0] == "14" and worst.split()[2].endswith("/timeout")
    assert re.search(r"search_orders +ok +no_rows +\d", text)
    assert "c_40912" not in text and "boots" not in text

    example = _run(clone, "scripts/example", "pydantic_ai_agent", port=free_port())
    assert example.returncode == 0, example.stdout + example.stderr
    out = example.stdout + example.stderr
    assert "pip install" not in out  # everything it imports was there: nothing installed
    assert "agent: I have escalated your refund." in out
    # read from the example's own /metrics
    assert (
        'loopwatch_loops_total{agent="support",error_class="timeout",kind="repeat",'
        'model="scripted-v1",service="unknown_service:python",tool="create_ticket"} 1.0'
    ) in out
    assert re.search(
        r"shut down: 1 turn, 2 loops; worst key create_ticket/22562c0f/timeout at 6 attempts", out
    )
    loopwatch_file = subprocess.run(
        [
            str(clone / ".venv" / "bin" / "python"),
            "-c",
            "import loopwatch; print(loopwatch.__file__)",
        ],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert loopwatch_file == str(clone / "src" / "loopwatch" / "__init__.py")
