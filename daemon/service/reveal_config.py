"""Config checks across sections for a squeeze table (``table.reveal.mode: squeeze``): reveals
that could never come (no key of the game server's role, no reader sending the configured button or
mark) are config errors, as a betting window that could never open is."""

from __future__ import annotations

from pydantic import BaseModel

from common.yamlfile import KeyPath
from daemon.engine.settings import RevealMode, RevealSource, TableSettings
from daemon.mqtt.roles import Role
from daemon.mqtt.settings import SigningSettings
from daemon.service.configfile import ConfigProblem, RawConfig

_SIGNAL_OF = {RevealSource.BUTTON: "reveal_button", RevealSource.READER_SIGNAL: "reveal_signal"}


def reveal_problems(
    raw: RawConfig, table: TableSettings, signing: SigningSettings, readers: list[BaseModel]
) -> list[ConfigProblem]:
    """What makes this squeeze table's reveals impossible, each naming its key and line."""
    reveal = table.reveal
    if reveal.mode is not RevealMode.SQUEEZE:
        return []
    path: KeyPath = ("table", "reveal", "order_source")
    where, line = raw.describe(path)
    if reveal.order_source is RevealSource.SERVER:
        server_key = signing.command_key is not None or any(
            k.role is Role.GAME_SERVER for k in signing.command_keys
        )
        if server_key:
            return []
        text = (
            "the game server reveals the cards, but no command key holds the game_server role "
            "(broker.signing.command_keys, or the legacy command_key): no reveal could be accepted"
        )
        return [ConfigProblem(where, path, text, line)]
    signal = _SIGNAL_OF[reveal.order_source]
    if any(_sends(reader, signal) for reader in readers):
        return []
    text = (
        f"reveals come from a {reveal.order_source}, but no reader sends one: configure "
        f"signals.{signal} (a line or typed code) or signal_keys.{signal} on a reader"
    )
    return [ConfigProblem(where, path, text, line)]


def _sends(reader: BaseModel, signal: str) -> bool:
    protocol = getattr(reader, "protocol", None)
    signals = getattr(protocol, "signals", None)
    if signals is not None and bool(getattr(signals, signal)):
        return True
    keys = getattr(protocol, "signal_keys", None) or {}
    return any(str(name) == signal for name in keys)
