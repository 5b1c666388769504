"""The pure core: no OpenTelemetry, no Prometheus. Spans in as plain data, turn summaries out."""
