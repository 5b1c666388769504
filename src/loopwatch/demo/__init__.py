"""Simulated agents emitting real OpenTelemetry spans: the demo and the tests' known answers."""
