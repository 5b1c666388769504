"""Suggested declarations are safe to paste: the text a tool sends stays in its identity, free
text it does not send stays out, each field says why, and a structured result gets a path."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from loopwatch.cli import main
from loopwatch.core.config import Config, load_config
from loopwatch.core.effects import sends_text
from loopwatch.core.suggest import (
    IN_NAMED,
    IN_SENT,
    IN_VALUE,
    OUT_FREE_TEXT,
    OUT_NAMED,
    ROWS_REASON,
    choices_from_call,
    result_of_value,
)
from loopwatch.demo.emit import emit_turn
from loopwatch.demo.scenarios import Call, Turn
from tests.support.helpers import Pipeline, S

MESSAGES = tuple(
    f"Deploy {n} of the billing service finished: {n % 4} warnings, see the run log"
    for n in range(101, 122)
)
DOCS = {"results": [{"id": "kb_311"}, {"id": "kb_907"}]}
QUERIES = ("boots refund", "refund for returned boots", "boots return refund status")


def _pasted(caplog: pytest.LogCaptureFixture, tool: str, tmp_path: Path) -> tuple[str, Config]:
    """The one warning about ``tool``, and its suggestion pasted unreviewed into a file."""
    (warning,) = [r.getMessage() for r in caplog.records if f"tool {tool!r}" in r.getMessage()]
    toml = warning.split("\n", 1)[1]
    path = tmp_path / "loopwatch.toml"
    path.write_text(toml + "\n", encoding="utf-8")
    return warning, load_config(path)


def _sends(tool: str) -> Turn:
    calls = tuple(
        Call(tool, {"action": "send", "target": "#deploys", "text": text}, 30) for text in MESSAGES
    )
    return Turn("release", "gpt-4.1", calls)


def test_twenty_one_messages_pasted_suggestion_is_no_loop(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.WARNING, logger="loopwatch")
    first = Pipeline(Config())
    emit_turn(first.tracer, _sends("team_message"), 1000 * S)
    assert first.value("loopwatch_turn_max_attempts_sum") == 1
    warning, config = _pasted(caplog, "team_message", tmp_path)
    first.close()
    assert warning.endswith(
        "[tools.team_message]\n"
        "identity = [\n"
        f'    "action",  # {IN_VALUE}\n'
        f'    "target",  # {IN_VALUE}\n'
        f'    "text",    # {IN_SENT}\n'
        "]\n"
        'reviewed_parameters = ["action", "target", "text"]'
    )
    assert "#deploys" not in warning and "Deploy" not in warning and '"send"' not in warning
    declaration = config.declaration("team_message")
    assert declaration is not None
    assert declaration.identity == ("action", "target", "text")

    pasted = Pipeline(config)
    emit_turn(pasted.tracer, _sends("team_message"), 1000 * S)
    assert pasted.value("loopwatch_tool_calls_total", tool="team_message") == 21
    assert pasted.observations("loopwatch_turn_max_attempts")[1.0] == 1
    assert pasted.value("loopwatch_turn_max_attempts_sum") == 1
    assert pasted.value("loopwatch_loops_total") == 0
    pasted.close()

    # the same suggestion with text left out (as free text) makes the 21 messages one key
    dropped = tmp_path / "dropped.toml"
    text = (tmp_path / "loopwatch.toml").read_text(encoding="utf-8")
    dropped.write_text(text.replace('    "text",', '    # "text",'), encoding="utf-8")
    merged = Pipeline(load_config(dropped))
    emit_turn(merged.tracer, _sends("team_message"), 1000 * S)
    assert merged.value("loopwatch_turn_max_attempts_sum") == 21
    # (a message sent is a write: the same send again is a duplicate side effect)
    assert merged.value("loopwatch_loops_total", tool="team_message", kind="duplicate") == 1
    merged.close()


def test_search_suggestion_drops_the_query_and_reads_rewordings_as_one_key(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.WARNING, logger="loopwatch")
    calls = tuple(
        Call("sg_search_docs", {"query": q, "customer_id": "c_40912"}, 80, {**DOCS, "took_ms": ms})
        for q, ms in zip(QUERIES, (12, 31, 9), strict=True)
    )
    turn = Turn("support", "gpt-4.1", calls)
    first = Pipeline(Config())
    emit_turn(first.tracer, turn, 1000 * S)
    first.flush()
    warning, config = _pasted(caplog, "sg_search_docs", tmp_path)
    first.close()
    assert warning.endswith(
        "[tools.sg_search_docs]\n"
        "effect = \"read\"  # its name's verb is 'search', which reads\n"
        "identity = [\n"
        f'    # "query",      # {OUT_FREE_TEXT}\n'
        f'    "customer_id",  # {IN_VALUE}\n'
        "]\n"
        'reviewed_parameters = ["query", "customer_id"]\n'
        f'result = "results"  # {ROWS_REASON}'
    )
    assert "boots" not in warning and "c_40912" not in warning and "kb_311" not in warning
    declaration = config.declaration("sg_search_docs")
    assert declaration is not None
    assert (declaration.identity, declaration.result) == (("customer_id",), "results")

    pasted = Pipeline(config)
    emit_turn(pasted.tracer, turn, 1000 * S)
    assert pasted.value("loopwatch_turn_max_attempts_sum") == 3
    assert pasted.value("loopwatch_loops_total", tool="sg_search_docs", kind="repeat") == 1
    pasted.close()


def test_structured_results_get_a_result_path(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.WARNING, logger="loopwatch")
    p = Pipeline(Config())
    calls = (
        Call("sg_job_status", {"job_id": "j_77"}, 20, {"job_id": "j_77", "status": "running"}),
        Call("sg_find", {"sku": "B-12"}, 20, {"data": {"items": [{"sku": "B-12"}]}, "took": 3}),
        Call("sg_create_ticket", {"order_id": "88214"}, 20, {"ticket_id": "T-9", "url": "u"}),
        Call("sg_read_file", {"path": "notes.md"}, 20, "plain text is not structured"),
        Call("sg_lookup", {"email": "a@example.com"}, 20, {"c_40912": {"id": "c_40912"}}),
    )
    emit_turn(p.tracer, Turn("support", "gpt-4.1", calls), 1000 * S)
    p.flush()
    p.close()
    lines = {
        r.getMessage().split("'")[1]: r.getMessage().splitlines()[-1]
        for r in caplog.records
        if "sg_" in r.getMessage()
    }
    assert lines == {
        # a status or id path would read an advancing poll as a loop: the whole result it is
        "sg_job_status": 'reviewed_parameters = ["job_id"]',
        "sg_create_ticket": 'reviewed_parameters = ["order_id"]',
        "sg_find": f'result = "data.items"  # {ROWS_REASON}',
        "sg_read_file": 'reviewed_parameters = ["path"]',
        # a result keyed by data (a customer id) names no field in a log line
        "sg_lookup": 'reviewed_parameters = ["email"]',
    }


def test_the_rule_reads_the_tool_name_and_its_action() -> None:
    assert sends_text("send_email") and sends_text("slackPostMessage") and sends_text("notify")
    assert sends_text("fx_channel", ["read", "send"])
    assert not sends_text("search_docs") and not sends_text("create_ticket")
    assert not sends_text("fx_channel", ["read", "list"])
    body = {"action": "send", "channel": "ops", "text": "the build is green"}
    assert [(c.name, c.kept) for c in choices_from_call("fx_channel", body)] == [
        ("action", True),
        ("channel", True),
        ("text", True),
    ]
    read = {**body, "action": "read"}
    assert [(c.name, c.kept, c.reason) for c in choices_from_call("fx_channel", read)][2] == (
        "text",
        False,
        OUT_FREE_TEXT,
    )
    # bounded on a hostile result: a million keys, none of them a known name
    assert result_of_value({f"k{i}": i for i in range(1_000_000)}) is None
    assert result_of_value({"data": {"items": []}, "status": "ok"}) == ("data.items", ROWS_REASON)
    assert result_of_value(["a", "b"]) is None


MCP_TOOLS = {
    "tools": [
        {
            "name": "fx_channel",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["read", "send", "react"]},
                    "channel": {"type": "string"},
                    "text": {"type": "string"},
                },
            },
        },
        {
            "name": "fx_post_comment",
            "inputSchema": {
                "type": "object",
                "properties": {"issue_id": {"type": "string"}, "body": {"type": "string"}},
            },
        },
        {
            "name": "fx_search_docs",
            "inputSchema": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "customer_id": {"type": "string"}},
            },
            "outputSchema": {
                "type": "object",
                "properties": {
                    "results": {"type": "array", "items": {"type": "object"}},
                    "took_ms": {"type": "number"},
                },
            },
        },
    ]
}


def test_init_keeps_sent_text_and_suggests_a_result_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = tmp_path / "mcp_tools.json"
    tools.write_text(json.dumps(MCP_TOOLS), encoding="utf-8")
    path = tmp_path / "loopwatch.toml"
    assert main(["check-tools", str(tools), "--config", str(path), "--init"]) == 0
    capsys.readouterr()
    text = path.read_text(encoding="utf-8")
    tables = text.split("\n\n")[1:]
    assert tables == [
        "[tools.fx_channel]\n"
        "# review: suggested from the parameter names\n"
        "identity = [\n"
        f'    "action",   # {IN_NAMED}\n'
        f'    "channel",  # {IN_NAMED}\n'
        f'    "text",     # {IN_SENT}\n'
        "]\n"
        'reviewed_parameters = ["action", "channel", "text"]',
        "[tools.fx_post_comment]\n"
        "# review: suggested from the parameter names\n"
        "effect = \"write\"  # its name's verb is 'post', which writes\n"
        "identity = [\n"
        f'    "issue_id",  # {IN_NAMED}\n'
        f'    "body",      # {IN_SENT}\n'
        "]\n"
        'reviewed_parameters = ["issue_id", "body"]',
        "[tools.fx_search_docs]\n"
        "# review: suggested from the parameter names\n"
        "effect = \"read\"  # its name's verb is 'search', which reads\n"
        "identity = [\n"
        f'    # "query",      # {OUT_NAMED}\n'
        f'    "customer_id",  # {IN_NAMED}\n'
        "]\n"
        'reviewed_parameters = ["query", "customer_id"]\n'
        f'result = "results"  # {ROWS_REASON}\n',
    ]
    # the file it wrote reads back and passes
    assert main(["check-tools", str(tools), "--config", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split() for line in out[1:]] == [
        ["fx_channel", "action,channel,text", "yes", "-"],
        ["fx_post_comment", "issue_id,body", "yes", "-"],
        ["fx_search_docs", "customer_id", "yes", "results"],
    ]


def test_check_without_init_suggests_the_sent_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = tmp_path / "mcp_tools.json"
    tools.write_text(json.dumps(MCP_TOOLS), encoding="utf-8")
    empty = tmp_path / "empty.toml"
    empty.write_text("", encoding="utf-8")
    assert main(["check-tools", str(tools), "--config", str(empty)]) == 1
    err = capsys.readouterr().err
    assert 'e.g. identity = ["action", "channel", "text"] and' in err
    assert 'e.g. identity = ["issue_id", "body"] and' in err
    assert 'e.g. identity = ["customer_id"] and' in err
