"""Write the generated dashboard JSON (``python -m dashboards.build``; ``--check`` for drift)."""

from __future__ import annotations

import sys
from pathlib import Path

from mixin.config import DASHBOARD_FILE
from mixin.generate import command_line

OUT = Path(__file__).resolve().parent / "generated"


def render() -> dict[str, str]:
    """File name -> JSON text of every dashboard (the bare model file provisioning reads)."""
    # imported here: without the dashboards extra, main() says what to install
    from grafana_foundation_sdk.cog.encoder import JSONEncoder

    from dashboards.loops import dashboard_builder

    text = JSONEncoder(sort_keys=True, indent=2, ensure_ascii=False).encode(
        dashboard_builder().build()
    )
    return {DASHBOARD_FILE: text + "\n"}


def main(argv: list[str] | None = None) -> int:
    return command_line(__doc__, OUT, render, argv, extra="dashboards")


if __name__ == "__main__":
    sys.exit(main())
