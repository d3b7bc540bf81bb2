"""``make deb`` on a fresh Debian 12 root: build, one-command install, check, remove, purge.

The package is built by the same script as ``make deb`` (systemd/build-deb.sh), installed with
``apt-get install ./baccarat-edge_<version>_<arch>.deb`` into a minimal bookworm root made by
debootstrap (apt resolves its Depends there: Debian's python3.11, systemd, ...), and checked
from inside that root: the installed program, ``check-config`` as the daemon's user against a
real broker and a real TCP reader, ``systemd-analyze verify`` of the installed unit, then
``remove`` and ``purge``. See debian_root.py for the caches that keep it to a few minutes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from tests.packaging.debian_root import (
    cache_dir,
    keep_apt_archives,
    require_tools,
    root_argv,
    run_in_root,
    unpack_root,
)
from tests.support.broker import MosquittoBroker

REPO = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
TOOLS = ("dpkg-buildpackage", "dh", "lintian", "debootstrap", "unshare", "chroot", "tar", "flock")
USER = "baccarat-edge"


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package, built by systemd/build-deb.sh as ``make deb`` does, without its lintian step."""
    require_tools(*TOOLS)
    assert os.geteuid() == 0, "the package test needs root (debootstrap, chroot)"
    out = tmp_path_factory.mktemp("deb")
    built = subprocess.run(
        ["bash", str(REPO / "systemd/build-deb.sh")],
        env={
            **os.environ,
            "DEB_OUT": str(out),
            "LINTIAN": "0",
            "WHEELS_OFFLINE_FIRST": "1",
            "WHEELHOUSE": str(cache_dir() / "wheelhouse"),
        },
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert built.returncode == 0, f"build-deb.sh failed:\n{built.stdout[-4000:]}\n{built.stderr[-4000:]}"
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True)
    path = out / f"baccarat-edge_{VERSION}_{arch.stdout.strip()}.deb"
    assert path.is_file(), f"{path} not built; build-deb.sh printed: {built.stdout[-500:]}"
    assert built.stdout.strip().splitlines()[-1] == str(path)
    return path


def test_every_lintian_override_says_why() -> None:
    """``make deb`` fails on any lintian error or warning not overridden (lintian takes minutes
    on the venv's 9,000 files, so it runs there and not in the suite); each block of overrides
    must follow the comment that gives its reason."""
    explained = False
    lines = (REPO / "systemd/debian/baccarat-edge.lintian-overrides").read_text().splitlines()
    assert any(line and not line.startswith("#") for line in lines)
    for line in lines:
        if line.startswith("#"):
            explained = True
        elif not line.strip():
            explained = False
        else:
            assert explained, f"lintian override without a reason above it: {line}"
            assert line.split()[0].replace("-", "").isalnum(), f"not a lintian tag: {line}"


def test_package_metadata_names_debians_interpreter_and_the_conffiles(deb: Path) -> None:
    fields = {
        name: subprocess.run(
            ["dpkg-deb", "--field", str(deb), name], capture_output=True, text=True, check=True
        ).stdout.strip()
        for name in ("Package", "Version", "Depends")
    }
    assert fields["Package"] == "baccarat-edge"
    assert fields["Version"] == VERSION
    python = os.path.basename(os.path.realpath("/usr/bin/python3"))
    depends = [d.strip().split()[0] for d in fields["Depends"].split(",")]
    assert python in depends
    assert {"systemd", "procps", "libusb-1.0-0"} <= set(depends)
    control = subprocess.run(["dpkg-deb", "--ctrl-tarfile", str(deb)], capture_output=True, check=True)
    listing = subprocess.run(["tar", "-xOf", "-", "./conffiles"], input=control.stdout, capture_output=True)
    assert listing.stdout.decode().split() == [
        "/etc/baccarat-edge/table.example.yaml",
        "/etc/udev/rules.d/99-baccarat-edge.rules",
    ]


