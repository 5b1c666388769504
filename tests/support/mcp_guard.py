"""The MCP guard's fixture server and the configuration it runs under."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


SERVER = ROOT / "tests" / "fixtures" / "mcp_guard" / "server.py"


CONFIG = """
[tools.create_ticket]
identity = ["customer_id", "order_id"]
reviewed_parameters = ["customer_id", "order_id", "summary"]
"""
