"""Hostile text costs linear time: every pattern the package compiles, and the read path's parsers.

Costs are ratios to a linear pass over the same input (a regular expression that visits each
character once), measured at two sizes: a pattern that backtracks quadratically shows as a ratio
that grows with the input. No wall-clock bound."""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import loopwatch
from loopwatch.conventions import error_texts
from loopwatch.conventions.payloads import decode_arguments, decode_result, parse_text
from loopwatch.conventions.read import read_span
from loopwatch.core.config import Config
from loopwatch.core.outcomes import MAX_EXAMINED_CHARS, classify_error
from loopwatch.core.records import LlmMark
from loopwatch.core.span_view import STATUS_ERROR, EventView, SpanView

SMALL = 4_000  # characters; measured again at 4 x SMALL, where quadratic shows as x4
MAX_GROWTH = 2.0  # ratio at 4 x SMALL over ratio at SMALL: ~1 when linear, ~4 when quadratic
MAX_RATIO = 3000.0  # a pattern's cost in linear passes: ~250 for 8 alternations, IGNORECASE
_LINEAR = re.compile(r"[^\x00]*")  # one pass: each character visited once, in the same engine


def _package_modules() -> Iterator[Any]:
    for info in pkgutil.walk_packages(loopwatch.__path__, "loopwatch."):
        yield importlib.import_module(info.name)


def _patterns_in(value: Any, depth: int = 0) -> Iterator[re.Pattern[str]]:
    if isinstance(value, re.Pattern):
        yield value
    elif depth < 3 and isinstance(value, tuple | list):
        for item in value:
            yield from _patterns_in(item, depth + 1)
    elif depth < 3 and isinstance(value, dict):
        for item in value.values():
            yield from _patterns_in(item, depth + 1)


def compiled_patterns() -> dict[str, re.Pattern[str]]:
    """Every pattern object held by a loopwatch module (module constants, tuples of them)."""
    found: dict[int, tuple[str, re.Pattern[str]]] = {}
    for module in _package_modules():
        for name, value in vars(module).items():
            for i, pattern in enumerate(_patterns_in(value)):
                found.setdefault(id(pattern), (f"{module.__name__}.{name}[{i}]", pattern))
    return dict(found.values())


# The one call that compiles a pattern the user wrote (a ``result = "re:..."`` declaration):
# not the package's to prove linear; it runs on at most 64 KiB of a result.
USER_PATTERN = "# the user's pattern: their own cost"


def _re_calls() -> list[str]:
    """Every call of the ``re`` module in the package source, as ``file:line re.fn`` (but the
    one marked USER_PATTERN)."""
    calls = []
    root = Path(loopwatch.__file__).parent
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "re":
                calls.append(f"{path.name}:{node.lineno} from re import")
            if isinstance(node, ast.Import):
                calls.extend(
                    f"{path.name}:{node.lineno} import re as {a.asname}"
                    for a in node.names
                    if a.name == "re" and a.asname
                )
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "re"
                and USER_PATTERN not in lines[node.lineno - 1]
            ):
                calls.append(f"{path.name}:{node.lineno} re.{node.func.attr}")
    return calls


@pytest.mark.slow
def test_every_regular_expression_is_a_module_constant_the_suite_finds() -> None:
    calls = _re_calls()
    # a pattern built inside a function (re.search("...", text)) escapes the test below
    assert all(c.endswith(" re.compile") for c in calls), calls
    assert len(compiled_patterns()) == len(calls) >= 10


# Adversarial inputs are built from the pattern itself: its literal words, and one character
# of each class it repeats, pumped after each word (the shape of "Error running tool tool ...").
_CLASS_SAMPLES = (" ", "a", "1", ".", ":", "'", "{", "}", "\t", "_", "-", "(", "\n", "é")


