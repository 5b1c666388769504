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
        "declare the fields that decide its effect under [tools.fx_search_orders] in "
        'loopwatch.toml, e.g. identity = ["customer_id"] and reviewed_parameters = ["query", '
        '"customer_id"] (identity = "*" keys on all arguments; `loopwatch check-tools --init` '
        "writes a starter file)",
        "1 problem in 3 tools",
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
        "2 problems in 2 tools",
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
    assert err[1:] == ["1 problem in 5 tools"]
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


STARTER = """\
# loopwatch.toml written by `loopwatch check-tools --init` from {sources}.
# Each identity is a suggestion: the parameters that decide what a call does (which
# customer, which order), never free text the model rewords, except the text a tool
# sends, posts or writes (distinct texts are distinct effects). effect says whether a
# call changes something ("write": its repeats never make progress, and a second
# success on one identity is a duplicate side effect) or only reads. Each field's comment
# says why it is in or out; a field left out is a commented-out entry. Review every
# table marked "review", then run `loopwatch check-tools` in CI. identity = "*" keys a
# call on all its arguments; reviewed_parameters is what the identity was judged against.

[tools.fx_cancel_order]
# review: identity as declared already ({agent})
effect = "write"  # its name's verb is 'cancel', which writes
identity = ["order_id"]
reviewed_parameters = ["order_id", "reason"]

[tools.fx_create_ticket]
# review: identity as declared already ({openai})
effect = "write"  # its name's verb is 'create', which writes
identity = ["customer_id", "order_id"]
reviewed_parameters = ["customer_id", "order_id", "summary"]

[tools.fx_lookup_customer]
# review: suggested from the parameter names
effect = "read"  # its name's verb is 'lookup', which reads
identity = [
    "email",  # in: not named like free text: decides what the call does
]
reviewed_parameters = ["email"]

# fx_ping: no parameters, nothing to declare

[tools.fx_search_orders]
# review: suggested from the parameter names
effect = "read"  # its name's verb is 'search', which reads
identity = [
    # "query",      # out: named like free text, reworded on retries
    "customer_id",  # in: not named like free text: decides what the call does
]
reviewed_parameters = ["query", "customer_id"]

# fx_status: no parameters, nothing to declare
"""


def test_init_writes_a_starter_file_that_check_tools_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "loopwatch.toml")
    code, out, err = _run(capsys, OPENAI, f"{AGENT}:agent", "--config", path, "--init")
    assert (code, err) == (0, [])
    assert out == [
        f'wrote {path}: 4 tool declaration(s) to review (lines marked "# review"), then run '
        "loopwatch check-tools without --init"
    ]
    text = Path(path).read_text(encoding="utf-8")
    assert text == STARTER.format(
        sources=f"{OPENAI} {AGENT}:agent", agent=f"{AGENT}:agent", openai=OPENAI
    )
    code, out, err = _run(capsys, OPENAI, f"{AGENT}:agent", "--config", path)
    assert (code, err) == (0, [])
    assert [line.split()[:3] for line in out[1:]] == [
        ["fx_cancel_order", "order_id", "yes"],
        ["fx_create_ticket", "customer_id,order_id", "yes"],
        ["fx_lookup_customer", "email", "yes"],
        ["fx_ping", "(no", "parameters)"],
        ["fx_search_orders", "customer_id", "yes"],
        ["fx_status", "(no", "parameters)"],
    ]


def test_init_never_overwrites_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _toml(
        tmp_path,
        '[defaults]\nloop_threshold = 4\n\n[tools.fx_search_orders]\nidentity = "*"\n'
        'result = "rows"\n',
    )
    before = Path(path).read_text(encoding="utf-8")
    code, out, err = _run(capsys, OPENAI, "--config", path, "--init")
    assert code == 2 and out == []
    assert err == [
        f"loopwatch check-tools: {path} exists; pass --force to overwrite it, or check against "
        "it without --init"
    ]
    assert Path(path).read_text(encoding="utf-8") == before
    code, _, err = _run(capsys, OPENAI, "--config", path, "--init", "--force")
    assert (code, err) == (0, [])
    written = Path(path).read_text(encoding="utf-8")
    assert (
        "[tools.fx_search_orders]\n"
        f"# review: identity as declared already ({OPENAI})\n"
        "effect = \"read\"  # its name's verb is 'search', which reads\n"
        'identity = "*"\n'
        'reviewed_parameters = ["query", "customer_id"]\n'
        'result = "rows"\n'
    ) in written
    assert "loop_threshold" not in written
    assert _run(capsys, OPENAI, "--config", path)[0] == 0


AGENT_FILE = """\
from pydantic_ai import Agent

agent = Agent(None, name="support")


@agent.tool_plain
def fx_refund(order_id: str, note: str) -> str:
    return "ok"
"""


@pytest.mark.slow
def test_a_python_file_and_the_current_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "fx_file_agent.py").write_text(AGENT_FILE, encoding="utf-8")
    config = _toml(tmp_path, '[tools.fx_refund]\nidentity = ["order_id"]\n')
    code, out, err = _run(capsys, str(tmp_path / "fx_file_agent.py:agent"), "--config", config)
    assert (code, err) == (0, [])
    assert out[1].split()[:2] == ["fx_refund", "order_id"]
    code, _, err = _run(capsys, str(tmp_path / "fx_file_agent.py"), "--config", config)
    assert code == 0
    code, _, err = _run(capsys, str(tmp_path / "missing.py"), "--config", config)
    assert (code, err) == (2, [f"loopwatch check-tools: {tmp_path / 'missing.py'}: no such file"])
    # the installed console script, run from the project root: module:attribute imports
    (tmp_path / "fx_cwd_agent.py").write_text(AGENT_FILE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    done = subprocess.run(
        [str(Path(sys.executable).parent / "loopwatch"), "check-tools", "fx_cwd_agent:agent"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[1].split()[:2] == ["fx_refund", "order_id"]
