"""LiteLLM's own OpenTelemetry callback (``litellm.callbacks = ["otel"]``): its
``litellm_request`` spans carry the GenAI conventions' ``gen_ai.input.messages`` /
``gen_ai.output.messages`` (read by conventions.genai), with two gaps filled here.

- The output message has ``"parts": []``: the calls the model asked for are only in
  ``gen_ai.completion.{i}.function_call.name`` / ``.arguments``, one pair per call, no id.
- An assistant message the loop appended as LiteLLM's own ``Message`` (as its docs do) is
  written to the next input as ``{"role": "assistant", "parts": []}``: its calls are lost, and
  only their results (``tool_call_id``, the text in ``parts``) remain. conventions.messages reads
  such a history as the Responses API's ``previous_response_id`` one: each result stands for a
  call the previous model call's output asked for.

Read from litellm 1.110.2 (litellm/integrations/opentelemetry.py, ``set_attributes`` and
``_tool_calls_kv_pair``) and its spans for a loop over ``openai/...`` models, unary and
streamed (the same attributes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

PREFIX: Final = "gen_ai.completion."
NAME: Final = ".function_call.name"
ARGUMENTS: Final = ".function_call.arguments"
# the attributes read for one model call (an output asks for at most this many calls)
MAX_CALLS: Final = 1024


def held_calls(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The ``gen_ai.completion.{i}.function_call.*`` attributes of a model call, in order (one
    lookup past the last)."""
    held: dict[str, Any] = {}
    for index in range(MAX_CALLS):
        name_key = f"{PREFIX}{index}{NAME}"
        name = attrs.get(name_key)
        if name is None:
            break
        held[name_key] = name
        arguments_key = f"{PREFIX}{index}{ARGUMENTS}"
        held[arguments_key] = attrs.get(arguments_key)
    return held


def output_calls(held: Mapping[str, Any]) -> list[tuple[str | None, str, Any]]:
    """The calls ``held_calls`` kept, as a message's ``(call id, tool, arguments)`` (no id)."""
    calls: list[tuple[str | None, str, Any]] = []
    for index in range(MAX_CALLS):
        name = held.get(f"{PREFIX}{index}{NAME}")
        if name is None:
            break
        calls.append((None, str(name), held.get(f"{PREFIX}{index}{ARGUMENTS}")))
    return calls
