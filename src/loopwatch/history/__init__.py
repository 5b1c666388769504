"""Stored traces through the service's pipeline: ``loopwatch replay`` and ``loopwatch compare``."""
