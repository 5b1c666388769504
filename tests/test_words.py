"""Counts with the word in the number it takes: "1 turn", "2 turns", "1 span was"."""

from __future__ import annotations

from loopwatch.core.words import counted, plural
from loopwatch.guards.terminal import budget_stop, circuit_open


def test_one_is_singular_and_every_other_count_plural() -> None:
    assert [counted(n, "turn") for n in (0, 1, 2)] == ["0 turns", "1 turn", "2 turns"]
    assert counted(1, "open trace") == "1 open trace"
    assert counted(1520, "span", grouped=True) == "1,520 spans"
    assert [plural(n, "was", "were") for n in (0, 1, 2)] == ["were", "was", "were"]
    assert [plural(n, "attempt") for n in (1, 14)] == ["attempt", "attempts"]


def test_the_guards_answers_count_one_in_the_singular() -> None:
    assert circuit_open("create_ticket", "ok", 1).message == (
        "STOPPED by loopwatch: create_ticket was not run. The same request was already made and "
        "1 duplicate of it was refused. Do not call it again. Report the first outcome to the "
        "user."
    )
    assert budget_stop("search_orders", 1).message == (
        "STOPPED by loopwatch: search_orders was not run. The tool budget of this turn (1 call) "
        "is used up. Do not call tools again. Answer with what you have."
    )
