"""The settings table (loopwatch.core.config.SETTINGS) is the one place settings live: the loader
reads it, docs/configuration.md (its example and its tables) is generated from it, and every
environment variable the code reads is in it (or in VARIABLES beside it)."""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from loopwatch.core import config as config_module
from loopwatch.core.config import SETTINGS, VARIABLES, Config, ConfigError, load_config

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # docs_gen/ is source, not an installed package
    sys.path.insert(0, str(ROOT))

from docs_gen import settings as settings_doc  # noqa: E402

# where the code reads the environment: the package; and the build, whose own LOOPWATCH_* are
# documented (LOOPWATCH_COMPILE) beside the compiler's (CC, MYPY_CACHE_DIR)
PACKAGE = sorted((ROOT / "src").rglob("*.py"))
BUILD = [ROOT / "setup.py", *sorted((ROOT / "build_backend").glob("*.py"))]
OURS = re.compile(r"LOOPWATCH_[A-Z0-9_]+")


# -- the generated docs ----------------------------------------------------------------------------
def test_readme_and_reference_match_the_table() -> None:
    on_disk = {name: (ROOT / name).read_text(encoding="utf-8") for name in settings_doc.render()}
    assert settings_doc.render() == on_disk, (
        "the settings docs are stale: run python -m docs_gen.settings"
    )
    done = subprocess.run(
        [sys.executable, "-m", "docs_gen.settings", "--check"], cwd=ROOT, capture_output=True
    )
    assert done.returncode == 0, done.stderr
    reference = on_disk["docs/configuration.md"]
    for s in SETTINGS:
        for variable in s.variables:
            assert reference.count(f"`{variable}`") >= 2  # the example's list and its table
    for v in VARIABLES:
        assert f"| `{v.name}` |" in reference


def test_a_changed_setting_changes_the_docs() -> None:
    """The drift test can fail: the docs follow the table."""
    changed = [
        dataclasses.replace(s, doc="changed.", default=4) if s.name == "loop_threshold" else s
        for s in SETTINGS
    ]
    assert "loop_threshold = 4          # changed.\n" in settings_doc.example_block(changed)
    assert "| `loop_threshold` | `LOOPWATCH_LOOP_THRESHOLD` | integer | `4` | 2 | changed. |" in (
        settings_doc.reference_block(changed)
    )


def test_the_readme_example_is_the_defaults() -> None:
    """The generated TOML example, read back by the loader, is Config() exactly."""
    block = settings_doc.toml_example()
    text = block.removeprefix("```toml\n").removesuffix("```\n")
    assert config_module.config_from_mapping(tomllib.loads(text)) == Config()
    commented = [line for line in text.splitlines() if line.startswith("# ")]
    assert commented == [
        "# same_result_threshold = 3 # consecutive calls of one tool that got the same data "
        "(default: no_rows_threshold)"
    ]


# -- the table is the loader's -------------------------------------------------------------------
def test_every_setting_is_a_row_of_the_table() -> None:
    not_settings = {"tools", "schema_tools"}
    names = [f.name for f in dataclasses.fields(Config) if f.name not in not_settings]
    assert [s.name for s in SETTINGS] == names
    assert len({(s.table, s.key) for s in SETTINGS}) == len(SETTINGS) == 28
    variables = [v for s in SETTINGS for v in s.variables] + [v.name for v in VARIABLES]
    assert len(set(variables)) == len(variables)
    for s in SETTINGS:
        assert getattr(Config(), s.name) == s.default == getattr(Config, s.name)
        assert s.doc and "\n" not in s.doc, s.name
        assert s.variables[0].startswith("LOOPWATCH_"), s.name


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s.minimum is not None], ids=str)
def test_each_minimum_is_enforced_from_file_and_environment(
    tmp_path: Path, setting: config_module.Setting
) -> None:
    low = setting.minimum
    assert low is not None
    below = low - 1 if setting.kind is int else low - 0.0005
    path = tmp_path / "loopwatch.toml"
    path.write_text(f"[{setting.table}]\n{setting.key} = {below!r}\n")
    with pytest.raises(ConfigError, match=f"{setting.table}.{setting.key}: must be at least"):
        load_config(path, environ={})
    variable = setting.variables[0]
    with pytest.raises(ConfigError, match=f"{variable}: must be at least {low!r}, got"):
        load_config(environ={variable: repr(below)})
    at = load_config(environ={variable: repr(low)})
    assert getattr(at, setting.name) == low


