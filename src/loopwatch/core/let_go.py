"""The plain traces let go as their root came (in serve): when that root came and from which
service, kept for a grace, so that a GenAI span of another service arriving after it still has
its trace finalized a grace after that root, and a plain span after it is let go at once."""

from __future__ import annotations

from collections import OrderedDict


class LetGo:
    """Not thread-safe: the assembler's caller serialises it. Bounded: past ``bound`` the
    oldest is forgotten (its trace then waits for the idle timeout, as one without a root)."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        # trace id -> (when its root came, the root's service), oldest first
        self.roots: OrderedDict[int, tuple[float, str]] = OrderedDict()

    def add(self, trace_id: int, seen_at: float, service: str) -> None:
        roots = self.roots
        roots[trace_id] = (seen_at, service)
        roots.move_to_end(trace_id)
        if len(roots) > self.bound:
            roots.popitem(last=False)

    def take(self, trace_id: int) -> tuple[float, str] | None:
        """When the trace's root came and its service, forgotten here; None if not let go."""
        return self.roots.pop(trace_id, None)

    def forget_until(self, deadline: float) -> None:
        """Forget the roots that came at ``deadline`` or before: their grace is over."""
        roots = self.roots
        while roots:
            seen_at, _ = next(iter(roots.values()))
            if seen_at > deadline:
                break
            roots.popitem(last=False)
