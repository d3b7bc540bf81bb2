"""``baccarat-edge run --config FILE``: the daemon itself (what the systemd unit starts)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_CONFIG = 78
"""EX_CONFIG: the unit's RestartPreventExitStatus= keeps systemd from looping on a bad file."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run the daemon for one table (readers, engine, journal, publisher)",
        description="Run the daemon. SIGTERM stops it cleanly; SIGHUP re-reads the config file.",
    )
    parser.add_argument("--config", type=Path, required=True, help="the table's YAML config file")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import structlog

    from daemon.journal.errors import JournalError
    from daemon.mqtt.secrets import SecretError
    from daemon.service.config import load_config
    from daemon.service.configfile import ConfigError
    from daemon.service.logging import configure_logging
    from daemon.service.runner import Daemon, install_signal_handlers
    from daemon.service.sdnotify import SystemdNotifier

    try:
        # a certificate outside its dates is watched at runtime (daemon/mqtt/tls_dates.py):
        # a clock wrong at boot must not keep the table down for good
        loaded = load_config(args.config, tls_dates=False)
    except ConfigError as exc:
        print(f"baccarat-edge: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    configure_logging(loaded.config.log.level, loaded.config.log.format)
    log = structlog.get_logger("baccarat_edge")
    notifier = SystemdNotifier()
    daemon = Daemon(loaded, notifier=notifier, config_path=args.config)
    install_signal_handlers(daemon)
    try:
        daemon.start()
    except SecretError as exc:
        # a secret named in the config is missing or empty: a config problem, not a crash
        log.error("start_failed", error=str(exc), hint="baccarat-edge check-config shows every secret")
        daemon.stop()
        return EXIT_CONFIG
    except JournalError as exc:
        # a damaged or foreign journal: a restart cannot mend it (the message says what will)
        log.error("start_failed", error=str(exc), hint="baccarat-edge journal verify FILE")
        daemon.stop()
        return EXIT_CONFIG
    except Exception as exc:
        log.exception("start_failed", error=str(exc))
        daemon.stop()
        return 1
    try:
        daemon.run_until_stopped()
    except Exception as exc:
        log.exception("daemon_failed", error=str(exc))
        daemon.stop()
        return 1
    daemon.stop()
    return 0