# -- every variable the code reads is documented -----------------------------------------------
def _is_environ(node: ast.expr) -> bool:
    """``os.environ``, or a mapping the code names ``env``/``environ`` (an injected environ)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ"
    return isinstance(node, ast.Name) and node.id in ("env", "environ")


def _constants(trees: dict[Path, ast.Module]) -> dict[str, str]:
    """Module-level ``NAME = "..."`` of every module (variables are named by such constants)."""
    out: dict[str, str] = {}
    for tree in trees.values():
        for node in tree.body:
            value = node.value if isinstance(node, ast.Assign) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                for target in node.targets if isinstance(node, ast.Assign) else ():
                    if isinstance(target, ast.Name):
                        out[target.id] = value.value
    return out


def environment_reads(paths: list[Path]) -> tuple[set[str], list[tuple[str, str]]]:
    """(variables read, reads whose variable the scan cannot name as (file, expression))."""
    trees = {p: ast.parse(p.read_text(encoding="utf-8")) for p in paths}
    constants = _constants(trees)
    found: set[str] = set()
    unnamed: list[tuple[str, str]] = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            keys: list[ast.expr] = []
            if isinstance(node, ast.Call) and node.args:
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr == "getenv":
                    keys.append(node.args[0])
                elif isinstance(func, ast.Attribute) and _is_environ(func.value):
                    keys.append(node.args[0])  # .get, .pop, .setdefault
            elif isinstance(node, ast.Subscript) and _is_environ(node.value):
                keys.append(node.slice)
            elif (
                isinstance(node, ast.Compare)
                and _is_environ(node.comparators[-1])
                and isinstance(node.ops[-1], ast.In | ast.NotIn)
            ):
                keys.append(node.left)
            for key in keys:
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    found.add(key.value)
                elif isinstance(key, ast.Name) and key.id in constants:
                    found.add(constants[key.id])
                else:
                    unnamed.append((str(path.relative_to(ROOT)), ast.unparse(key)))
        # ours, however read (a subprocess's env, a constant passed on)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and OURS.fullmatch(str(node.value)):
                found.add(str(node.value))
    return found, unnamed


def documented() -> set[str]:
    return {v for s in SETTINGS for v in s.variables} | {v.name for v in VARIABLES}


def test_every_variable_the_code_reads_is_in_the_table() -> None:
    found, unnamed = environment_reads(PACKAGE)
    found |= {v for v in environment_reads(BUILD)[0] if OURS.fullmatch(v)}
    assert found - documented() == set(), "add them to SETTINGS or VARIABLES (core/config.py)"
    # the loader's own reads go through the table
    assert sorted(set(unnamed)) == [("src/loopwatch/core/config.py", "var")]
    # the loader reads every row of SETTINGS; the other variables must be read somewhere
    assert {v.name for v in VARIABLES} - found == set(), "documented but read nowhere"
    assert {"LOOPWATCH_GRPC_ADDRESS", "LOOPWATCH_HTTP_ADDRESS", "LOOPWATCH_GRACE_SECONDS"} < found


def test_the_scan_finds_a_new_variable(tmp_path: Path) -> None:
    """The check can fail: a read of an undocumented variable, in each form, is found."""
    module = ROOT / "build" / "scan_probe.py"
    module.parent.mkdir(exist_ok=True)
    module.write_text(
        "import os\n"
        'NAME = "OTEL_NEW_ONE"\n'
        'a = os.environ.get("A_NEW_ONE")\n'
        'b = os.getenv("B_NEW_ONE")\n'
        'c = "C_NEW_ONE" in os.environ\n'
        "d = os.environ[NAME]\n"
        'e = {"LOOPWATCH_NEW_ONE": "1"}\n'
    )
    try:
        found, unnamed = environment_reads([module])
    finally:
        module.unlink()
    assert found == {"A_NEW_ONE", "B_NEW_ONE", "C_NEW_ONE", "OTEL_NEW_ONE", "LOOPWATCH_NEW_ONE"}
    assert unnamed == []
