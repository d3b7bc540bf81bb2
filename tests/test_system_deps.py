""".ci/system-deps: what each lane needs, installed as root, the apt-get line for anyone else.

The script runs for real under bash with a PATH holding only fakes: ``id`` says who runs it,
``dpkg-query`` which Debian packages are installed, ``apt-get`` records its arguments (nothing
is installed), and the commands a lane looks for are present or not. ``SYSTEM_DEPS_ROOT``
points the absolute paths it checks (chromium, chromedriver, /usr/sbin/mosquitto) at a
temporary folder.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / ".ci" / "system-deps"
BASH = shutil.which("bash") or "/bin/bash"
EVERYTHING = (
    "mosquitto openssl nodejs npm systemd prometheus chromium chromium-driver "
    "debhelper lintian debootstrap python3-venv"
)
COMMANDS = ("openssl", "npm", "systemd-analyze", "promtool")
FILES = ("usr/sbin/mosquitto", "usr/bin/chromium", "usr/bin/chromedriver")


@dataclass
class Machine:
    """A fake machine: a bin folder (the whole PATH) and a root for absolute paths."""

    base: Path

    @property
    def bin(self) -> Path:
        return self.base / "bin"

    @property
    def root(self) -> Path:
        return self.base / "root"

    @property
    def apt_log(self) -> Path:
        return self.base / "apt-get.log"

    def script(self, name: str, body: str) -> None:
        path = self.bin / name
        path.write_text(f"#!{BASH}\n{body}\n")
        path.chmod(0o755)

    def user(self, uid: int) -> None:
        self.script("id", f'[ "$1" = -u ] && echo {uid}')

    def installed_debs(self, *packages: str) -> None:
        cases = " | ".join(packages) or "__none__"
        # prints the status field dpkg-query -W -f '${db:Status-Status}' prints; exit 1 when unknown
        self.script("dpkg-query", f'case "${{!#}}" in {cases}) printf installed ;; *) exit 1 ;; esac')

    def commands(self, *names: str) -> None:
        for name in names:
            self.script(name, "exit 0")

    def files(self, *paths: str) -> None:
        for relative in paths:
            path = self.root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"#!{BASH}\n")
            path.chmod(0o755)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [BASH, str(SCRIPT), *args],
            env={"PATH": str(self.bin), "SYSTEM_DEPS_ROOT": str(self.root), "LC_ALL": "C"},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    def apt_calls(self) -> list[str]:
        return self.apt_log.read_text().splitlines() if self.apt_log.exists() else []


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    """Nothing installed; ``grep`` (the script needs it) and a recording ``apt-get``."""
    m = Machine(tmp_path)
    m.bin.mkdir()
    m.root.mkdir()
    grep = shutil.which("grep")
    assert grep is not None
    (m.bin / "grep").symlink_to(grep)
    m.script("apt-get", f'echo "$*" >> {m.apt_log}')
    m.installed_debs()
    return m


def test_a_user_without_root_gets_the_apt_get_line_and_nothing_is_installed(machine: Machine) -> None:
    machine.user(1000)
    done = machine.run("test")
    assert done.returncode == 1
    assert f"    sudo apt-get install -y -q --no-install-recommends {EVERYTHING}\n" in done.stderr
    assert f"not installed: {EVERYTHING}\n" in done.stderr
    assert done.stdout == ""
    assert machine.apt_calls() == []


def test_root_installs_exactly_what_is_missing(machine: Machine) -> None:
    machine.user(0)
    machine.commands("openssl", "npm")
    machine.files("usr/sbin/mosquitto")
    machine.installed_debs("lintian", "debootstrap")
    done = machine.run("test")
    assert done.returncode == 0, done.stderr
    missing = "systemd prometheus chromium chromium-driver debhelper python3-venv"
    assert done.stdout == f"installing system packages: {missing}\n"
    assert machine.apt_calls() == ["update -q", f"install -y -q --no-install-recommends {missing}"]


@pytest.mark.parametrize("uid", [0, 1000])
def test_nothing_missing_is_silent_for_anyone(machine: Machine, uid: int) -> None:
    machine.user(uid)
    machine.commands(*COMMANDS)
    machine.files(*FILES)
    machine.installed_debs("debhelper", "lintian", "debootstrap", "python3-venv")
    done = machine.run("test")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert machine.apt_calls() == []


def test_the_fast_lane_needs_no_browser_and_no_packaging_tools(machine: Machine) -> None:
    machine.user(1000)
    machine.commands(*COMMANDS)
    machine.files("usr/sbin/mosquitto")
    assert machine.run("fast").returncode == 0
    machine.commands("openssl", "npm", "systemd-analyze")
    (machine.bin / "promtool").unlink()
    done = machine.run("fast")
    assert done.returncode == 1
    assert "    sudo apt-get install -y -q --no-install-recommends prometheus\n" in done.stderr


def test_the_deb_lane_needs_the_packaging_tools_only(machine: Machine) -> None:
    machine.user(1000)
    machine.installed_debs("lintian")
    done = machine.run("deb")
    assert done.returncode == 1
    assert "    sudo apt-get install -y -q --no-install-recommends debhelper python3-venv\n" in done.stderr
    assert "chromium" not in done.stderr


def test_an_unknown_lane_is_refused(machine: Machine) -> None:
    machine.user(0)
    done = machine.run("tests")
    assert done.returncode == 2
    assert "unknown lane 'tests'" in done.stderr
    assert machine.apt_calls() == []
