"""Config checks across sections for ``table.game_flow: betting_window``: a betting
window that could never open, or a shoe lock no reader can perform, is a config error."""

from __future__ import annotations

from collections.abc import Sequence

from common.inputs import GameFlowSource
from common.yamlfile import KeyPath
from daemon.engine.settings import GameFlow, TableSettings
from daemon.mqtt.roles import Role
from daemon.mqtt.settings import SigningSettings
from daemon.service.configfile import ConfigProblem, RawConfig

HOST_COMMAND_DRIVERS = frozenset({"angel_eye"})
"""Reader drivers that take host commands (lock/unlock) and report the shoe's lock state."""


def game_flow_problems(
    raw: RawConfig, table: TableSettings, signing: SigningSettings, drivers: Sequence[str]
) -> list[ConfigProblem]:
    """What makes this table's betting window unusable, each naming its key and line."""
    if table.game_flow is not GameFlow.BETTING_WINDOW:
        return []
    betting = table.betting
    found: list[ConfigProblem] = []

    def problem(key: str, text: str) -> None:
        path: KeyPath = ("table", "betting", key)
        source, line = raw.describe(path)
        found.append(ConfigProblem(source, path, text, line))

    server_key = signing.command_key is not None or any(
        k.role is Role.GAME_SERVER for k in signing.command_keys
    )
    if betting.source is GameFlowSource.SERVER and not server_key:
        problem(
            "source",
            "the betting window comes from the game server, but no command key holds the game_server role "
            "(broker.signing.command_keys, or the legacy command_key): open_betting could never be accepted",
        )
    commandable = bool(set(drivers) & HOST_COMMAND_DRIVERS)
    if betting.source is GameFlowSource.SHOE_LOCK and not commandable:
        problem(
            "source",
            "the betting window comes from the shoe's lock state, but no reader reports it (angel_eye)",
        )
    if betting.lock_shoe and not commandable:
        problem(
            "lock_shoe", "no configured reader takes a lock command (angel_eye): the shoe could never lock"
        )
    return found
