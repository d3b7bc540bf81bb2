"""structlog setup: JSON lines under systemd or when piped, readable console on a terminal.

journald captures stdout; one JSON object per line keeps every field (``event_id``,
``seq``, ``kind``...) searchable with ``journalctl -o cat | jq``. Any field whose
name looks like a secret is replaced by ``"***"`` before rendering, so a mistake
elsewhere cannot leak a password or HMAC key into the logs.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any, Literal, TextIO

import structlog

LogFormat = Literal["auto", "json", "console"]

_SECRET_MARKERS = ("password", "secret", "token", "hmac_key", "private_key", "passphrase")


def choose_format(
    requested: LogFormat, stream: TextIO, environ: Mapping[str, str]
) -> Literal["json", "console"]:
    """``auto``: JSON under systemd (``JOURNAL_STREAM`` set) or when not a TTY, else console."""
    if requested != "auto":
        return requested
    if environ.get("JOURNAL_STREAM"):
        return "json"
    isatty = getattr(stream, "isatty", None)
    return "console" if callable(isatty) and isatty() else "json"


def redact_secrets(
    _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: mask values of keys that name a secret."""
    for key in list(event_dict):
        lowered = key.lower()
        if any(marker in lowered for marker in _SECRET_MARKERS):
            event_dict[key] = "***"
    return event_dict


def configure_logging(
    level: str = "info",
    fmt: LogFormat = "auto",
    stream: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> Literal["json", "console"]:
    """Configure structlog (and the stdlib root logger paho/amqtt use); returns the format chosen."""
    out = stream if stream is not None else sys.stdout
    env = os.environ if environ is None else environ
    chosen = choose_format(fmt, out, env)
    numeric_level = logging.getLevelName(level.upper())
    if not isinstance(numeric_level, int):
        raise ValueError(f"unknown log level {level!r} (expected debug, info, warning, error)")
    renderer: Any
    if chosen == "json":
        renderer = structlog.processors.JSONRenderer(sort_keys=False)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=True)
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact_secrets,
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
        renderer,
    ]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(numeric_level),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    _route_stdlib_logging(numeric_level, out)
    return chosen


class _StructlogHandler(logging.Handler):
    """Sends stdlib records (paho, amqtt) through structlog so the output stays one format."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            log = structlog.get_logger(record.name)
            log.log(record.levelno, record.getMessage(), logger=record.name)
        except Exception:  # a log line must never take the daemon down
            self.handleError(record)


def _route_stdlib_logging(level: int, _out: TextIO) -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _StructlogHandler):
            root.removeHandler(handler)
    root.addHandler(_StructlogHandler())
    # Third-party libraries are chatty at info; keep them at warning unless debugging.
    root.setLevel(level if level <= logging.DEBUG else logging.WARNING)


def reset_logging() -> None:
    """Undo :func:`configure_logging` (tests, and the demo before it prints its summary)."""
    structlog.reset_defaults()
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _StructlogHandler):
            root.removeHandler(handler)
    root.setLevel(logging.WARNING)
