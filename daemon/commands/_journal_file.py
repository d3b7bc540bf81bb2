"""Where a command that reads the journal finds it: the file given, or the one its config names."""

from __future__ import annotations

import argparse
from pathlib import Path


def journal_path(args: argparse.Namespace, default_config: Path) -> Path | str:
    """The journal file a reading command names (``args.journal``, else the ``journal.path`` of
    ``args.config`` or ``default_config``), or what is wrong with the command line or the config."""
    if args.journal is not None:
        if args.config is not None:
            return "give the journal file or --config, not both"
        return Path(args.journal)
    from daemon.service.config import load_config
    from daemon.service.configfile import ConfigError

    config = args.config if args.config is not None else default_config
    try:
        loaded = load_config(config, check_secrets=False, tls_dates=False)
    except ConfigError as exc:
        return f"the config cannot be used to find the journal: {exc}"
    except OSError as exc:
        return f"the config {config} cannot be read: {exc}"
    return Path(loaded.config.journal.path)
