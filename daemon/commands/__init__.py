"""Subcommands of ``baccarat-edge``: one module each, discovered by ``daemon.cli``.

A module here defines ``register(subparsers: argparse._SubParsersAction) -> None``,
which adds one subparser and sets ``handler=`` via ``set_defaults``.
"""
