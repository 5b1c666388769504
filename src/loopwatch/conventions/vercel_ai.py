"""The Vercel AI SDK's own ``ai.*`` spans: the default telemetry of AI SDK 6
(``experimental_telemetry: {isEnabled: true, functionId}``) and AI SDK 7's
``LegacyOpenTelemetry`` integration (``@ai-sdk/otel``). AI SDK 7's ``OpenTelemetry`` integration
writes the GenAI conventions instead, read by conventions.genai.

Every span names what it is in ``ai.operationId``: ``ai.toolCall`` is a tool call
(``ai.toolCall.name``, ``ai.toolCall.id``, ``ai.toolCall.args``, ``ai.toolCall.result``; a
thrown error as status ERROR and an ``exception`` event); ``ai.generateText`` /
``ai.streamText`` / ``ai.generateObject`` / ``ai.streamObject`` is the turn (its agent the
``functionId``, in ``ai.telemetry.functionId``; its model ``ai.model.id``); their
``.doGenerate`` / ``.doStream`` spans are the model calls. Arguments and results are written only
with ``recordOutputs`` on (the default); without them the calls are read as calls without
arguments.

Seen from ai 6.0.325 and ai 7.0.173 with @ai-sdk/otel 1.0.173 (tests/fixtures/vercel_ai/);
ai 5.0 writes the same tool attributes. No version writes ``ai.toolCall.input`` or
``ai.toolCall.output``."""

from __future__ import annotations

from loopwatch.conventions.emitter import Emitter
from loopwatch.conventions.family import Family

OPERATION = "ai.operationId"
TOOL_CALL = "ai.toolCall"
# the calls a turn is made of; generateObject and streamObject take no tools, but are a user's
# request all the same
TURNS = ("ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject")
MODEL_CALLS = (
    "ai.generateText.doGenerate",
    "ai.streamText.doStream",
    "ai.generateObject.doGenerate",
    "ai.streamObject.doStream",
)

VERCEL_AI = Family(
    name="vercel_ai",
    tool=((OPERATION, TOOL_CALL),),
    turn=tuple((OPERATION, operation) for operation in TURNS),
    llm=tuple((OPERATION, operation) for operation in MODEL_CALLS),
    tool_name=("ai.toolCall.name",),
    arguments=("ai.toolCall.args",),
    result=("ai.toolCall.result",),
    agent=("ai.telemetry.functionId",),
    # the model-call spans carry both; the turn span only ai.model.id
    model=("ai.model.id", "gen_ai.request.model"),
)

EMITTER = Emitter(VERCEL_AI)
