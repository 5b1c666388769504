"""``--out DIR``: the folder a benchmark writes its results into, made before the run starts, so a
long run never ends unable to write what it measured."""

from __future__ import annotations

import argparse
from pathlib import Path


def out_dir(text: str) -> str:
    """argparse's ``type`` for ``--out``: the folder, made with its parents when missing."""
    try:
        Path(text).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot write results into {text}: {e}") from None
    return text
