"""``loopwatch serve``: the command line around :class:`loopwatch.service.app.Service`."""

from __future__ import annotations

import argparse
import gc
import logging
import resource
import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from loopwatch.core.config import Config, ConfigError, config_file, load_config
from loopwatch.core.log_names import PackageFormatter
from loopwatch.core.words import counted

if TYPE_CHECKING:
    from loopwatch.service.app import Addresses, Service

log = logging.getLogger(__name__)

# The service owns its process, so the cyclic garbage collector is set for its load: what was
# loaded at start is frozen (never traversed again), and young objects are collected every
# 50,000 allocations rather than 700. Span views and records are freed by reference counting
# anyway, and the default thresholds spend a large share of the service's CPU on collector
# passes. Python's 5 ms GIL switch interval is kept: a shorter one costs more CPU a span and
# answers an exporter no sooner (both measured: benchmarks/README.md).
GC_THRESHOLDS = (50_000, 20, 20)
STOP_SECONDS = 10.0  # SIGTERM to exit, at most (Kubernetes gives 30 by default)
EXIT_CONFIG = 2
EXIT_START = 1
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# file descriptors beyond the HTTP connection cap: gRPC connections, scrapes, files
SPARE_FILES = 256


def raise_open_files(needed: int) -> int:
    """Raise the soft limit on open files to the hard one (many systems default to 1,024,
    under the connection cap); warn when even the hard limit is below ``needed``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (OSError, ValueError):
            pass
    if soft != resource.RLIM_INFINITY and soft < needed:
        log.warning(
            "open-file limit %d is below the %d the connection caps need (ulimit -n)", soft, needed
        )
    return soft


def tune_collector() -> None:
    """Freeze what is loaded and collect young objects less often (GC_THRESHOLDS)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def log_level(value: str) -> str:
    """``--log-level``'s value in upper case; argparse's error echoes it as given."""
    if value.upper() not in LOG_LEVELS:
        levels = ", ".join(LOG_LEVELS)
        raise argparse.ArgumentTypeError(f"{value!r} is not a log level; choose from {levels}")
    return value.upper()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", metavar="PATH", help="loopwatch.toml (default: $LOOPWATCH_CONFIG, ./)"
    )
    parser.add_argument(
        "--grpc-address",
        metavar="HOST:PORT",
        help=f"OTLP/gRPC listen address (default {Config.grpc_address}, [serve] grpc)",
    )
    parser.add_argument(
        "--http-address",
        metavar="HOST:PORT",
        help=f"OTLP/HTTP listen address (default {Config.http_address}, [serve] http)",
    )
    parser.add_argument(
        "--metrics-address",
        metavar="HOST:PORT",
        help=f"/metrics, /healthz, /readyz (default {Config.metrics_host}:{Config.metrics_port})",
    )
    parser.add_argument(
        "--export-otlp",
        metavar="URL",
        help="send a loopwatch.loop span per loop to this OTLP/gRPC endpoint, e.g. "
        "http://collector:4317 ([serve] export_otlp)",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=log_level,
        metavar="LEVEL",
        help=f"{', '.join(LOG_LEVELS)}, in any case (default INFO)",
    )
    parser.add_argument(
        "--summary-seconds",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="log spans, turns and loops received this often while spans arrive (default 60)",
    )


def _fail(message: str, code: int) -> int:
    print(f"loopwatch serve: {message}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    handler = logging.StreamHandler()
    handler.setFormatter(PackageFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=args.log_level, handlers=[handler])
    try:
        from prometheus_client import REGISTRY

        from loopwatch.service.addresses import BindError
        from loopwatch.service.app import Service
    except ImportError as e:
        return _fail(f"{e}; install the serve extra: pip install 'loopwatch[serve]'", EXIT_START)
    if args.summary_seconds <= 0:
        return _fail("--summary-seconds must be positive", EXIT_CONFIG)
    try:
        file, config, addresses = _load(args)
    except ConfigError as e:
        return _fail(str(e), EXIT_CONFIG)

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    raise_open_files(config.max_connections + SPARE_FILES)
    # tornado logs each malformed request and timed-out connection at INFO: a hostile client
    # would write the log; they are answered (docs/service.md) and visible at DEBUG
    if args.log_level != "DEBUG":
        logging.getLogger("tornado").setLevel(logging.WARNING)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # the process collectors of the default registry give RSS and CPU for free
    service = Service(config, addresses, registry=REGISTRY)
    try:
        bound = service.start()
    except BindError as e:
        return _fail(str(e), EXIT_START)
    tune_collector()
    log.info(
        "config: %s (%s)",
        file.resolve() if file is not None else "none, defaults",
        counted(len(config.tools), "tool declaration"),
    )
    log.info(
        "listening: otlp-grpc=%s otlp-http=%s metrics=%s (grace %.1fs, idle %.0fs)",
        bound.grpc,
        bound.http,
        bound.metrics,
        config.grace_seconds,
        config.idle_timeout_seconds,
    )
    if service.loop_export is not None:
        log.info("loop spans: to %s", service.loop_export.endpoint)
    return _serve_until(stop, service, args.summary_seconds)


def _load(args: argparse.Namespace) -> tuple[Path | None, Config, Addresses]:
    """The config file (None: defaults), the config, and the addresses the flags and the config
    give, each address checked; ConfigError names what is wrong."""
    from loopwatch.service.addresses import join_address, split_address
    from loopwatch.service.app import Addresses

    file = config_file(args.config)
    config = load_config(args.config)
    if getattr(args, "export_otlp", None):
        config = replace(config, export_otlp=args.export_otlp)
    metrics_default = join_address(config.metrics_host, config.metrics_port)
    addresses = Addresses(
        grpc=args.grpc_address or config.grpc_address,
        http=args.http_address or config.http_address,
        metrics=args.metrics_address or metrics_default,
    )
    split_address(addresses.grpc, "--grpc-address")
    split_address(addresses.http, "--http-address")
    split_address(addresses.metrics, "--metrics-address")
    return file, config, addresses


def _serve_until(stop: threading.Event, service: Service, summary_seconds: float) -> int:
    """Log what arrived every ``summary_seconds`` until ``stop`` is set, then stop the service
    (open turns finalized within STOP_SECONDS); the exit code."""
    from loopwatch.service.activity import Activity

    activity = Activity(service.metrics)
    while not stop.wait(summary_seconds):
        line = activity.line()
        if line is not None:
            log.info("%s", line)
    log.info("stopping: finalizing open turns")
    if not service.stop(timeout=STOP_SECONDS):
        log.error("open turns not finalized within %.0fs", STOP_SECONDS)
        return EXIT_START
    assert service.pipeline is not None
    rooted, rootless = service.pipeline.finished_at_stop
    finalized = counted(rooted + rootless, "open trace")
    log.info("stopped: finalized %s (%d without their root)", finalized, rootless)
    return 0
