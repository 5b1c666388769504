"""The PEP 517 backend: setuptools', plus mypy and the dependencies in the build environment when
LOOPWATCH_COMPILE asks for the compiled build (setup.py), so a plain install never downloads
them."""

from __future__ import annotations

import os
import tomllib
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 (every other hook as setuptools has it)


def _compiling() -> list[str]:
    if os.environ.get("LOOPWATCH_COMPILE", "") in ("", "0"):
        return []
    # the mypy (with mypyc) the lint step runs, pinned once in the "test" extra, and the
    # dependencies, whose types mypyc compiles against: the build environment is a fresh one,
    # before anything is installed (hooks run in the source tree)
    with open("pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    mypy = [r for r in project["optional-dependencies"]["test"] if r.startswith("mypy==")]
    return [*mypy, *project["dependencies"]]


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    return [*_setuptools.get_requires_for_build_wheel(config_settings), *_compiling()]


def get_requires_for_build_editable(config_settings: dict[str, Any] | None = None) -> list[str]:
    return [*_setuptools.get_requires_for_build_editable(config_settings), *_compiling()]
