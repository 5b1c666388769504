"""``loopwatch`` command line: demo, serve, check-tools, replay, compare, mcp-guard."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from loopwatch import compiled
from loopwatch.core.log_names import PackageFormatter
from loopwatch.version import VERSION

# subcommand -> (module with add_arguments(parser) and run(args) -> int, help)
COMMANDS = {
    "demo": (
        "loopwatch.demo.run",
        "simulated agents (the two incidents included) through the real processor",
    ),
    "serve": ("loopwatch.service.run", "receive OTLP traces and serve /metrics"),
    "check-tools": (
        "loopwatch.guards.check_tools",
        "fail when a tool's identity declaration is missing or has drifted (for CI)",
    ),
    "replay": (
        "loopwatch.history.replay",
        "stored traces (OTLP, Jaeger, Tempo files) through the same pipeline: a report, or "
        "OpenMetrics to backfill Prometheus",
    ),
    "compare": (
        "loopwatch.history.compare",
        "an eval run's traces against a baseline's: exit 1 when the candidate loops more",
    ),
    "mcp-guard": (
        "loopwatch.mcp_guard",
        "a stdio MCP server in front of another (-- COMMAND [ARGS...]): tools/call guarded by "
        "the idempotency arbiter and the loop breaker, everything else passed through",
    ),
}

# commands whose imports need an extra installed: command -> extra
EXTRAS = {"mcp-guard": "mcp-guard"}


def _name_loggers_in_last_resort() -> None:
    """A command that sets up no logging (replay, compare, check-tools) prints warnings through
    logging's last resort, which shows the message alone: this names the package too."""
    if logging.lastResort is not None:
        logging.lastResort.setFormatter(PackageFormatter("%(name)s: %(message)s"))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    _name_loggers_in_last_resort()
    if not args or args[0] not in COMMANDS:
        parser = argparse.ArgumentParser(
            prog="loopwatch",
            description="Catch LLM-agent tool-call loops from OpenTelemetry spans.",
            # the version line as written, never wrapped at the terminal's width
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        # which build runs, too: the compiled one or pure Python (loopwatch.compiled)
        build = f" ({compiled.describe()})" if "--version" in args else ""
        parser.add_argument("--version", action="version", version=f"loopwatch {VERSION}{build}")
        sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
        for name, (_, help_text) in COMMANDS.items():
            sub.add_parser(name, help=help_text, add_help=False)
        parser.parse_args(args)  # prints usage or help and exits
        return 2
    name = args[0]
    module_name, help_text = COMMANDS[name]
    # import only the chosen command: `serve` needs grpc, `demo` does not
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        # a dependency removed or broken after install: named, not a traceback
        if name in EXTRAS:
            hint = f"install the {name} extra: pip install 'loopwatch[{EXTRAS[name]}]'"
        else:
            hint = "reinstall loopwatch: pip install loopwatch"
        print(f"loopwatch {name}: {e}; {hint}", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(prog=f"loopwatch {name}", description=help_text)
    module.add_arguments(parser)
    try:
        return int(module.run(parser.parse_args(args[1:])))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
