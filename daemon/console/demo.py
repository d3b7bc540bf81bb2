"""``baccarat-edge console --demo`` (``make demo-console``): the demo table with a console on it.

The demo's parts (embedded broker, simulated shoe on a pty, the production daemon) with a
keyring instead of the demo's single command key: the simulated game server signs
``new_shoe`` with its own key, and the console's demo people each sign with theirs. The
simulated dealer injects an unneeded card; the round it holds waits for a supervisor to
resolve it from the console. Passwords are made up at start and printed once.
"""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
import threading
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from daemon.console.passwords import hash_password
from daemon.console.server import ConsoleApp
from daemon.console.settings import ConsoleSettings
from daemon.mqtt.secrets import Secret
from daemon.mqtt.settings import CommandKeySettings
from daemon.mqtt.supervisor_commands import CommandSender
from daemon.mqtt.topics import TableTopics
from daemon.service.config import LoadedConfig
from daemon.service.demo import COMMAND_KEY_ENV, EVENTS_KEY_ENV, DemoOptions, demo_config
from daemon.service.demo_broker import EmbeddedBroker
from daemon.service.logging import configure_logging, reset_logging
from daemon.service.runner import Daemon
from daemon.simulation.dealer import DealSettings, FaultSpec, plan_shoe
from drivers.fixtures import FixtureStep, SupervisorStep
from drivers.pty_device import PtyDevice
from drivers.simulate import VirtualShoe, encode_plan

PEOPLE = (("supervisor", "supervisor", "sup-demo"), ("technician", "technician", "tech-demo"))
UNNEEDED_CARD_HAND = 3


def _key_file(directory: Path, name: str) -> Path:
    path = directory / f"{name}.key"
    path.write_text(secrets.token_hex(32) + "\n")
    path.chmod(0o600)
    return path


def _with_keyring(loaded: LoadedConfig, keys: dict[str, tuple[str, Path]]) -> LoadedConfig:
    command_keys = [
        CommandKeySettings.model_validate({"key_id": key_id, "role": role, "secret": {"file": str(path)}})
        for key_id, (role, path) in keys.items()
    ]
    cfg = loaded.config
    # a tuple, as the field is declared: model_copy does not validate, and a list here made
    # every later dump print a pydantic serializer warning
    signing = cfg.broker.signing.model_copy(update={"command_keys": tuple(command_keys), "command_key": None})
    broker = cfg.broker.model_copy(update={"signing": signing})
    return LoadedConfig(
        cfg.model_copy(update={"broker": broker}),
        loaded.reader_settings,
        loaded.camera_settings,
        loaded.source,
        loaded.variant,
    )


def _users_file(directory: Path, keys: dict[str, tuple[str, Path]]) -> tuple[Path, dict[str, str]]:
    names = [name for name, _, _ in PEOPLE] + ["dealer"]
    passwords = {name: secrets.token_urlsafe(12) for name in names}
    lines = ["users:"]
    for name, role, key_id in PEOPLE:
        lines.append(
            f"  - {{name: {name}, password_hash: '{hash_password(passwords[name])}', role: {role}, "
            f"key_id: {key_id}, key_file: '{keys[key_id][1]}'}}"
        )
    lines.append(f"  - {{name: dealer, password_hash: '{hash_password(passwords['dealer'])}', role: viewer}}")
    path = directory / "console-users.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path, passwords


