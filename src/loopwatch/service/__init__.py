"""``loopwatch serve``: receive OTLP traces (gRPC and HTTP) and run the same core as the
in-process processor."""
