"""Whether prometheus_client writes ``_created`` lines, so loopwatch's own collectors follow the
client's counters. The client keeps the switch in a private module global, with setters but no
public getter: it is read where it is a bool, else (renamed in some release) learned from what a
counter of the client's writes, with one warning."""

from __future__ import annotations

import logging
import os
import threading
from importlib import metadata

from prometheus_client import Counter
from prometheus_client import metrics as client_metrics

log = logging.getLogger(__name__)

_SWITCH = "_use_created"
_fallback_lock = threading.Lock()
_warned = False
_created_probe: Counter | None = None


def created_lines() -> bool:
    """Whether prometheus_client writes ``_created`` lines (its ``disable_created_metrics()``,
    ``enable_created_metrics()`` and ``PROMETHEUS_DISABLE_CREATED_SERIES``), so these families
    follow the client's own counters. Never raises: a scrape of the registry must not fail."""
    switch = getattr(client_metrics, _SWITCH, None)
    if type(switch) is bool:
        return switch
    return _created_by_probe()


def _created_by_probe() -> bool:
    """The switch as an unregistered counter of the client's shows it; failing that, as the
    client's documented environment variable sets it at start."""
    global _warned, _created_probe
    with _fallback_lock:
        if not _warned:
            _warned = True
            log.warning(
                "prometheus_client %s has no bool %s; whether to write _created "
                "lines is read from a probe counter instead (same exposition)",
                _client_version(),
                _SWITCH,
            )
        try:
            if _created_probe is None:
                _created_probe = Counter("loopwatch_created_probe", "Probe.", registry=None)
            samples = [s for metric in _created_probe.collect() for s in metric.samples]
            return any(s.name.endswith("_created") for s in samples)
        except Exception:
            setting = os.environ.get("PROMETHEUS_DISABLE_CREATED_SERIES", "False")
            return setting.lower() not in ("true", "1", "t")


def _client_version() -> str:
    try:
        return metadata.version("prometheus-client")
    except Exception:
        return "(version unknown)"
