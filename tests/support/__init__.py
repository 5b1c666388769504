"""Shared helpers of the test suite: plain modules, imported by test files (no test file imports
another)."""