def _words(pattern: re.Pattern[str]) -> list[str]:
    source = re.sub(r"\\[a-zA-Z]|\[[^\]]*\]|\(\?[:>=!<]*|[()|*+?{}^$]", "|", pattern.pattern)
    return sorted({w for w in source.replace("\\", "").split("|") if w.strip()})


def _candidates(pattern: re.Pattern[str]) -> list[Callable[[int], str]]:
    units = [*_words(pattern), *_CLASS_SAMPLES]
    out: list[Callable[[int], str]] = []
    for unit in units:
        out.append(_repeated(unit))
        for head in _words(pattern):
            out.append(_headed(head, unit))
            out.append(_headed_bang(head, unit))
    return out


def _repeated(u: str) -> Callable[[int], str]:
    return lambda n: (u * (n // len(u) + 1))[:n]


def _headed(h: str, u: str) -> Callable[[int], str]:
    return lambda n: h + (u * (n // len(u) + 1))[: n - len(h)]


def _headed_bang(h: str, u: str) -> Callable[[int], str]:
    return lambda n: h + ((u + "!") * n)[: n - len(h)]


# Thread CPU time, not wall time: on a shared machine a preempted thread's clock stops.
_clock = time.thread_time


def _repeats(fn: Callable[[str], object], text: str) -> int:
    """How many calls of ``fn`` take ~2 ms."""
    start = _clock()
    fn(text)
    return max(1, int(0.002 / max(_clock() - start, 1e-6)))


def _once(fn: Callable[[str], object], text: str) -> float:
    """One call's cost over one linear pass's: a quick screen, not a measurement."""
    start = time.perf_counter()
    fn(text)
    middle = time.perf_counter()
    _LINEAR.match(text)
    return (middle - start) / max(time.perf_counter() - middle, 1e-7)


def _ratio(fn: Callable[[str], object], text: str, rounds: int = 3) -> float:
    """Cost of ``fn`` over the cost of one linear pass over the same text: the least of
    ``rounds`` samples of each (noise only adds), the two taking turns so that a slow moment of
    the machine does not fall on one of them only."""
    repeats = (_repeats(fn, text), _repeats(_LINEAR.match, text))
    best = [float("inf"), float("inf")]
    for _ in range(rounds):
        calls: tuple[Callable[[str], object], ...] = (fn, _LINEAR.match)
        for i, call in enumerate(calls):
            start = _clock()
            for _ in range(repeats[i]):
                call(text)
            best[i] = min(best[i], (_clock() - start) / repeats[i])
    return max(best[0], 1e-9) / max(best[1], 1e-9)


def _growth(
    fn: Callable[[str], object], make: Callable[[int], str], small: int = SMALL
) -> tuple[float, float]:
    """(ratio at 4 x small, ratio at 4 x small / ratio at small), each the least of up to three
    measurements: the machine is shared, and noise only ever adds time."""
    ratio = growth = float("inf")
    for _ in range(3):
        at_small, at_large = _ratio(fn, make(small)), _ratio(fn, make(4 * small))
        ratio, growth = min(ratio, at_large), min(growth, at_large / at_small)
        if growth <= MAX_GROWTH and ratio <= MAX_RATIO:
            break
    return ratio, growth


def test_every_compiled_pattern_is_linear_on_adversarial_input() -> None:
    report = []
    for name, pattern in compiled_patterns().items():
        # search tries every start: it costs at least what match does, so it is the bound
        search = pattern.search
        candidates = _candidates(pattern)
        # screen every candidate once at the small size; the worst few are measured properly
        screened = sorted(candidates, key=lambda make: _once(search, make(SMALL)), reverse=True)
        for make in screened[:3]:
            ratio, growth = _growth(search, make)
            report.append((name, make(40)[:40], round(ratio, 1), round(growth, 2)))
            assert ratio <= MAX_RATIO and growth <= MAX_GROWTH, report[-1]
    print(*report, sep="\n")  # the figures, for pytest -s


def test_the_reported_status_message_is_linear() -> None:
    """The span of the report: a tool span whose status says "Error running tool tool ..."."""

    def tool_span(description: str) -> SpanView:
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}
        return SpanView(
            1,
            2,
            1,
            "execute_tool t",
            0,
            1,
            attrs,
            status_code=STATUS_ERROR,
            status_description=description,
        )

    config = Config()
    ratio, growth = _growth(
        lambda text: read_span(tool_span(text), config),
        lambda n: "Error running " + "tool " * (n // 5),
        MAX_EXAMINED_CHARS // 4,  # below the cap, which would otherwise hide the growth
    )
    assert growth <= MAX_GROWTH and ratio <= 10 * MAX_RATIO, (ratio, growth)


_TEXTS: dict[str, Callable[[int], str]] = {
    "agents error": lambda n: "Error running tool (non-fatal): {" + "'a': 1, " * (n // 8) + "}",
    "tools": lambda n: "Error running " + "tool " * (n // 5),
    "colons": lambda n: "Error running tool" + ": {" * (n // 3),
    "braces": lambda n: "Error running tool: {" + "} " * (n // 2),
    "json list": lambda n: "[" + "1," * (n // 2) + "1]",
    "literal list": lambda n: "[" + "1," * (n // 2) + "1",
    "literal dict": lambda n: "{" + "'a':1," * (n // 6) + "}",
    "nesting": lambda n: "[" * n,
    "quotes": lambda n: "'" * n,
    "error words": lambda n: "Error: " + "TimeoutError" * (n // 12),
    "spaces": lambda n: "Error: " + " " * n,
    "numbers": lambda n: "9" * n,
}


def _read_path(text: str) -> object:
    return (
        parse_text(text),
        decode_arguments(text),
        decode_result(text),
        classify_error([text], [text]),
        error_texts.openai_agents_error_text(text),
        error_texts.error_type_in_text(text),
        error_texts.framework_error_result(text),
        read_span(
            SpanView(
                1,
                2,
                1,
                "execute_tool t",
                0,
                1,
                {
                    "gen_ai.tool.name": "t",
                    "gen_ai.tool.call.arguments": text,
                    "gen_ai.tool.call.result": text,
                    "error.type": text,
                },
                (EventView("exception", {"exception.message": text}),),
                STATUS_ERROR,
                text,
            ),
            Config(),
        ),
    )


@pytest.mark.slow
def test_the_read_path_is_linear_on_adversarial_text() -> None:
    report = []
    for name, make in _TEXTS.items():
        # below the examined-text cap, so that what is examined is measured
        ratio, growth = _growth(_read_path, make, MAX_EXAMINED_CHARS // 4)
        report.append((name, round(ratio, 1), round(growth, 2)))
        assert growth <= MAX_GROWTH, report[-1]
    print(*report, sep="\n")


def test_past_the_cap_a_message_costs_no_more() -> None:
    """A megabyte message is examined only up to MAX_EXAMINED_CHARS."""
    short = "x" * MAX_EXAMINED_CHARS
    huge = "x" * (64 * MAX_EXAMINED_CHARS)

    def classify(text: str) -> object:
        return classify_error([], [text])

    # the linear pass over the huge text is 64 times the short one's; classifying is not
    assert _ratio(classify, huge) * 8 < _ratio(classify, short)


def _history(n: int) -> str:
    """A hand-rolled turn's history of about ``n`` characters: calls and their results, with
    repeated and missing call ids among them."""
    user: dict[str, object] = {"role": "user", "parts": [{"type": "text", "content": "hi"}]}
    messages: list[dict[str, object]] = [user]
    size, i = 0, 0
    while size < n:
        call_id = f"c{i % 7}" if i % 3 else ""  # repeats, and none at all
        call = {"type": "tool_call", "id": call_id, "name": "t", "arguments": {"q": i}}
        result = {"type": "tool_call_response", "id": call_id, "response": []}
        messages += [{"role": "assistant", "parts": [call]}, {"role": "tool", "parts": [result]}]
        size += 160
        i += 1
    return json.dumps(messages)


def _history_without_calls(n: int) -> str:
    """LiteLLM's callback's history: each assistant message recorded without its calls
    (``"parts": []``), each result a tool message's text with an OpenAI ``tool_call_id``."""
    user: dict[str, object] = {"role": "user", "parts": [{"type": "text", "content": "hi"}]}
    messages: list[dict[str, object]] = [user]
    for i in range(n // 120):
        result = {"role": "tool", "parts": [{"type": "text", "content": "[]"}]}
        messages += [{"role": "assistant", "parts": []}, {**result, "tool_call_id": f"c{i % 7}"}]
    return json.dumps(messages)


def _results_alone(n: int) -> str:
    """The Responses API's input with ``previous_response_id``: results only, no user message
    and no call (ids repeated and missing among them)."""
    results = [
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": f"c{i % 7}" if i % 3 else ""}],
        }
        for i in range(n // 80)
    ]
    return json.dumps(results)


def _flat_history(n: int) -> str:
    """OpenInference's flattened history (``llm.input_messages.N.message.*``, as for
    google-genai and the Responses API): calls without ids and their results, as JSON."""
    attrs: dict[str, object] = {
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "hi",
    }
    for i in range(1, n // 200):
        prefix = f"llm.input_messages.{2 * i - 1}.message."
        attrs[prefix + "role"] = "assistant"
        attrs[prefix + "tool_calls.0.tool_call.function.name"] = "t"
        attrs[prefix + "tool_calls.0.tool_call.function.arguments"] = json.dumps({"q": i})
        attrs[f"llm.input_messages.{2 * i}.message.role"] = "tool"
        attrs[f"llm.input_messages.{2 * i}.message.content"] = "[]"
    return json.dumps(attrs)


def _read_history(text: str) -> object:
    attrs: dict[str, object] = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": text}
    return _read(attrs)


def _read_flat(text: str) -> object:
    return _read({"openinference.span.kind": "LLM", **json.loads(text)})


def _read(attrs: dict[str, object]) -> tuple[object, object]:
    mark = read_span(SpanView(1, 2, None, "chat", 0, 1, attrs), Config())
    assert isinstance(mark, LlmMark) and mark.messages is not None
    conversation = mark.messages.read()  # (read when the turn is rebuilt from messages)
    assert conversation is not None
    return conversation.calls(()), conversation.dangling


HISTORIES: dict[str, tuple[Callable[[int], str], Callable[[str], object]]] = {
    "genai": (_history, _read_history),
    "litellm-calls-lost": (_history_without_calls, _read_history),
    "responses-results-alone": (_results_alone, _read_history),
    "openinference-flat": (_flat_history, _read_flat),
}


@pytest.mark.parametrize("shape", list(HISTORIES))
def test_a_model_calls_history_is_read_in_linear_time(shape: str) -> None:
    make, read = HISTORIES[shape]
    ratio, growth = _growth(read, make, 100_000)
    assert growth <= MAX_GROWTH, (ratio, growth)


def _answer(n: int) -> str:
    """A model call's answer of about ``n`` characters: calls without ids or with one id each
    used twice (each is given an id of its own)."""
    calls = [
        {"type": "tool_call", "id": f"c{i // 2}" if i % 3 else "", "name": "t", "arguments": {}}
        for i in range(n // 80)
    ]
    return json.dumps([{"role": "assistant", "parts": calls}])


def _read_answer(text: str) -> object:
    user = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}])
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": user}
    attrs["gen_ai.output.messages"] = text
    mark = read_span(SpanView(1, 2, None, "chat", 0, 1, attrs), Config())
    assert isinstance(mark, LlmMark) and mark.messages is not None
    conversation = mark.messages.read()
    assert conversation is not None
    return conversation.calls(())


def _litellm_answer(n: int) -> str:
    """LiteLLM's callback's answer: ``"parts": []``, the calls in
    ``gen_ai.completion.{i}.function_call.*`` (no id), as JSON."""
    attrs: dict[str, object] = {
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": []}])
    }
    for i in range(n // 100):
        attrs[f"gen_ai.completion.{i}.function_call.name"] = "t"
        attrs[f"gen_ai.completion.{i}.function_call.arguments"] = json.dumps({"q": i})
    return json.dumps(attrs)


def _read_litellm_answer(text: str) -> object:
    user = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}])
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": user, **json.loads(text)}
    calls, _dangling = _read(attrs)
    assert isinstance(calls, tuple) and len(calls) == min(len(attrs) // 2 - 1, 1024)
    return calls


def test_a_model_calls_answer_is_read_in_linear_time() -> None:
    ratio, growth = _growth(_read_answer, _answer, 100_000)
    assert growth <= MAX_GROWTH, (ratio, growth)


def test_litellm_callbacks_answer_is_read_in_linear_time() -> None:
    """(at most 1024 calls are read from one answer: measured below that)"""
    ratio, growth = _growth(_read_litellm_answer, _litellm_answer, 25_000)
    assert growth <= MAX_GROWTH, (ratio, growth)


def _request(spans: str) -> str:
    return '{"resourceSpans":[{"scopeSpans":[{"spans":[' + spans + "]}]}]}"


def _span(fields: str = "") -> str:
    return '{"traceId":"' + "ab" * 16 + '","spanId":"' + "cd" * 8 + '"' + fields + "}"


def _nested(levels: int) -> str:
    return '{"arrayValue":{"values":[' * levels + '{"intValue":"1"}' + "]}}" * levels


_OTLP_JSON: dict[str, Callable[[int], str]] = {
    "one key, many times": lambda n: _request(
        _span(
            ',"attributes":['
            + ",".join(['{"key":"k","value":{"stringValue":"v"}}'] * (n // 40))
            + "]"
        )
    ),
    "many kinds of value": lambda n: _request(
        _span(
            ',"attributes":['
            + ",".join(['{"key":"k","value":{"doubleValue":"NaN","boolValue":null}}'] * (n // 60))
            + "]"
        )
    ),
    "values nested near the limit": lambda n: _request(
        _span(
            ',"attributes":['
            + ",".join(['{"key":"k","value":' + _nested(40) + "}"] * (n // 1200))
            + "]"
        )
    ),
    "spans under protobuf's names": lambda n: _request(
        ",".join(['{"trace_id":"' + "ab" * 16 + '","span_id":"' + "cd" * 8 + '"}'] * (n // 70))
    ),
    "a long integer": lambda n: _request(_span(',"startTimeUnixNano":"' + "9" * n + '"')),
    "a long odd id": lambda n: _request('{"traceId":"' + "a" * (n | 1) + '"}'),
    "a long base64 value": lambda n: _request(
        _span(',"attributes":[{"key":"k","value":{"bytesValue":"' + "QUJD" * (n // 4) + '"}}]')
    ),
}


def _decode_json(text: str) -> object:
    from loopwatch.service.otlp import RequestError
    from loopwatch.service.otlp_json import decode

    try:
        return decode(text.encode())
    except RequestError as e:
        return e


def test_otlp_json_decoding_is_linear_on_hostile_requests() -> None:
    """The service's and replay's OTLP/JSON decoder: requests built to cost more per byte as
    they grow (one key over and over, values of several kinds, nesting near the limit, every
    span under protobuf's field names, an integer, id or bytes value of the whole size)."""
    report = []
    for name, make in _OTLP_JSON.items():
        ratio, growth = _growth(_decode_json, make, 25_000)
        report.append((name, round(ratio, 1), round(growth, 2)))
        assert growth <= MAX_GROWTH, report[-1]
    print(*report, sep="\n")
