"""A benchmark's ``--out`` folder is made before the run, and one it cannot write is refused
before the run starts, not after it."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from testkit.results_dir import out_dir


def test_a_missing_folder_is_made_with_its_parents(tmp_path: Path) -> None:
    target = tmp_path / "results" / "today"
    assert out_dir(str(target)) == str(target)
    assert target.is_dir()


def test_a_folder_that_cannot_be_made_is_refused_by_name(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=out_dir)
    with pytest.raises(SystemExit):
        parser.parse_args(["--out", str(blocker / "results")])
    with pytest.raises(argparse.ArgumentTypeError, match="cannot write results into"):
        out_dir(str(blocker / "results"))
