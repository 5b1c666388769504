"""Typed stand-ins for the tools the guard tests run: a closure per call, bound to its values."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def logged(log: list[T], entry: T, answer: R) -> Callable[[], R]:
    """A tool that notes ``entry`` in ``log`` each time it runs, then answers ``answer``."""

    def run() -> R:
        log.append(entry)
        return answer

    return run


def answering(answer: R) -> Callable[[], R]:
    """A tool that answers ``answer`` and does nothing else."""
    return lambda: answer
