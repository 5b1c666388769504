"""Which kind of span this is and what its fields are, across the instrumentation families."""

from loopwatch.conventions.read import read_span

__all__ = ["read_span"]
