"""loopwatch.toml and LOOPWATCH_* settings: read right, refused clearly."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopwatch.core.config import SETTINGS, ConfigError, Setting, load_config
from loopwatch.core.declarations import ToolDeclaration, tool

EXAMPLE = """
[defaults]
loop_threshold = 4
no_rows_threshold = 5

[limits]
label_values = 50

[tools.create_ticket]
identity = ["customer_id", "order_id"]
reviewed_parameters = ["customer_id", "order_id", "summary"]

[tools.search_orders]
result = "rows"
loop_threshold = 6
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "loopwatch.toml"
    path.write_text(text)
    return path


def test_reads_the_documented_file(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, EXAMPLE), environ={})
    assert config.loop_threshold == 4 and config.no_rows_threshold == 5
    assert config.label_limit == 50
    assert config.declaration("create_ticket") == ToolDeclaration(
        identity=("customer_id", "order_id"),
        reviewed_parameters=("customer_id", "order_id", "summary"),
    )
    search = config.declaration("search_orders")
    assert config.loop_threshold_for(search) == 6
    assert config.loop_threshold_for(config.declaration("create_ticket")) == 4


def test_environment_overrides_file_and_follows_otel_names(tmp_path: Path) -> None:
    path = write(tmp_path, EXAMPLE)
    config = load_config(path, environ={"LOOPWATCH_LOOP_THRESHOLD": "7"})
    assert config.loop_threshold == 7
    config = load_config(path, environ={"OTEL_EXPORTER_PROMETHEUS_PORT": "9999"})
    assert config.metrics_port == 9999
    config = load_config(environ={"LOOPWATCH_CONFIG": str(path)})
    assert config.loop_threshold == 4


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[defaults]\nloop_treshold = 3\n", "unknown key defaults.loop_treshold"),
        ("[defaults]\nloop_threshold = 1\n", "must be at least 2"),
        ("[defaults]\nloop_threshold = 'three'\n", "expected int"),
        ("[tools.x]\nidentity = 'customer_id'\n", "must be a list of parameter names"),
        ("[tools.x]\nidentiy = ['a']\n", "unknown key(s) identiy"),
        ("[extra]\na = 1\n", "unknown table [extra]"),
        ("[defaults\n", "not valid TOML"),
    ],
)
def test_bad_settings_say_what_and_where(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=None) as info:
        load_config(write(tmp_path, text), environ={})
    assert message in str(info.value)
    assert "loopwatch.toml" in str(info.value)


def test_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="LOOPWATCH_METRICS_PORT: expected int"):
        load_config(environ={"LOOPWATCH_METRICS_PORT": "http"})


INTEGER_SETTINGS = [s for s in SETTINGS if s.kind is int]


@pytest.mark.parametrize("setting", INTEGER_SETTINGS, ids=[s.key for s in INTEGER_SETTINGS])
def test_a_float_for_an_integer_setting_is_refused_in_file_and_environment(
    tmp_path: Path, setting: Setting
) -> None:
    path = write(tmp_path, f"[{setting.table}]\n{setting.key} = 3.5\n")
    with pytest.raises(ConfigError) as in_file:
        load_config(path, environ={})
    assert str(in_file.value) == f"{path}: {setting.table}.{setting.key}: expected int, got 3.5"
    variable = setting.variables[0]
    with pytest.raises(ConfigError) as in_environment:
        load_config(environ={variable: "3.5"})
    assert str(in_environment.value) == f"{variable}: expected int, got '3.5'"


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.toml", environ={})
    assert str(info.value) == f"{tmp_path / 'nope.toml'}: no such file (from argument)"


def test_a_directory_for_the_file_says_it_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, environ={})
    assert str(info.value) == f"{tmp_path}: is a directory, not a file (from argument)"
    with pytest.raises(ConfigError) as info:
        load_config(environ={"LOOPWATCH_CONFIG": str(tmp_path)})
    assert str(info.value) == f"{tmp_path}: is a directory, not a file (from LOOPWATCH_CONFIG)"


def test_decorator_wins_over_file_and_schema(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, EXAMPLE), environ={}).with_tool_definitions(
        [
            {
                "type": "function",
                "function": {
                    "name": "create_ticket",
                    "parameters": {"type": "object", "x-loopwatch": {"identity": ["order_id"]}},
                },
            }
        ]
    )
    decl = config.declaration("create_ticket")
    assert decl is not None and decl.identity == ("order_id",)
    assert decl.reviewed_parameters == ("customer_id", "order_id", "summary")

    file_config = load_config(
        write(tmp_path, '[tools.refund_test_only]\nidentity = ["a"]\nresult = "rows"\n'), environ={}
    )

    @tool(identity=["b"], name="refund_test_only")
    def refund(b: str) -> None: ...

    assert file_config.declaration("refund_test_only") == ToolDeclaration(
        identity=("b",), result="rows"
    )
