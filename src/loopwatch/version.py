"""The package version, in one place (pyproject.toml reads it too)."""

VERSION = "0.1.0"
