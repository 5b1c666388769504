"""The metrics exposition of each stream of ``testkit.streams``, in process and through the service.

    .venv/bin/python benchmarks/golden.py --write     # regenerate tests/golden/ (deliberately)

tests/test_golden_metrics.py compares this checkout's expositions against those files, so a
change meant only to make loopwatch faster or tidier cannot alter one exported number unseen.
When a change means to alter the numbers, write them with the code before it, e.g.
``git archive main src | tar -x -C /tmp/before`` and ``PYTHONPATH=/tmp/before/src:.``
in front of the command above; then the test checks that the change did only that.
Times of day (first-seen gauges, ``_created``, exemplar timestamps) are masked.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testkit.golden import GOLDEN, expositions


def main() -> int:
    if sys.argv[1:] != ["--write"]:
        print(__doc__)
        return 2
    GOLDEN.mkdir(exist_ok=True)
    for file, text in expositions().items():
        (GOLDEN / file).write_text(text)
        print(f"wrote {GOLDEN / file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
