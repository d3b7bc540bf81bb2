"""Checks across a configuration's devices and table settings (the game flow's betting
inputs), for ``config.load_config``.

Each check appends a :class:`ConfigProblem` naming the key to change: a camera the engine would
take for a reader (or a reader for a camera), and betting inputs (a dealer button, the shoe's
lock state) sent by a reader while the table takes its betting window from somewhere else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from common.yamlfile import KeyPath
from daemon.service.configfile import ConfigProblem, RawConfig

if TYPE_CHECKING:
    from daemon.service.config import DaemonConfig


def device_name(settings: BaseModel, default: str) -> str:
    """The name a device's inputs carry (``device_name`` of a reader, ``device`` of the camera)."""
    for attribute in ("device_name", "device"):
        name = getattr(settings, attribute, None)
        if isinstance(name, str) and name:
            return name
    return default


def check_camera_devices(
    raw: RawConfig,
    config: DaemonConfig,
    readers: list[BaseModel],
    camera: BaseModel | None,
    *,
    found: list[ConfigProblem],
) -> None:
    """``table.camera.devices`` names exactly the camera: a camera missing from it would count as a
    reader (its unplugging a reader failure, its reads never arbitrated), a reader in it would
    count as a camera (its unplugging no reader failure, disabling the camera's fallback)."""
    cameras = config.table.camera.devices
    where: KeyPath = ("table", "camera", "devices")
    if camera is not None:
        name = device_name(camera, "camera")
        if name not in cameras:
            source, line = raw.describe(("camera", "settings", "device"))
            found.append(
                ConfigProblem(
                    source,
                    ("camera", "settings", "device"),
                    f"the camera's device name {name!r} is not in table.camera.devices {list(cameras)}; "
                    "name it there too, or the engine takes the camera for a card reader",
                    line,
                )
            )
    for reader in readers:
        name = device_name(reader, "reader")
        if name in cameras:
            source, line = raw.describe(where)
            found.append(
                ConfigProblem(
                    source,
                    where,
                    f"reader {name!r} is named in table.camera.devices: the engine would take "
                    "it for a camera and never see it fail; rename the reader or the camera device",
                    line,
                )
            )


def _reader_index(raw: RawConfig, name: str) -> int | str:
    """The index in ``readers`` of the reader whose inputs carry ``name`` (for a problem's line)."""
    readers = raw.data.get("readers")
    for index, entry in enumerate(readers if isinstance(readers, list) else []):
        settings = entry.get("settings") if isinstance(entry, dict) else None
        named = settings.get("device_name", "reader") if isinstance(settings, dict) else "reader"
        if named == name:
            return index
    return "?"


def _betting_inputs_of(reader: BaseModel) -> tuple[str, str] | None:
    """``(source, setting)`` when a reader's settings make it send betting inputs."""
    protocol = getattr(reader, "protocol", None)
    if getattr(protocol, "lock_is_betting_window", False):
        return "shoe_lock", "lock_is_betting_window"
    signals = getattr(protocol, "signals", None)
    if signals is not None and (signals.betting_opened or signals.betting_closed):
        return "button", "signals"
    keys = getattr(protocol, "signal_keys", None) or {}
    if any(str(name) in ("betting_opened", "betting_closed") for name in keys):
        return "button", "signal_keys"
    return None


def check_betting_inputs(
    raw: RawConfig, config: DaemonConfig, readers: list[BaseModel], found: list[ConfigProblem]
) -> None:
    """A reader sends betting inputs (a dealer button, the shoe's lock state) exactly when the table
    takes its betting window from that source: otherwise every press would be refused with an
    alert, or the table would wait for a window no device opens."""
    table = config.table
    wanted = str(table.betting.source) if table.game_flow == "betting_window" else None
    senders: set[str] = set()
    for reader in readers:
        sends = _betting_inputs_of(reader)
        if sends is None:
            continue
        senders.add(sends[0])
        if sends[0] != wanted:
            name = device_name(reader, "reader")
            path: KeyPath = ("readers", _reader_index(raw, name), "settings", "protocol", sends[1])
            where, line = raw.describe(path)
            found.append(
                ConfigProblem(
                    where,
                    path,
                    f"reader {name!r} sends betting inputs from a {sends[0]} but the table takes its "
                    f"betting window from {wanted or 'nowhere (game_flow cards_only)'}: set "
                    f"table.betting.source: {sends[0]} (game_flow: betting_window) or remove the setting",
                    line,
                )
            )
    # Without any Angel Eye reader, game_flow_config already says no reader reports the lock state.
    lock_readers = any(hasattr(getattr(r, "protocol", None), "lock_is_betting_window") for r in readers)
    if wanted in ("button", "shoe_lock") and wanted not in senders and (wanted == "button" or lock_readers):
        setting = (
            "lock_is_betting_window: true on an angel_eye reader"
            if wanted == "shoe_lock"
            else ("signals.betting_closed (line or code) or signal_keys.betting_closed on a reader")
        )
        path = ("table", "betting", "source")
        where, line = raw.describe(path)
        found.append(
            ConfigProblem(
                where, path, f"betting source {wanted!r} but no reader sends it: configure {setting}", line
            )
        )
