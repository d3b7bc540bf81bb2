"""Log format choice and secret redaction."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from daemon.service.logging import choose_format, configure_logging, reset_logging


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    yield
    reset_logging()


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_format_choice() -> None:
    assert choose_format("auto", _Tty(), {}) == "console"
    assert choose_format("auto", _Tty(), {"JOURNAL_STREAM": "8:1234"}) == "json"
    assert choose_format("auto", io.StringIO(), {}) == "json"
    assert choose_format("console", io.StringIO(), {"JOURNAL_STREAM": "8:1"}) == "console"


def test_json_lines_under_systemd_with_secrets_masked() -> None:
    out = _Tty()
    assert configure_logging("info", "auto", stream=out, environ={"JOURNAL_STREAM": "8:1"}) == "json"
    log = structlog.get_logger("test")
    log.info("card_accepted", event_id="e-1", seq=7, broker_password="hunter2")
    log.debug("not shown at info")
    logging.getLogger("paho").warning("connection lost")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines[0]["event"] == "card_accepted"
    assert lines[0]["event_id"] == "e-1"
    assert lines[0]["seq"] == 7
    assert lines[0]["broker_password"] == "***"
    assert lines[0]["level"] == "info"
    assert "timestamp" in lines[0]
    assert lines[1]["event"] == "connection lost"
    assert lines[1]["logger"] == "paho"
    assert len(lines) == 2
    assert "hunter2" not in out.getvalue()


def test_console_on_a_terminal() -> None:
    out = _Tty()
    assert configure_logging("debug", "auto", stream=out, environ={}) == "console"
    structlog.get_logger("test").info("reader_connected", device="/dev/baccarat-shoe")
    text = out.getvalue()
    assert "reader_connected" in text
    assert "/dev/baccarat-shoe" in text
    assert not text.lstrip().startswith("{")
