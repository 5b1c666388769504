"""AutoGen AgentChat with both layers: OpenInference's spans and AutoGen's own
(``execute_tool <tool>``, ``invoke_agent``), which go to the global provider. AutoGen's tool
span is a direct child of OpenInference's TOOL span for the same call: the outer one has the
arguments, the inner one ``error.type``."""

from __future__ import annotations

from tests.framework_runs import autogen
from tests.framework_runs.common import install_global_provider

drive = autogen.drive


def setup() -> None:
    install_global_provider()
    autogen.setup()
