"""A Python child that attaches loopwatch: the venv's bin folder, and the JSON line it prints
last."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def last_json(out: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))