def run_demo(port: int, speed: float) -> int:
    """Serve the console on 127.0.0.1:``port`` beside a demo table until Ctrl-C."""
    with tempfile.TemporaryDirectory(prefix="baccarat-edge-console-demo-") as tmp_name:
        tmp = Path(tmp_name)
        os.environ.setdefault(EVENTS_KEY_ENV, secrets.token_hex(32))
        os.environ.setdefault(COMMAND_KEY_ENV, secrets.token_hex(32))
        keys = {"gs-demo": ("game_server", _key_file(tmp, "gs-demo"))}
        keys |= {key_id: (role, _key_file(tmp, key_id)) for _, role, key_id in PEOPLE}
        seed = secrets.randbelow(1_000_000)
        deal = DealSettings(decks=8, seed=seed, shoe_id=f"demo-{seed}")
        plan = plan_shoe(deal, [FaultSpec.parse(f"unneeded_card@{UNNEEDED_CARD_HAND}")])
        steps = encode_plan(plan, "angel_eye", seed=seed)
        users_path, passwords = _users_file(tmp, keys)
        log_path = tmp / "daemon.log"
        with EmbeddedBroker() as broker, open(log_path, "a", encoding="utf-8") as log_stream:
            configure_logging("info", "json", stream=log_stream)
            shoe = PtyDevice(tmp / "baccarat-shoe")
            options = DemoOptions(speed=speed)
            loaded = _with_keyring(
                demo_config(tmp, shoe.path, broker.port, options, deal.table_settings()), keys
            )
            daemon = Daemon(loaded)
            settings = ConsoleSettings.model_validate(
                {
                    "listen": {"host": "127.0.0.1", "port": port},
                    "broker": {"host": "127.0.0.1", "port": broker.port, "protocol": "mqtt311",
                               "tls": {"enabled": False}},
                    "users_file": str(users_path),
                    "verify": {"keys": [{"env": EVENTS_KEY_ENV}]},
                }
            )  # fmt: skip
            console = ConsoleApp(settings)
            daemon.start()
            console.start()
            try:
                _say(console, loaded.config.table_id, passwords, log_path)
                game_key = Secret(keys["gs-demo"][1].read_bytes().strip(), "demo")
                _deal(daemon, console, steps, shoe, speed, game_key)
                threading.Event().wait()
            except KeyboardInterrupt:
                pass
            finally:
                console.stop()
                daemon.stop()
                shoe.close()
                reset_logging()
    return 0


def _say(console: ConsoleApp, table_id: str, passwords: dict[str, str], log_path: Path) -> None:
    print(f"console demo: open {console.url}/table/{table_id} (floor: {console.url}/)", file=sys.stderr)
    for name, password in passwords.items():
        print(f"  log in as {name!r} with password {password!r}", file=sys.stderr)
    print(
        f"  {demo_story()} Daemon and console log: {log_path}. Ctrl-C ends the demo.",
        file=sys.stderr,
    )


def demo_story(hand: int = UNNEEDED_CARD_HAND) -> str:
    """What the demo's dealer does wrong, in the hands the table will show: the simulated
    fault ``unneeded_card@N`` draws the card after round N, so round N+1 is the one held."""
    return (
        f"the dealer draws an unneeded card after hand {hand}: round {hand + 1} is held "
        "until the supervisor resolves it from the table view."
    )


def _deal(
    daemon: Daemon,
    console: ConsoleApp,
    steps: list[FixtureStep],
    shoe: PtyDevice,
    speed: float,
    game_key: Secret,
) -> None:
    """Play the shoe in a thread; the game server's commands signed with its key, the
    supervisor's left to the person at the console."""
    table_id = daemon.loaded.config.table_id
    client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
    sender = CommandSender(client, table_id, game_key, key_id="gs-demo")
    topics = TableTopics(table_id)
    client.on_connect = lambda c, *_a: c.subscribe(topics.cmd_reply, qos=1)
    client.on_message = lambda _c, _u, m: sender.on_reply(bytes(m.payload))
    client.connect("127.0.0.1", console.settings.broker.effective_port)
    client.loop_start()
    daemon.publisher.subscribed.wait(15)
    readers = [d for d in daemon.drivers.values() if hasattr(d, "wait_until_connected")]

    def on_supervisor(step: SupervisorStep, _t: float) -> None:
        if step.action != "resolve_hold":
            sender.send(step.action, dict(step.args))

    def ready() -> bool:
        return all(bool(d.health().get("connected")) for d in readers)

    VirtualShoe(steps, shoe, speed=speed, on_supervisor=on_supervisor, ready=ready).start()
