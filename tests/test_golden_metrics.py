"""The exported metrics, line for line, of the benchmark streams in process and through the
service, against the golden expositions in tests/golden/ (written deliberately, by
benchmarks/golden.py --write): making loopwatch faster must not change one number it exports."""

from __future__ import annotations

import pytest

from testkit.golden import GOLDEN, in_process, service
from testkit.streams import STREAMS


@pytest.mark.parametrize("name", sorted(STREAMS))
@pytest.mark.parametrize("entry", ["processor", "service"])
def test_exposition_matches_golden(name: str, entry: str) -> None:
    got = in_process(name) if entry == "processor" else service(name)
    want = (GOLDEN / f"{name}-{entry}.txt").read_text()
    assert "loopwatch_turns_total" in want
    assert got.splitlines() == want.splitlines()


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_processor_and_service_export_the_same_lines(name: str) -> None:
    """Both ways in (the processor and the service) compute identical numbers for the same
    spans."""
    processor = (GOLDEN / f"{name}-processor.txt").read_text()
    assert processor == (GOLDEN / f"{name}-service.txt").read_text()
