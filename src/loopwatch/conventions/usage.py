"""The tokens a model call used, as its span reports them under each convention.

Input and output are read from the first of these attributes set to a whole number >= 0:

- input: ``gen_ai.usage.input_tokens`` (GenAI), ``gen_ai.usage.prompt_tokens`` (OpenLLMetry),
  ``llm.token_count.prompt`` (OpenInference);
- output: ``gen_ai.usage.output_tokens``, ``gen_ai.usage.completion_tokens``,
  ``llm.token_count.completion``;
- a total, only for a span that reports neither of those: ``llm.token_count.total``
  (OpenInference), ``llm.usage.total_tokens`` (OpenLLMetry), ``gen_ai.usage.total_tokens``.

A value that is no whole number (a bool, a negative or fractional number, a text that is not
digits) is not read; a span without any of them used 0 tokens as far as loopwatch knows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

INPUT_KEYS: Final = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
)
OUTPUT_KEYS: Final = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
)
TOTAL_KEYS: Final = ("llm.token_count.total", "llm.usage.total_tokens", "gen_ai.usage.total_tokens")
USAGE_KEYS: Final = (*INPUT_KEYS, *OUTPUT_KEYS, *TOTAL_KEYS)
# more than any model call uses: a larger value is taken for a mistake, not read
MAX_TOKENS: Final = 1 << 40


def _count(value: Any) -> int:
    """A whole number of tokens, or -1 for a value that is none."""
    if type(value) is int:
        return value if 0 <= value <= MAX_TOKENS else -1
    if type(value) is float:
        return int(value) if value.is_integer() and 0 <= value <= MAX_TOKENS else -1
    if type(value) is str and value.isdigit() and len(value) <= 13:
        return int(value)
    return -1


def _first(attrs: Mapping[str, Any], keys: tuple[str, ...]) -> int:
    for key in keys:
        value = attrs.get(key)
        if value is not None:
            n = _count(value)
            if n >= 0:
                return n
    return -1


def token_usage(attrs: Mapping[str, Any]) -> tuple[int, int, int]:
    """``(input, output, unsplit)``: unsplit is a total, counted only when the span reports
    neither input nor output (0 each when not reported)."""
    got_input = _first(attrs, INPUT_KEYS)
    got_output = _first(attrs, OUTPUT_KEYS)
    if got_input < 0 and got_output < 0:
        return 0, 0, max(0, _first(attrs, TOTAL_KEYS))
    return max(0, got_input), max(0, got_output), 0
