"""Attaching loopwatch inside an agent's process: the span processor, the tracer provider, the
frameworks' instrumentation and loopwatch's own spans."""
