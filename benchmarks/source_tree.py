"""loopwatch's package source as of a git revision, exported for a benchmark's baseline."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# where the package's folder is in this checkout (the import root put on PYTHONPATH)
PACKAGE_ROOT = ROOT / "src"


def export_package(revision: str, target: Path) -> Path:
    """Extract the revision's package folder under ``target``; return its import root (revisions
    before the package moved under src/ kept it under processor/)."""
    for folder in ("src", "processor"):
        listed = subprocess.run(
            ["git", "-C", str(ROOT), "ls-tree", "--name-only", revision, folder],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if listed:
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", revision, folder],
                capture_output=True,
                check=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
            return target / folder
    raise SystemExit(f"{revision}: neither src/ nor processor/ in that revision")
