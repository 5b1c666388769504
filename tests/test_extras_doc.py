"""Every extra a user installs is in docs/attach.md's Installing table and in the README's
extras line; the links from that table reach a heading."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# extras for working on loopwatch (tests, frameworks, dashboards), described in CONTRIBUTING.md
DEVELOPMENT = {
    "mypyc",
    "test",
    "frameworks",
    "frameworks-more",
    "adk",
    "openai-v2",
    "litellm",
    "crewai",
    "dashboards",
}
LINK = re.compile(r"\]\(([^)#]+)(?:#([^)]+))?\)")


def user_extras() -> set[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return set(pyproject["project"]["optional-dependencies"]) - DEVELOPMENT


def installing() -> str:
    text = (ROOT / "docs" / "attach.md").read_text(encoding="utf-8")
    return text.split("## Installing\n", 1)[1].split("\n## ", 1)[0]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def test_the_user_extras_are_these() -> None:
    assert user_extras() == {"serve", "mcp-guard", "guards-redis", "zstd"}


def test_the_installing_table_has_a_row_for_each_user_extra() -> None:
    rows = [x for x in installing().splitlines() if x.startswith("| `")]
    assert sorted(re.findall(r"^\| `([\w-]+)` \|", "\n".join(rows), re.M)) == sorted(user_extras())


def test_the_readme_names_every_user_extra_and_links_the_table() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    paragraph = readme.split("\nExtras: ", 1)[1].split("\n\n", 1)[0]
    assert set(re.findall(r"`\[([\w-]+)\]`", paragraph)) == user_extras()
    assert paragraph.endswith("What each brings: [docs/attach.md](docs/attach.md#installing).")


def test_the_installing_links_reach_a_heading() -> None:
    for target, anchor in LINK.findall(installing()):
        path = (ROOT / "docs" / target).resolve()
        assert path.is_file(), target
        if anchor:
            headings = re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.M)
            assert anchor in {slug(h) for h in headings}, (target, anchor)
