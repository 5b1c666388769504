"""``python -m tests.framework_runs FRAMEWORK OUT.json``: run the framework's three scenarios
and write their metric samples as JSON (the assertions are in tests/test_frameworks_more.py;
frameworks print to stdout, so the numbers go to a file)."""

from __future__ import annotations

import importlib
import json
import sys

from tests.framework_runs.common import run_scenarios


def main() -> None:
    name, out = sys.argv[1], sys.argv[2]
    module = importlib.import_module(f"tests.framework_runs.{name}")
    module.setup()
    with open(out, "w", encoding="utf-8") as f:
        json.dump(run_scenarios(module.drive), f)


if __name__ == "__main__":
    main()
