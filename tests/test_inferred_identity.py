"""Undeclared tools: the inferred key (arguments minus free text on failure), its metric, and
the one warning per tool."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pytest

from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.core.identity import FREE_TEXT_CHARS, is_free_text, without_free_text
from loopwatch.core.keys import attempt_key, identities
from loopwatch.core.suggest import ALL_FREE_TEXT, IN_VALUE, OUT_FREE_TEXT
from loopwatch.demo.emit import emit_turn
from loopwatch.demo.scenarios import Call, Turn
from tests.support.helpers import Pipeline, S

TICKET = {"customer_id": "c_40912", "order_id": "88214"}


def test_free_text_is_whitespace_or_long() -> None:
    assert is_free_text("refund for boots")
    assert is_free_text("tab\tseparated") and is_free_text("line\n")
    assert is_free_text("x" * (FREE_TEXT_CHARS + 1))
    assert not is_free_text("x" * FREE_TEXT_CHARS)  # a SHA-256 hex digest stays identity
    assert not is_free_text("0b9c2f1e-5d2a-4f7b-9a61-3c8e2d7f4a10")
    assert not is_free_text("jane.doe@example.com")
    assert not is_free_text("") and not is_free_text(88214) and not is_free_text(None)


def test_without_free_text_reads_nested_values() -> None:
    arguments = {
        **TICKET,
        "summary": "Refund missing",
        "order": {"id": "88214", "note": "left at the door"},
        "tags": ["refund", "needs review"],
        "priority": 2,
    }
    assert without_free_text(arguments) == {
        **TICKET,
        "order": {"id": "88214"},
        "tags": ["refund"],
        "priority": 2,
    }
    assert without_free_text("boots refund") is None  # a bare free-text argument
    assert without_free_text("88214") == "88214"


def test_deep_nesting_is_bounded() -> None:
    deep: object = "some free text"
    for _ in range(5000):
        deep = {"a": deep}
    kept, original = without_free_text(deep), deep
    # read to a fixed depth and kept whole below it: bounded work, no recursion error
    for _ in range(8):
        assert isinstance(kept, dict) and isinstance(original, dict)
        assert kept is not original
        kept, original = kept["a"], original["a"]
    assert kept is original


def test_one_key_function_decides_which_identity() -> None:
    a = {**TICKET, "summary": "Customer has not received refund"}
    b = {**TICKET, "summary": "Refund not received, customer following up"}
    failed_a = attempt_key("create_ticket", a, "timeout", None)
    assert failed_a == attempt_key("create_ticket", b, "timeout", None)
    assert failed_a.inferred
    # a successful read is keyed on all its arguments, whatever its wording
    ok_a = attempt_key("lookup_ticket", a, "rows", None)
    assert ok_a != attempt_key("lookup_ticket", b, "rows", None)
    assert not ok_a.inferred
    assert identities("lookup_ticket", a, None) == (failed_a.identity, ok_a.identity)
    # a successful write (create: its name's verb) on what it writes: prose left out, its
    # answer not compared (outcome ok)
    written = attempt_key("create_ticket", a, "rows", None)
    assert written == attempt_key("create_ticket", b, "rows", None)
    assert written.inferred and written.outcome == "ok"
    assert identities("create_ticket", a, None) == (failed_a.identity, written.identity)
    declared = ToolDeclaration(identity=("customer_id", "order_id"))
    assert not attempt_key("create_ticket", a, "timeout", declared).inferred
    same = attempt_key("create_ticket", a, "timeout", declared).identity
    assert identities("create_ticket", a, declared) == (same, same)
    assert attempt_key("t", a, "timeout", None, arguments_known=False).identity == "?"


def _failed_calls(tool: str, n: int, arguments: Mapping[str, object]) -> Turn:
    calls = tuple(
        Call(tool, {**arguments, "note": f"try number {i}"}, 10, error=TimeoutError("slow"))
        for i in range(n)
    )
    return Turn("support", "gpt-4.1", calls)


def test_one_warning_per_undeclared_tool(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="loopwatch")
    config = Config(tools={"warn_declared": ToolDeclaration(identity=("customer_id",))})
    p = Pipeline(config)
    t = 1000 * S
    for _ in range(2):
        t = emit_turn(p.tracer, _failed_calls("warn_create", 3, TICKET), t)
        t = emit_turn(p.tracer, _failed_calls("warn_lookup", 2, {"email": "a@example.com"}), t)
        t = emit_turn(p.tracer, _failed_calls("warn_declared", 2, TICKET), t)
        t = emit_turn(p.tracer, Turn("support", "m", (Call("warn_ping", {}, 5, result="ok"),)), t)
    p.flush()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    create, lookup = sorted(warnings)
    assert "'warn_create' has no identity declaration" in create
    assert create.endswith(
        "[tools.warn_create]\n"
        "effect = \"write\"  # its name's verb is 'create', which writes\n"
        "identity = [\n"
        f'    "customer_id",  # {IN_VALUE}\n'
        f'    "order_id",     # {IN_VALUE}\n'
        f'    # "note",       # {OUT_FREE_TEXT}\n'
        "]\n"
        'reviewed_parameters = ["customer_id", "order_id", "note"]'
    )
    assert "'warn_lookup'" in lookup and f'    "email",   # {IN_VALUE}\n' in lookup
    text = "\n".join(warnings)
    assert "c_40912" not in text and "88214" not in text and "try number" not in text
    assert p.value("loopwatch_calls_keyed_by_inference_total", tool="warn_create") == 6
    assert p.value("loopwatch_calls_keyed_by_inference_total", tool="warn_declared") == 0
    p.close()


def test_warning_suggests_star_when_every_argument_is_free_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="loopwatch")
    p = Pipeline(Config())
    emit_turn(p.tracer, _failed_calls("warn_ask", 1, {}), 1000 * S)
    p.flush()
    (warning,) = [r.getMessage() for r in caplog.records if "warn_ask" in r.getMessage()]
    assert warning.endswith(f'identity = "*"  # {ALL_FREE_TEXT}\nreviewed_parameters = ["note"]')
    p.close()
