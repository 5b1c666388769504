"""Idempotency keys from identity fields: reworded free text keeps the key."""

from __future__ import annotations

import pytest

import loopwatch
from loopwatch.core.config import Config, config_from_mapping
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.core.identity import canonical_json, short_hash
from loopwatch.demo.scenarios import TICKET_SUMMARIES
from loopwatch.guards import UndeclaredToolError, idempotency_key

CONFIG = Config(tools={"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))})


def _args(summary: str, order: str = "88214", customer: str = "c_40912") -> dict[str, str]:
    return {"customer_id": customer, "order_id": order, "summary": summary}


def test_fourteen_reworded_calls_share_one_key() -> None:
    keys = {idempotency_key("create_ticket", _args(s), CONFIG) for s in TICKET_SUMMARIES}
    assert len(keys) == 1
    # a hash of the whole arguments would have given fourteen
    assert len({short_hash(canonical_json(_args(s))) for s in TICKET_SUMMARIES}) == 14


def test_key_is_stable_and_exported() -> None:
    key = loopwatch.idempotency_key("create_ticket", _args("a"), CONFIG)
    assert key == idempotency_key("create_ticket", {**_args("b"), "priority": "high"}, CONFIG)
    assert key.startswith("lw1-") and len(key) == 36
    # argument order does not matter
    reordered = {"summary": "c", "order_id": "88214", "customer_id": "c_40912"}
    assert idempotency_key("create_ticket", reordered, CONFIG) == key
    # the exact value is part of the contract: stored keys must survive upgrades
    assert key == "lw1-" + short_hash(
        "create_ticket\n"
        + short_hash(canonical_json({"customer_id": "c_40912", "order_id": "88214"})),
        32,
    )


def test_different_identity_or_tool_gives_a_different_key() -> None:
    base = idempotency_key("create_ticket", _args("a"), CONFIG)
    assert idempotency_key("create_ticket", _args("a", order="88215"), CONFIG) != base
    assert idempotency_key("create_ticket", _args("a", customer="c_1"), CONFIG) != base
    config = Config(tools={**CONFIG.tools, "open_case": CONFIG.tools["create_ticket"]})
    assert idempotency_key("open_case", _args("a"), config) != base


def test_undeclared_tool_raises_instead_of_hashing_everything() -> None:
    with pytest.raises(UndeclaredToolError, match="'refund_order' has no identity declaration"):
        idempotency_key("refund_order", {"order_id": "1", "note": "x"}, CONFIG)
    # a declaration without identity (only a result kind) is still undeclared
    config = Config(tools={"search": ToolDeclaration(result="rows")})
    with pytest.raises(UndeclaredToolError):
        idempotency_key("search", {"q": "x"}, config)


def test_whole_arguments_is_an_explicit_choice() -> None:
    config = config_from_mapping({"tools": {"set_flag": {"identity": "*"}}})
    a = idempotency_key("set_flag", {"name": "x", "on": True}, config)
    assert a == idempotency_key("set_flag", {"on": True, "name": "x"}, config)
    assert a != idempotency_key("set_flag", {"name": "x", "on": False}, config)


def test_missing_identity_field_is_an_error() -> None:
    with pytest.raises(ValueError, match="lack identity field"):
        idempotency_key("create_ticket", {"customer_id": "c_1", "summary": "x"}, CONFIG)


def test_dotted_identity_paths() -> None:
    config = Config(tools={"refund": ToolDeclaration(identity=("order.id",))})
    a = idempotency_key("refund", {"order": {"id": "1", "note": "a"}}, config)
    assert a == idempotency_key("refund", {"order": {"id": "1", "note": "b"}}, config)
    assert a != idempotency_key("refund", {"order": {"id": "2", "note": "a"}}, config)


def test_decorator_declarations_apply() -> None:
    @loopwatch.tool(identity=["account_id"], name="lw_test_close_account")
    def close_account(account_id: str, reason: str) -> None: ...

    a = idempotency_key("lw_test_close_account", {"account_id": "a1", "reason": "x"}, Config())
    b = idempotency_key("lw_test_close_account", {"account_id": "a1", "reason": "y"}, Config())
    assert a == b
