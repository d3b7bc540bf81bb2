"""``baccarat-edge console``: the pit console web application (daemon/console/README.md).

``--config FILE`` serves the console until SIGINT/SIGTERM; ``--hash-password`` reads a
password from standard input and prints its hash line for the user file; ``--demo`` runs the
demo table (simulated shoe, embedded broker) with a console on it.
"""

from __future__ import annotations

import argparse
import getpass
import signal
import sys
import threading
from pathlib import Path


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "console",
        help="serve the pit console (floor, table views, holds and alerts, dealer display)",
        description="Serves the pit console web application from the tables' MQTT topics.",
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--config", type=Path, help="the console's settings file (console.yaml)")
    mode.add_argument(
        "--hash-password",
        action="store_true",
        help="read a password from standard input, print its hash for the user file",
    )
    mode.add_argument("--demo", action="store_true", help="a demo table and a console on it (no hardware)")
    parser.add_argument("--port", type=int, default=8080, help="--demo: the console's port (default 8080)")
    parser.add_argument("--speed", type=float, default=5.0, help="--demo: dealer speed (default x5)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.hash_password:
        return _hash_password()
    if args.demo:
        from daemon.console.demo import run_demo

        return run_demo(port=args.port, speed=args.speed)
    return _serve(args.config)


def _hash_password() -> int:
    from daemon.console.passwords import hash_password

    if sys.stdin.isatty():
        first = getpass.getpass("Password: ")
        if getpass.getpass("Again: ") != first:
            print("console: the two passwords differ", file=sys.stderr)
            return 2
    else:
        first = sys.stdin.readline().rstrip("\r\n")
    try:
        print(hash_password(first))
    except ValueError as exc:
        print(f"console: {exc}", file=sys.stderr)
        return 2
    return 0


def _serve(config: Path) -> int:
    from daemon.console.server import ConsoleApp
    from daemon.console.settings import load_settings
    from daemon.mqtt.secrets import SecretError
    from daemon.service.configfile import ConfigError
    from daemon.service.logging import configure_logging

    try:
        settings = load_settings(config)
        app = ConsoleApp(settings)
    except (ConfigError, SecretError) as exc:
        print(f"console: {exc}", file=sys.stderr)
        return 2
    configure_logging("info", "json")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def reload_users(*_args: object) -> None:
        try:
            app.reload_users()
        except (ConfigError, SecretError) as exc:  # the old user file stays in force
            app.log.error("console_users_reload_failed", error=str(exc))
        else:
            app.log.info("console_users_reloaded", users=len(app.users.users))

    signal.signal(signal.SIGHUP, reload_users)
    try:
        app.start()
    except OSError as exc:
        print(
            f"console: cannot serve on {settings.listen.host}:{settings.listen.port}: {exc}", file=sys.stderr
        )
        return 2
    print(f"console: serving {app.url}", file=sys.stderr)
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        app.stop()
    return 0
