"""Who may send which command: the one table of command roles.

Every engine action (:data:`daemon.engine.commands.ACTIONS`) belongs to exactly one role
(``tests/mqtt/test_keyring.py`` checks it). A named command key
(``broker.signing.command_keys``) holds one role and may send only that role's actions; any
other action is refused with the code ``forbidden``. The legacy single ``command_key`` holds
every role.

- ``game_server``: the round flow the game server drives (a new shoe, the Super 98 die, the
  betting window: ``open_betting``/``close_betting``), and ``resend`` (a gap fill: not an
  engine action, the publisher serves it).
- ``supervisor``: corrections and voids: what changes a recorded result or closes an alert; and
  ``cut_card`` (it decides which round is the shoe's last: seen on the floor, not by a device), and
  ``dealer_changed`` (who deals from the next round: the pit's record of its dealers), and
  ``attest`` (re-check the installed files; the only way to end ``integrity_failed``).
- ``technician``: the reader itself: lock/unlock and closing a rescan-needed alert.
"""

from __future__ import annotations

from enum import Enum


class Role(Enum):
    """The role a command key is issued for."""

    GAME_SERVER = "game_server"
    SUPERVISOR = "supervisor"
    TECHNICIAN = "technician"


ROLE_ACTIONS: dict[Role, frozenset[str]] = {
    Role.GAME_SERVER: frozenset(
        {"new_shoe", "super_round_die", "open_betting", "close_betting", "reveal", "resend"}
    ),
    Role.SUPERVISOR: frozenset(
        {
            "void_round",
            "void_shoe",
            "assign_card",
            "move_card",
            "swap",
            "rearrange",
            "acknowledge_alert",
            "resolve_hold",
            "cut_card",
            "dealer_changed",
            "attest",
            "remainder_count",
        }
    ),
    Role.TECHNICIAN: frozenset({"lock", "unlock", "rescan_ack"}),
}
"""The actions each role may send; every engine action is in exactly one."""

PUBLISHER_ACTIONS: frozenset[str] = frozenset({"resend"})
"""Actions the publisher serves itself, not the engine: ``resend`` (publish a range of events
again for the game server, :mod:`daemon.mqtt.resend_command`)."""
