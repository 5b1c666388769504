"""What an installed instrumentor instruments, read from the metadata of the distributions alone
(nothing is imported): the distributions its ``instruments`` extras name, and the modules those
distributions install."""

from __future__ import annotations

import functools
import re
from importlib import metadata

# a requirement's name, and the extras by which OpenTelemetry instrumentors name the libraries
# they instrument (read as text: packaging costs more to import than the rest of this)
_NAME = re.compile(r"\A\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_SEPARATORS = re.compile(r"[-_.]+")  # a distribution name's, normalized to "-"
_INSTRUMENTS = re.compile(r"""extra\s*==\s*['"]instruments(-any)?['"]""")
_SKIPPED_DIRS = (".dist-info", ".data", ".egg-info")


def instrumented(dist: metadata.Distribution | None) -> list[str] | None:
    """The distributions an instrumentor's ``instruments`` and ``instruments-any`` extras name
    (normalized names); None when it names none (its instrumentor has to be loaded to tell)."""
    if dist is None:
        return None
    out: list[str] = []
    for line in dist.requires or []:
        name = _NAME.match(line)
        if name is not None and _INSTRUMENTS.search(line):
            out.append(_SEPARATORS.sub("-", name.group(1)).lower())
    return out or None


@functools.cache
def modules_of(distribution: str) -> tuple[str, ...]:
    """The modules an installed distribution puts on the path: its outermost packages (the
    subpackage of a namespace package by its dotted name: ``google.genai``) and top-level
    modules; none when it is not installed or lists no files (an editable install)."""
    try:
        record = metadata.distribution(distribution).read_text("RECORD") or ""
    except metadata.PackageNotFoundError:
        return ()
    packages: set[tuple[str, ...]] = set()
    modules: set[str] = set()
    # the paths as text, not PackagePath objects: a large SDK lists thousands of files
    for line in record.splitlines():
        parts = tuple(line.split(",", 1)[0].split("/"))
        if not parts[0] or parts[0] == ".." or parts[0].endswith(_SKIPPED_DIRS):
            continue
        if parts[-1] == "__init__.py":
            packages.add(parts[:-1])
        elif len(parts) == 1 and parts[0].endswith(".py"):
            modules.add(parts[0][:-3])
    outermost = {
        ".".join(package)
        for package in packages
        if package and not any(package[:i] in packages for i in range(1, len(package)))
    }
    return tuple(sorted(outermost | modules))
