"""What the examples share: the scripted conversation of a support agent that loops, and
printing the loopwatch lines of /metrics that describe the loop."""

from __future__ import annotations

import urllib.request

import loopwatch
from loopwatch.demo.scenarios import SEARCH_QUERIES, TICKET_SUMMARIES

QUESTION = "Where is my refund for the boots I returned?"
ANSWER = "I have escalated your refund."
# the wording of the two incidents, as loopwatch's demo replays them
QUERIES = SEARCH_QUERIES[:3]
SUMMARIES = TICKET_SUMMARIES[:6]
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
