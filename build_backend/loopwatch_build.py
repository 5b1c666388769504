"""The PEP 517 backend: setuptools', plus mypy and the dependencies in the build environment when
LOOPWATCH_COMPILE asks for the compiled build (setup.py), so a plain install never downloads
them. Its build_wheel and build_editable hooks are the only ones that compile: setup.py reads
``building_extensions`` (it is also read for requirements and metadata, where mypyc must not
run)."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 (every other hook as setuptools has it)

# True while build_wheel or build_editable runs (setup.py runs in this process)
building_extensions = False


def _compiling() -> list[str]:
    if os.environ.get("LOOPWATCH_COMPILE", "") in ("", "0"):
        return []
    # the `mypyc` extra (mypy, pinned there once) and the dependencies, whose types mypyc
    # compiles against: the build environment is a fresh one, before anything is installed
    # (hooks run in the source tree)
    with open("pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    return [*project["optional-dependencies"]["mypyc"], *project["dependencies"]]


@contextmanager
def _building() -> Iterator[None]:
    global building_extensions
    building_extensions = True
    try:
        yield
    finally:
        building_extensions = False


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    return [*_setuptools.get_requires_for_build_wheel(config_settings), *_compiling()]


def get_requires_for_build_editable(config_settings: dict[str, Any] | None = None) -> list[str]:
    return [*_setuptools.get_requires_for_build_editable(config_settings), *_compiling()]


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    with _building():
        return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    with _building():
        return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
