"""What the examples share: the scripted conversation of a support agent that loops, and
printing the loopwatch lines of /metrics that describe the loop."""

from __future__ import annotations

import urllib.request

import loopwatch

QUESTION = "Where is my refund for the boots I returned?"
ANSWER = "I have escalated your refund."
QUERIES = ("boots refund", "boots return refund status", "refund for returned boots")
SUMMARIES = (
    "Customer has not received refund for returned boots",
    "Refund not received for returned boots - customer following up",
    "Missing refund on order 88214 (returned boots), customer awaiting resolution",
    "Follow-up: refund for returned boots still outstanding",
    "Returned boots, refund pending, customer asking again",
    "Boots returned weeks ago and refund never arrived",
)
# (tool, arguments) the scripted model calls, one per step: three reworded searches that find
# nothing, then six reworded tickets that time out
SCRIPT = [("search_orders", {"query": q}) for q in QUERIES] + [
    ("create_ticket", {"customer_id": "c_40912", "order_id": "88214", "summary": s})
    for s in SUMMARIES
]
TIMEOUT = "ticket service did not answer within 30 s"

SHOWN = (
    "loopwatch_turns_total",
    "loopwatch_turn_max_attempts_sum",
    "loopwatch_turn_max_attempts_count",
    "loopwatch_tool_calls_total",
    "loopwatch_repeat_calls_total",
    "loopwatch_loops_total",
    "loopwatch_no_rows_streak_sum",
)


def show_metrics(processor: loopwatch.LoopwatchSpanProcessor) -> None:
    """Wait until loopwatch has read every span, then print the lines of /metrics that matter."""
    processor.force_flush()
    config = processor.config
    url = f"http://{config.metrics_host}:{config.metrics_port}/metrics"
    body = urllib.request.urlopen(url, timeout=10).read().decode()
    print(f"\nloopwatch, from {url}:")
    for line in body.splitlines():
        if line.startswith(SHOWN):
            print("  " + line)
