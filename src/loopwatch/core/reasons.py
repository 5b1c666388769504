"""Why spans are dropped (``loopwatch_spans_dropped_total{reason}``) and why turns are evicted
(``loopwatch_turns_evicted_total{reason}``): every reason here, so the metrics can show each one at
0 from the start."""

from __future__ import annotations

from typing import Final

DROP_TURN_FULL: Final = "turn_full"
DROP_ERROR: Final = "error"
DROP_QUEUE_FULL: Final = "queue_full"  # in process: the span queue was full
DROP_INVALID_ID: Final = "invalid_id"  # the service: an OTLP span without a valid trace or span id
DROP_MEMORY: Final = "memory"  # held spans of a trace evicted by the byte budget that made no turn
DROP_REASONS: Final = (DROP_QUEUE_FULL, DROP_TURN_FULL, DROP_ERROR, DROP_INVALID_ID, DROP_MEMORY)
EVICT_IDLE: Final = "idle"
EVICT_CAPACITY: Final = "capacity"
EVICT_MEMORY: Final = "memory"
EVICT_SHUTDOWN: Final = "shutdown"
EVICT_REASONS: Final = (EVICT_IDLE, EVICT_CAPACITY, EVICT_MEMORY, EVICT_SHUTDOWN)
