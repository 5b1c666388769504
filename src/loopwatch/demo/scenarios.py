"""Turns as data: the incidents (fourteen timed-out tickets for one order, eleven searches
without rows, five bookings of one room), healthy traffic, and a model switch."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class Call:
    tool: str
    arguments: dict[str, Any]
    elapsed_ms: int
    result: Any = None  # returned on success
    error: BaseException | None = None  # raised (the span records it)


@dataclass(frozen=True)
class Turn:
    agent: str
    model: str
    calls: tuple[Call, ...]
    description: dict[str, str] = field(default_factory=dict)


TICKET_SUMMARIES = (
    "Customer has not received refund for returned boots",
    "Refund not received for returned boots - customer following up",
    "Missing refund on order 88214 (returned boots), customer awaiting resolution",
    "Returned boots, refund still pending for customer c_40912",
    "Follow-up: refund for boots return on order 88214 not issued",
    "Customer reports no refund after returning boots",
    "Refund outstanding for returned boots (order 88214)",
    "Escalation: boots refund not received",
    "Boots were returned but the refund never arrived",
    "Customer c_40912 awaiting refund for returned boots",
    "Refund missing: returned boots, order 88214",
    "Please investigate missing refund for returned boots",
    "Returned item (boots) - refund not processed",
    "Customer still waiting on boots refund",
)
SEARCH_QUERIES = (
    "boots refund",
    "boots return refund status",
    "refund boots order",
    "returned boots refund",
    "order 88214 refund",
    "boots refund pending",
    "refund status returned boots",
    "customer c_40912 refund",
    "boots return status",
    "refund for returned boots order 88214",
    "missing boots refund",
)


def fourteen_tickets(model: str = "gpt-4.1", agent: str = "support") -> Turn:
    """Fourteen reworded create_ticket calls, each into the 30 s client timeout."""
    calls = tuple(
        Call(
            "create_ticket",
            {"customer_id": "c_40912", "order_id": "88214", "summary": summary},
            elapsed_ms=TIMEOUT_MS + i,
            error=TimeoutError(f"ticket service did not answer within 30s (attempt {i + 1})"),
        )
        for i, summary in enumerate(TICKET_SUMMARIES)
    )
    return Turn(agent, model, calls)


def eleven_empty_searches(model: str = "gpt-4.1", agent: str = "support") -> Turn:
    """Eleven reworded search_orders calls; each succeeds with an empty list."""
    calls = tuple(
        Call("search_orders", {"query": q, "customer_id": "c_40912"}, 800 + 10 * i, result=[])
        for i, q in enumerate(SEARCH_QUERIES)
    )
    return Turn(agent, model, calls)


MEETING_TITLES = (
    "Planning sync for the Q2 launch with design",
    "Q2 launch planning sync with the design team",
    "Design and launch planning meeting for Q2",
    "Sync with design on the Q2 launch plan",
    "Q2 launch plan review together with design",
)


def five_bookings(model: str = "gpt-4.1", agent: str = "office") -> Turn:
    """Five book_meeting calls for one room and hour, the title reworded, each answered with a
    new booking id: every call succeeded, and five meetings were booked."""
    calls = tuple(
        Call(
            "book_meeting",
            {"room": "4B", "start": "2026-03-02T10:00", "title": title},
            400 + 10 * i,
            result={"booking_id": f"BK-{9001 + i}", "status": "confirmed"},
        )
        for i, title in enumerate(MEETING_TITLES)
    )
    return Turn(agent, model, calls)


def healthy(rng: random.Random, model: str, agent: str = "support") -> Turn:
    """A turn that looks things up and maybe files one ticket, without repeats."""
    order = str(rng.randint(10000, 99999))
    customer = f"c_{rng.randint(10000, 99999)}"
    calls = [
        Call(
            "search_orders",
            {"query": f"order {order}", "customer_id": customer},
            300 + rng.randint(0, 400),
            result=[{"order_id": order, "status": "shipped"}],
        )
    ]
    if rng.random() < 0.5:
        calls.append(
            Call(
                "create_ticket",
                {"customer_id": customer, "order_id": order, "summary": "Where is my order?"},
                900 + rng.randint(0, 300),
                result={"ticket_id": f"T-{rng.randint(1000, 9999)}"},
            )
        )
    return Turn(agent, model, tuple(calls))


def flaky(rng: random.Random, model: str, agent: str = "support", attempts: int = 3) -> Turn:
    """The same ticket retried after timeouts: ``attempts`` calls, then success."""
    order = str(rng.randint(10000, 99999))
    customer = f"c_{rng.randint(10000, 99999)}"
    calls = [
        Call(
            "create_ticket",
            {"customer_id": customer, "order_id": order, "summary": f"Refund question v{i}"},
            TIMEOUT_MS,
            error=TimeoutError("ticket service timed out"),
        )
        for i in range(attempts - 1)
    ]
    calls.append(
        Call(
            "create_ticket",
            {"customer_id": customer, "order_id": order, "summary": "Refund question"},
            1200,
            result={"ticket_id": "T-1"},
        )
    )
    return Turn(agent, model, tuple(calls))
