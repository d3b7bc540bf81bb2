"""The ``baccarat-edge`` command line.

Each subcommand lives in its own module under ``daemon.commands`` and exposes
``register(subparsers)``; the module adds its parser and sets ``handler`` to a
function ``(args) -> int``. Heavy dependencies (OpenCV, pyusb, paho) are imported
inside the handlers, so ``baccarat-edge --help`` stays fast and works even when an
optional device library is broken.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from daemon import __version__, commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="baccarat-edge",
        description="Card-scanner edge daemon for live baccarat tables.",
    )
    parser.add_argument("--version", action="version", version=f"baccarat-edge {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        result: int = handler(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Output piped into `head` and closed early: not an error of ours.
        return 0
    return result


if __name__ == "__main__":
    sys.exit(main())
