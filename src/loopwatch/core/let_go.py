"""The plain traces let go as their root came (in serve): when that root came and from which
service, kept for a grace, so that a span of another service arriving after it (a GenAI span,
or a plain one a GenAI span may yet hang under) still has its trace finalized a grace after that
root."""

from __future__ import annotations

from collections import OrderedDict


def first_due(came: OrderedDict[int, float], deadline: float) -> int | None:
    """The oldest key of ``came`` (times in arrival order) if it came at ``deadline`` or
    before, else None: the let-go roots and the assembler's rooted traces age alike."""
    if came:
        key, at = next(iter(came.items()))
        if at <= deadline:
            return key
    return None


class LetGo:
    """Not thread-safe: the assembler's caller serialises it. Bounded: past ``bound`` the
    oldest is forgotten (its trace then waits for the idle timeout, as one without a root)."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        # trace id -> when its root came, oldest first; and the root's service
        self.came: OrderedDict[int, float] = OrderedDict()
        self.services: dict[int, str] = {}

    def add(self, trace_id: int, seen_at: float, service: str) -> None:
        came = self.came
        came[trace_id] = seen_at
        came.move_to_end(trace_id)
        self.services[trace_id] = service
        if len(came) > self.bound:
            del self.services[came.popitem(last=False)[0]]

    def take(self, trace_id: int) -> tuple[float, str] | None:
        """When the trace's root came and its service, forgotten here; None if not let go."""
        seen_at = self.came.pop(trace_id, None)
        return None if seen_at is None else (seen_at, self.services.pop(trace_id))

    def forget_until(self, deadline: float) -> None:
        """Forget the roots that came at ``deadline`` or before: their grace is over."""
        while (trace_id := first_due(self.came, deadline)) is not None:
            del self.came[trace_id]
            del self.services[trace_id]
