"""Agent-framework scenarios run in a process of their own (``python -m tests.framework_runs``)."""
