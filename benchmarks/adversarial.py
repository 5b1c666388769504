"""Attacks on a real ``loopwatch serve`` on loopback: hostile clients and hostile spans. Each
attack gets a fresh service process with default limits; per attack the report says whether it
held (the answer docs/service.md promises), the service's RSS peak, whether good turns sent
before, during and after it were each counted exactly once, and whether SIGTERM then exited 0
within 10 s.

    .venv/bin/python benchmarks/adversarial.py [--only NAME ...] [--out FILE]

Bounded in count and time: every attack has a fixed size and a timeout, and a service that
does not stop on SIGTERM within 10 s is killed. Only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testkit.attacks import ATTACKS, GOOD, Attack, Service, export, good_body, raise_open_files


@dataclass
class Outcome:
    attack: str
    held: bool
    peak_rss_mb: float
    good_counted_once: bool
    sigterm_exit_0_within_10s: bool
    sigterm_seconds: float
    figures: dict[str, Any] = field(default_factory=dict)


async def _run_one(name: str, attack: Attack) -> Outcome:
    service = Service()
    try:
        sent = int(await export(service.http, good_body(0)))  # before: registers the labels
        task = asyncio.ensure_future(attack(service))
        await asyncio.sleep(0.5)
        sent += int(await export(service.http, good_body(1)))  # during
        try:
            held, figures = await asyncio.wait_for(task, 600)
        except TimeoutError:
            held, figures = False, {"error": "attack did not end within 600 s"}
        sent += int(await export(service.http, good_body(2)))  # after
        counted = service.wait_turns(GOOD, 3)
        peak = service.peak_rss_mb
        code, seconds = service.sigterm()
        return Outcome(
            name,
            held,
            round(peak, 1),
            sent == 3 and counted == 3,
            code == 0,
            round(seconds, 2),
            figures | {"good_sent": sent, "good_counted": counted},
        )
    finally:
        service.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", choices=sorted(ATTACKS), help="attacks to run")
    parser.add_argument("--out", type=Path, help="write the outcomes as JSON here")
    args = parser.parse_args(argv)
    raise_open_files()
    outcomes = []
    for name in args.only or ATTACKS:
        outcome = asyncio.run(_run_one(name, ATTACKS[name]))
        outcomes.append(outcome)
        print(
            f"{name:38} held={outcome.held!s:5} rss_peak={outcome.peak_rss_mb:7.1f}MB "
            f"good_once={outcome.good_counted_once!s:5} "
            f"sigterm_ok={outcome.sigterm_exit_0_within_10s!s:5} ({outcome.sigterm_seconds}s) "
            f"{json.dumps(outcome.figures)}",
            flush=True,
        )
    if args.out:
        args.out.write_text(json.dumps([o.__dict__ for o in outcomes], indent=1) + "\n")
    return 0 if all(o.held for o in outcomes) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
