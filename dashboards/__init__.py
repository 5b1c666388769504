"""Dashboard source for loopwatch (run ``python -m dashboards.build`` from the repository root)."""