@pytest.fixture
def tcp_reader() -> Iterator[int]:
    """A listening TCP port the config's ``socket://`` reader can reach."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        yield server.getsockname()[1]


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    output = f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    assert result.returncode == 0, f"exit {result.returncode}\n{output}"
    return result.stdout


def _table_config(broker_port: int, reader_port: int) -> str:
    return (
        "table_id: T07\n"
        "state_dir: /var/lib/baccarat-edge\n"
        "readers:\n"
        f"  - driver: angel_eye\n    settings: {{url: 'socket://127.0.0.1:{reader_port}'}}\n"
        "broker:\n"
        f"  host: 127.0.0.1\n  port: {broker_port}\n  tls: {{enabled: false}}\n"
        "  signing:\n    events_key: {file: /etc/baccarat-edge/secrets/events.key}\n"
    )


def _daemon_goes_online_and_offline(root: Path, broker_port: int) -> list[str]:
    """Run the installed daemon with the unit's command line and user; the status it publishes."""
    statuses: list[str] = []
    changed = threading.Condition()

    def on_message(_client: mqtt.Client, _userdata: object, message: mqtt.MQTTMessage) -> None:
        with changed:
            statuses.append(json.loads(message.payload)["status"])
            changed.notify_all()

    client = mqtt.Client(CallbackAPIVersion.VERSION2)
    client.on_message = on_message
    client.connect("127.0.0.1", broker_port)
    client.subscribe("baccarat/v1/T07/status", qos=1)
    client.loop_start()
    argv = ["/opt/baccarat-edge/venv/bin/baccarat-edge", "run", "--config", "/etc/baccarat-edge/table.yaml"]
    daemon = subprocess.Popen(
        root_argv(root, argv, user=USER, own_pids=False),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        with changed:
            online = changed.wait_for(lambda: "online" in statuses or daemon.poll() is not None, 60)
        still_running = daemon.poll() is None
        daemon.terminate()
        log, _ = daemon.communicate(timeout=60)
        assert online, f"the daemon published no status within 60 s:\n{log[-4000:]}"
        assert still_running, f"the daemon exited by itself:\n{log[-4000:]}"
        assert daemon.returncode == 0, log[-4000:]
        with changed:
            changed.wait_for(lambda: statuses[-1:] == ["offline"], 30)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.communicate(timeout=30)
        client.loop_stop()
        client.disconnect()
    return statuses


@pytest.fixture
def debian12_root(tmp_path: Path) -> Iterator[Path]:
    """A fresh minbase bookworm root, deleted afterwards (about 600 MB once installed)."""
    root = unpack_root(tmp_path / "root")
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.mosquitto
def test_fresh_debian12_root_installs_checks_removes_and_purges(
    deb: Path, debian12_root: Path, mosquitto: MosquittoBroker, tcp_reader: int
) -> None:
    root = debian12_root
    (root / "tmp" / deb.name).write_bytes(deb.read_bytes())

    # The one command of the install guide.
    installed = run_in_root(root, ["apt-get", "install", "-y", "--no-install-recommends", f"/tmp/{deb.name}"])
    keep_apt_archives(root)
    out = _ok(installed)
    assert "baccarat-edge: not enabled. Next: write /etc/baccarat-edge/table.yaml" in out
    (root / "tmp" / deb.name).unlink()

    # The program runs on Debian's interpreter, as the daemon's user.
    version = _ok(run_in_root(root, ["baccarat-edge", "--version"], user=USER))
    assert version.strip() == f"baccarat-edge {VERSION}"
    python = _ok(run_in_root(root, ["readlink", "-f", "/opt/baccarat-edge/venv/bin/python"])).strip()
    assert re.fullmatch(r"/usr/bin/python3\.\d+", python)
    assert "python3" in _ok(run_in_root(root, ["dpkg-query", "-S", python]))
    assert any((root / "opt/baccarat-edge/venv/lib").rglob("__pycache__/*.pyc")), "postinst did not compile"

    # User, groups and directories from sysusers and tmpfiles; nothing enabled or started.
    groups = _ok(run_in_root(root, ["id", "-nG", USER])).split()
    assert {USER, "dialout", "plugdev", "video"} <= set(groups)
    uid, gid = (int(v) for v in _ok(run_in_root(root, ["sh", "-c", f"id -u {USER}; id -g {USER}"])).split())
    for path, owner, mode in (
        ("etc/baccarat-edge", 0, 0o750),
        ("etc/baccarat-edge/secrets", 0, 0o750),
        ("var/lib/baccarat-edge", uid, 0o750),
    ):
        st = (root / path).stat()
        assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (owner, gid, mode), path
    assert (root / "lib/systemd/system/baccarat-edge.service").is_file()
    assert (root / "etc/udev/rules.d/99-baccarat-edge.rules").is_file()
    assert (root / "etc/baccarat-edge/table.example.yaml").is_file()
    assert not list((root / "etc/systemd/system").rglob("baccarat-edge*")), "the unit must not be enabled"

    # The installed unit, checked by the root's own systemd (252 on Debian 12).
    verified = run_in_root(root, ["systemd-analyze", "verify", "/lib/systemd/system/baccarat-edge.service"])
    assert (verified.returncode, verified.stdout, verified.stderr) == (0, "", "")

    # The technician's steps: the config, a secret, check-config as the daemon's user.
    (root / "etc/baccarat-edge/table.yaml").write_text(_table_config(mosquitto.port, tcp_reader))
    secret = _ok(
        run_in_root(
            root,
            [
                "sh",
                "-c",
                "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' | "
                f"install -m 0640 -g {USER} /dev/stdin /etc/baccarat-edge/secrets/events.key",
            ],
        )
    )
    assert secret == ""
    checked = run_in_root(
        root,
        ["baccarat-edge", "check-config", "--allow-insecure", "/etc/baccarat-edge/table.yaml"],
        user=USER,
        timeout=120,
    )
    report = _ok(checked)
    assert "/etc/baccarat-edge/table.yaml: valid — table T07" in report
    assert "everything it points at was found" in report

    # And the daemon runs from the install as the unit runs it: online on the broker, then a
    # clean stop on SIGTERM that publishes offline.
    statuses = _daemon_goes_online_and_offline(root, mosquitto.port)
    assert (statuses[:1], statuses[-1:]) == (["online"], ["offline"]), statuses

    # Remove: the program goes, the table's config and journal directory stay.
    listed = _ok(run_in_root(root, ["dpkg-query", "-L", "baccarat-edge"])).splitlines()
    _ok(run_in_root(root, ["apt-get", "remove", "-y", "baccarat-edge"]))
    assert not (root / "opt/baccarat-edge").exists()
    assert not (root / "usr/bin/baccarat-edge").exists()
    assert not (root / "lib/systemd/system/baccarat-edge.service").exists()
    assert (root / "etc/baccarat-edge/table.yaml").is_file()
    assert (root / "etc/baccarat-edge/secrets/events.key").is_file()
    assert (root / "var/lib/baccarat-edge").is_dir()

    # Purge: nothing of the package is left: no file named after it, none owned by its user.
    _ok(run_in_root(root, ["apt-get", "purge", "-y", "baccarat-edge"]))
    status = run_in_root(root, ["dpkg-query", "-W", "-f", "${db:Status-Status}", "baccarat-edge"])
    assert status.returncode != 0 or status.stdout == "not-installed", status.stdout
    owned_or_named = ["(", "-name", "*baccarat*", "-o", "-uid", str(uid), "-o", "-gid", str(gid), ")"]
    leftovers = _ok(
        run_in_root(
            root,
            ["find", "/", "-xdev", *owned_or_named],
        )
    )
    assert leftovers == "", leftovers
    for path in listed:
        if path != "/." and (root / path.lstrip("/")).exists():
            assert (root / path.lstrip("/")).is_dir(), f"{path} left after purge"
            holder = run_in_root(root, ["dpkg-query", "-S", path])
            assert holder.returncode == 0, f"{path} left after purge and owned by no other package"
