"""``loopwatch check-tools``: one line per problem and a non-zero exit; a table otherwise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from loopwatch.cli import main
from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.guards.check_tools import assert_tools_declared, check

FIXTURES = Path(__file__).parent / "fixtures" / "tools"
OPENAI = str(FIXTURES / "openai_tools.json")
MCP = str(FIXTURES / "mcp_tools_list.json")
DECORATED = "tests.fixtures.tools.decorated"
AGENT = "tests.fixtures.tools.pydantic_agent"


def _toml(tmp_path: Path, text: str) -> str:
    path = tmp_path / "loopwatch.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], list[str]]:
    code = main(["check-tools", *args])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err.splitlines()


def test_openai_file_with_a_missing_declaration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = _toml(tmp_path, "")
    code, out, err = _run(capsys, OPENAI, "--config", empty)
    assert code == 1
    assert out == []
    assert err == [
        "fx_search_orders: has parameters (query, customer_id) but no identity declaration; "
        'declare the fields that decide its effect, e.g. identity = ["query"] under '
        '[tools.fx_search_orders] in loopwatch.toml, or identity = "*" to key on all arguments',
        "1 problem(s) in 3 tool(s)",
    ]


def test_toml_declaration_completes_it_and_the_table_is_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _toml(
        tmp_path,
        '[tools.fx_search_orders]\nidentity = ["customer_id"]\nresult = "rows"\n'
        'reviewed_parameters = ["query", "customer_id"]\n',
    )
    code, out, err = _run(capsys, OPENAI, "--config", config)
    assert (code, err) == (0, [])
    assert out == [
        "tool              identity              reviewed  result",
        "fx_create_ticket  customer_id,order_id  no        -",
        "fx_ping           (no parameters)       no        -",
        "fx_search_orders  customer_id           yes       rows",
    ]


def test_mcp_result_identity_not_a_parameter_and_drift(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, MCP, "--config", _toml(tmp_path, ""))
    assert code == 1
    assert err == [
        "fx_refund_order: parameters changed since the declaration was reviewed (added queue); "
        "re-decide its identity and update reviewed_parameters",
        "fx_send_email: identity field 'recipient' is not a parameter (parameters: to, body)",
        "2 problem(s) in 2 tool(s)",
    ]


def test_toml_is_overridden_by_x_loopwatch(tmp_path: Path) -> None:
    # the file says one thing, the tool definition (later in the merge order) another
    config = Config(
        tools={
            "fx_send_email": ToolDeclaration(identity=("to",)),
            "fx_refund_order": ToolDeclaration(
                reviewed_parameters=("order", "amount", "note", "queue", "currency")
            ),
        }
    )
    checks = {c.tool.name: c for c in check([MCP], config)}
    assert checks["fx_send_email"].declaration == ToolDeclaration(identity=("recipient",))
    assert checks["fx_refund_order"].problems == (
        "fx_refund_order: parameters changed since the declaration was reviewed (added queue); "
        "re-decide its identity and update reviewed_parameters",
    )


def test_removed_parameters_are_named(tmp_path: Path) -> None:
    config = Config(
        tools={
            "fx_search_orders": ToolDeclaration(
                identity=("customer_id",), reviewed_parameters=("query", "customer_id", "limit")
            )
        }
    )
    checks = {c.tool.name: c for c in check([OPENAI], config)}
    assert checks["fx_search_orders"].problems == (
        "fx_search_orders: parameters changed since the declaration was reviewed (removed "
        "limit); re-decide its identity and update reviewed_parameters",
    )


def test_python_import_paths_decorators_and_pydantic_ai_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, DECORATED, AGENT, "--config", _toml(tmp_path, ""))
    assert code == 1
    assert err[0].startswith(
        "fx_lookup_customer: has parameters (email) but no identity declaration;"
    )
    assert err[1:] == ["1 problem(s) in 5 tool(s)"]
    code, out, err = _run(
        capsys,
        DECORATED,
        f"{AGENT}:agent",
        "--config",
        _toml(tmp_path, '[tools.fx_lookup_customer]\nidentity = ["email"]\n'),
    )
    assert (code, err) == (0, [])
    assert [line.split()[0] for line in out] == [
        "tool",
        "fx_cancel_order",
        "fx_escalate",
        "fx_lookup_customer",
        "fx_set_flag",
        "fx_status",
    ]
    assert out[4].split()[:2] == ["fx_set_flag", "*"]


def test_unreadable_sources_exit_two(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _toml(tmp_path, "")
    code, _, err = _run(capsys, "no/such/tools.json", "--config", config)
    assert (code, err) == (2, ["loopwatch check-tools: no/such/tools.json: no such file"])
    code, _, err = _run(capsys, "tests.fixtures.tools.nothing_here", "--config", config)
    assert code == 2
    assert err[0].startswith("loopwatch check-tools: tests.fixtures.tools.nothing_here: cannot")
    bad = tmp_path / "bad.json"
    bad.write_text('{"tools": [{"description": "no name"}]}', encoding="utf-8")
    code, _, err = _run(capsys, str(bad), "--config", config)
    assert code == 2 and "has no name" in err[0]
    code, _, err = _run(capsys, OPENAI, "--config", _toml(tmp_path, "[tools.x]\nidentty = 1\n"))
    assert code == 2 and "unknown key(s) identty" in err[0]


def test_pytest_helper() -> None:
    config = Config(tools={"fx_search_orders": ToolDeclaration(identity=("customer_id",))})
    checks = assert_tools_declared(OPENAI, config=config)
    assert [c.tool.name for c in checks] == ["fx_create_ticket", "fx_ping", "fx_search_orders"]
    with pytest.raises(AssertionError) as failure:
        assert_tools_declared(OPENAI, MCP, config=config)
    assert str(failure.value).splitlines() == [
        "tool declarations need attention:",
        "fx_refund_order: parameters changed since the declaration was reviewed (added queue); "
        "re-decide its identity and update reviewed_parameters",
        "fx_send_email: identity field 'recipient' is not a parameter (parameters: to, body)",
    ]


def test_console_script_exit_code(tmp_path: Path) -> None:
    """The installed entry point, as a CI step runs it."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "loopwatch.cli",
            "check-tools",
            MCP,
            "--config",
            _toml(tmp_path, ""),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 3
