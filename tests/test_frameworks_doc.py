"""The frameworks tables of README.md and docs/frameworks.md are generated from one list
(docs_gen/frameworks.py) with every version read from pyproject.toml's pins."""

from __future__ import annotations

import string
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # docs_gen/ is source, not an installed package
    sys.path.insert(0, str(ROOT))

from docs_gen import frameworks as g  # noqa: E402


def _named() -> set[str]:
    """The packages the list's cells name by ``{package}`` or ``{package:minor}``."""
    out = set()
    for f in g.FRAMEWORKS:
        for row in [f.readme, *f.docs]:
            for cell in row or ():
                out |= {field for _, field, _, _ in string.Formatter().parse(cell) if field}
    return out


def test_the_tables_match_the_list_and_the_pins() -> None:
    on_disk = {name: (ROOT / name).read_text(encoding="utf-8") for name in g.render()}
    assert g.render() == on_disk, (
        "the frameworks tables are stale: run python -m docs_gen.frameworks"
    )
    done = subprocess.run(
        [sys.executable, "-m", "docs_gen.frameworks", "--check"], cwd=ROOT, capture_output=True
    )
    assert done.returncode == 0, done.stderr
    assert "| pydantic-ai 2.68 | its own |" in on_disk["README.md"]
    assert (
        "| pydantic-ai 2.68.0 | its own (GenAI `execute_tool`) |" in on_disk["docs/frameworks.md"]
    )


def test_every_named_package_is_pinned_and_every_framework_pin_is_named() -> None:
    pins = g.pins()
    assert _named() - set(pins) == set()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pinned = {
        r.split("==")[0] for extra in g.EXTRAS for r in project["optional-dependencies"][extra]
    }
    # a new framework pinned in an extra needs a row (or a reason in UNLISTED)
    assert pinned - _named() == set(g.UNLISTED)
    assert _named() <= pinned | {"mcp"}  # mcp: pinned in the mcp-guard and test extras


def test_a_changed_pin_changes_the_tables() -> None:
    """The drift test can fail: a version comes from the pin, in both forms."""
    versions = {**g.pins(), "langgraph": g.Version("1.3.0")}
    readme_rows = [f.readme for f in g.FRAMEWORKS if f.readme is not None]
    assert "| LangGraph 1.3 | OpenInference |" in g.table(g.README_HEAD, readme_rows, versions)
    docs_rows = [row for f in g.FRAMEWORKS for row in f.docs]
    assert "| LangGraph 1.3.0 | OpenInference langchain 0.1.80 |" in g.table(
        g.DOCS_HEAD, docs_rows, versions
    )
