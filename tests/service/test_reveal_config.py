"""A squeeze table whose reveals could never come is a config error naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.service.config import CONFIG_DIR, load_config
from daemon.service.configfile import ConfigError, format_key_path

EXAMPLE = (CONFIG_DIR / "table.example.yaml").read_text()


def squeeze_config(tmp_path: Path, order_source: str, readers: str | None = None) -> Path:
    text = EXAMPLE.replace("    mode: open ", "    mode: squeeze ").replace(
        "    order_source: server ", f"    order_source: {order_source} "
    )
    if readers is not None:
        start = text.index("\nreaders:\n")
        end = text.index("\n\n", start + 1)
        text = text[:start] + "\nreaders:\n" + readers + text[end:]
    path = tmp_path / "table.yaml"
    path.write_text(text)
    return path


def test_the_example_dealt_squeeze_by_the_game_server_loads(tmp_path: Path) -> None:
    config = load_config(squeeze_config(tmp_path, "server"), environ={}, check_secrets=False)
    assert config.config.table.reveal.mode == "squeeze"


def test_a_button_no_reader_sends_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(squeeze_config(tmp_path, "button"), environ={}, check_secrets=False)
    problems = {format_key_path(p.path): p.message for p in info.value.problems}
    assert "reveal_button" in problems["table.reveal.order_source"]


def test_a_line_readers_reveal_button_is_a_source(tmp_path: Path) -> None:
    readers = (
        "  - driver: ascii_lines\n"
        "    settings:\n"
        "      url: /dev/baccarat-shoe\n"
        "      device_name: reader\n"
        "      protocol: {signals: {reveal_button: [SQUEEZE]}}\n"
    )
    config = load_config(squeeze_config(tmp_path, "button", readers), environ={}, check_secrets=False)
    assert config.config.table.reveal.order_source == "button"
