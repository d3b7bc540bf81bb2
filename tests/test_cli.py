"""The command-line entry point discovers every subcommand module."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

from daemon import commands
from daemon.cli import build_parser, main


def test_every_command_module_registers_a_subcommand() -> None:
    parser = build_parser()
    names = {m.name for m in pkgutil.iter_modules(commands.__path__) if not m.name.startswith("_")}
    sub_action = next(a for a in parser._actions if a.dest == "command")
    registered = set(sub_action.choices or {})
    for module in names:
        assert module.replace("_", "-") in registered or module in registered, module


def test_no_command_prints_help_and_exits_2(capsys) -> None:
    assert main([]) == 2
    assert "baccarat-edge" in capsys.readouterr().out


def test_help_does_not_import_heavy_device_libraries() -> None:
    code = (
        "import sys; from daemon.cli import build_parser; build_parser(); "
        "print(','.join(m for m in ('cv2', 'usb', 'paho') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
