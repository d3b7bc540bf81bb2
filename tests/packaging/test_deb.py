"""``make deb`` on a fresh Debian 12 root: build, the install guide followed as written to an
online table, remove, purge.

The package is built by the same script as ``make deb`` (systemd/build-deb.sh). In a minimal
bookworm root made by debootstrap, a technician's account with ``sudo`` runs the shell lines of
the install guide (systemd/README.md, read by guide.py) exactly as written: ``sudo apt install``
of the package (apt resolves its Depends there: Debian's python3.11, systemd, ...), the config
copied and edited with ``sudoedit``, the table's certificate, key, password and signing keys
installed from its own folder, ``check-config`` as the daemon's user against a real TLS broker
(client certificate and password) and a real TCP reader, ``systemctl enable``, then the daemon
as the unit starts it until it is ``online``, and the guide's ``monitor`` line showing it. The
lines a root without a booted systemd or without the hardware cannot run are listed with the
reason; any other line the guide gains is run, or breaks the test. Then ``systemd-analyze
verify`` of the installed unit, ``remove`` and ``purge``. See debian_root.py for the caches that
keep it to a few minutes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from paho.mqtt.enums import CallbackAPIVersion

from daemon.mqtt.secrets import Secret
from daemon.mqtt.supervisor_commands import CommandSender
from tests.packaging.debian_root import (
    cache_dir,
    keep_apt_archives,
    require_tools,
    root_argv,
    run_in_root,
    unpack_root,
)
from tests.packaging.guide import Step, install_steps
from tests.service.harness import dealt_shoe
from tests.support.broker import MosquittoBroker

REPO = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
TOOLS = (
    "dpkg-buildpackage",
    "dh",
    "lintian",
    "debootstrap",
    "unshare",
    "chroot",
    "tar",
    "flock",
    "openssl",
    "mosquitto_passwd",
)
USER = "baccarat-edge"
TECHNICIAN = "tech"
HOME = f"/home/{TECHNICIAN}"
PASSWORD = "T07-mqtt-login-" + secrets.token_hex(8)
# The guide's lines a root without a booted systemd cannot run, and why. Every other line runs.
NOT_IN_A_ROOT = {
    "systemctl status baccarat-edge": "no booted systemd in the root (the test starts the unit itself)",
    "journalctl -u baccarat-edge -f": "no booted systemd in the root (and it follows forever)",
}
HARDWARE_STEP = "Device names"  # needs the shoe and the camera plugged in: the reader here is TCP


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package, built by systemd/build-deb.sh as ``make deb`` does, without its lintian step."""
    require_tools(*TOOLS)
    assert os.geteuid() == 0, "the package test needs root (debootstrap, chroot)"
    out = tmp_path_factory.mktemp("deb")
    # A throw-away build key: the manifest of the installed files is signed with it.
    build_key = tmp_path_factory.mktemp("build-key") / "build.key"
    build_key.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    build_key.chmod(0o600)
    built = subprocess.run(
        ["bash", str(REPO / "systemd/build-deb.sh")],
        env={
            **os.environ,
            "DEB_OUT": str(out),
            "LINTIAN": "0",
            "WHEELS_OFFLINE_FIRST": "1",
            "WHEELHOUSE": str(cache_dir() / "wheelhouse"),
            "ATTESTATION_KEY_FILE": str(build_key),
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
    assert "PRIVATE KEY" not in built.stdout + built.stderr + (out / "build.log").read_text()
    return path


def _public_key(deb: Path) -> Path:
    """The build key's public half, written beside the package by build-deb.sh."""
    return deb.parent / f"baccarat-edge_{VERSION}_attestation.pub"


def test_the_package_carries_its_signed_manifest_and_the_build_writes_the_public_key(deb: Path) -> None:
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    for name in ("manifest.json", "manifest.json.sig"):
        assert f"./opt/baccarat-edge/attestation/{name}" in listing
    assert _public_key(deb).read_text().startswith("-----BEGIN PUBLIC KEY-----")


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
def tcp_reader() -> Iterator[socket.socket]:
    """A listening TCP socket the config's ``socket://`` reader can reach (the shoe)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The casino's PKI in small (config/mosquitto/make-pki.sh): CA, broker, table T07, observer."""
    out = tmp_path_factory.mktemp("pki")
    subprocess.run(
        ["bash", str(REPO / "config/mosquitto/make-pki.sh"), str(out), "127.0.0.1", "T07", "observer"],
        check=True,
        capture_output=True,
    )
    return out


@pytest.fixture
def tls_broker(tmp_path: Path, pki: Path) -> Iterator[MosquittoBroker]:
    """The table's broker: TLS with client certificates and a password login, nothing anonymous."""
    passwords = tmp_path / "passwords"
    for number, (user, password) in enumerate((("table-T07", PASSWORD), ("observer", "observer-pw"))):
        create = ["-c"] if number == 0 else []
        subprocess.run(["mosquitto_passwd", *create, "-b", str(passwords), user, password], check=True)
    broker = MosquittoBroker(
        tmp_path / "broker",
        extra_config="\n".join(
            [
                f"cafile {pki / 'ca.crt'}",
                f"certfile {pki / 'broker.crt'}",
                f"keyfile {pki / 'broker.key'}",
                "require_certificate true",
                "allow_anonymous false",
                f"password_file {passwords}",
                "user root",
            ]
        ),
    )
    broker.start()
    yield broker
    broker.stop()


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    output = f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    assert result.returncode == 0, f"exit {result.returncode}\n{output}"
    return result.stdout


def _observer(broker: MosquittoBroker, pki: Path, client_id: str = "observer") -> mqtt.Client:
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id)
    client.tls_set(
        ca_certs=str(pki / "ca.crt"), certfile=str(pki / "observer.crt"), keyfile=str(pki / "observer.key")
    )
    client.username_pw_set("observer", "observer-pw")
    client.connect("127.0.0.1", broker.port)
    return client


def _technician(root: Path, pki: Path, deb: Path, broker_port: int, reader_port: int) -> dict[str, str]:
    """A technician's account with sudo, the .deb and the table's files in a folder of theirs,
    and the edits they make in ``sudoedit``; the environment their shell has."""
    _ok(run_in_root(root, ["apt-get", "install", "-y", "--no-install-recommends", "sudo"]))
    _ok(run_in_root(root, ["useradd", "--create-home", "--shell", "/bin/bash", TECHNICIAN]))
    sudoers = root / "etc/sudoers.d" / TECHNICIAN
    sudoers.write_text(f"{TECHNICIAN} ALL=(ALL:ALL) NOPASSWD: ALL\n")
    sudoers.chmod(0o440)
    home = root / HOME.lstrip("/")
    uid, gid = home.stat().st_uid, home.stat().st_gid
    handover = home / "T07"
    handover.mkdir()
    shutil.copy(pki / "ca.crt", handover / "ca.pem")
    shutil.copy(pki / "T07.crt", handover / "T07.crt")
    shutil.copy(pki / "T07.key", handover / "T07.key")
    shutil.copy(_public_key(deb), handover / "attestation.pub")
    for name in ("events.key", "gs-main.key", "sup-anna.key", "tech-bo.key"):
        (handover / name).write_text(secrets.token_hex(32) + "\n")
    shutil.copy(deb, home / deb.name)
    for path in (handover, *handover.iterdir(), home / deb.name):
        os.chown(path, uid, gid)
    # What the technician types in the editor: this table's reader and broker.
    editor = root / "usr/local/bin/technician-edits"
    editor.write_text(
        "#!/bin/sh\nset -e\n"
        "sed -i"
        f" -e 's|url: /dev/baccarat-shoe |url: socket://127.0.0.1:{reader_port} |'"
        " -e 's|host: mqtt.casino.example|host: 127.0.0.1|'"
        f" -e 's|port: 8883|port: {broker_port}|'"
        ' "$1"\n'
    )
    editor.chmod(0o755)
    return {"HOME": HOME, "USER": TECHNICIAN, "SUDO_EDITOR": "/usr/local/bin/technician-edits"}


def _run_block(root: Path, lines: tuple[str, ...], env: dict[str, str], *, typed: str = "") -> str:
    """One fenced block of the guide, as written, in the technician's shell (from their home)."""
    script = "set -e\ncd ~\n" + "\n".join(lines) + "\n"
    return _ok(run_in_root(root, ["bash", "-c", script], user=TECHNICIAN, env=env, stdin=typed, timeout=900))


def _unit_argv(root: Path) -> list[str]:
    """The daemon's command line as the installed unit starts it: its user, group, groups,
    working directory and environment."""
    unit: dict[str, list[str]] = {}
    for line in (root / "lib/systemd/system/baccarat-edge.service").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            unit.setdefault(key, []).append(value)
    [exec_start] = unit["ExecStart"]
    [user], [group], [groups] = unit["User"], unit["Group"], unit["SupplementaryGroups"]
    [workdir] = unit["WorkingDirectory"]
    return [
        "env",
        "-C",
        workdir,
        *unit["Environment"],
        "setpriv",
        f"--reuid={user}",
        f"--regid={group}",
        f"--groups={','.join(groups.split())}",
        "--",
        *shlex.split(exec_start),
    ]


def _byte_code(root: Path) -> list[Path]:
    """Every byte code file under the package's folder."""
    return sorted((root / "opt/baccarat-edge").rglob("*.pyc"))


def _runtime_directory(root: Path) -> tuple[Path, int]:
    """The unit's ``RuntimeDirectory=`` (in the root) and its mode."""
    unit = (root / "lib/systemd/system/baccarat-edge.service").read_text()
    [name] = re.findall(r"(?m)^RuntimeDirectory=(.+)$", unit)
    [mode] = re.findall(r"(?m)^RuntimeDirectoryMode=(.+)$", unit)
    return root / "run" / name, int(mode, 8)


def _fresh_runtime_directory(root: Path) -> None:
    """The unit's ``RuntimeDirectory=`` as systemd makes it at each start: empty, the user's."""
    folder, mode = _runtime_directory(root)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(mode=mode)
    owner = (root / "var/lib/baccarat-edge").stat()  # StateDirectory=: the user's
    os.chown(folder, owner.st_uid, owner.st_gid)


def _runtime_directory_removed(root: Path) -> None:
    """What systemd does at each stop; the daemon (python -B) wrote no byte code there."""
    folder, _mode = _runtime_directory(root)
    assert [p for p in folder.rglob("*") if not p.is_dir()] == []
    shutil.rmtree(folder)


def _statuses(client: mqtt.Client) -> tuple[list[str], threading.Condition]:
    statuses: list[str] = []
    changed = threading.Condition()

    def on_message(_client: mqtt.Client, _userdata: object, message: mqtt.MQTTMessage) -> None:
        with changed:
            statuses.append(json.loads(message.payload)["status"])
            changed.notify_all()

    client.on_message = on_message
    client.subscribe("baccarat/v1/T07/status", qos=1)
    client.loop_start()
    return statuses, changed


def _monitor_shows_the_table_online(root: Path, line: str, env: dict[str, str]) -> str:
    """The guide's ``monitor`` line, as written, until its screen shows the table online and
    the reader connected; then Ctrl-C (SIGINT to the monitor), which ends it with 0."""
    monitor = subprocess.Popen(
        root_argv(root, ["bash", "-c", f"cd ~\n{line}\n"], user=TECHNICIAN, env=env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    screen: list[str] = []
    seen = threading.Event()

    def read() -> None:
        assert monitor.stdout is not None
        for chunk in iter(lambda: monitor.stdout.read(1) if monitor.stdout else "", ""):
            screen.append(chunk)
            text = "".join(screen[-4000:])
            if "status: online" in text and "reader connected" in text:
                seen.set()
        seen.set()  # the monitor ended: the assertions below say how

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        seen.wait(120)
        text = "".join(screen)
        assert monitor.poll() is None, f"monitor ended by itself (exit {monitor.returncode}):\n{text[-3000:]}"
        assert "status: online" in text, text[-3000:]
        assert "reader connected" in text, text[-3000:]
        [program] = _programs_in_root(root, "monitor")
        os.kill(program, signal.SIGINT)  # Ctrl-C: the terminal signals the program in front
        assert monitor.wait(timeout=60) == 0, "".join(screen)[-3000:]
    finally:
        if monitor.poll() is None:
            os.killpg(monitor.pid, signal.SIGKILL)
            monitor.wait(timeout=30)
        reader.join(timeout=30)
    return text


def _programs_in_root(root: Path, subcommand: str) -> list[int]:
    """Host pids of the ``baccarat-edge SUBCOMMAND`` processes running inside ``root`` (not the
    ``sudo`` that started one: a terminal's Ctrl-C reaches the program, sudo does not relay it
    a second time)."""
    found: list[int] = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            in_root = os.readlink(proc / "root") == str(root)
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # ended meanwhile
        words = [w.decode(errors="replace") for w in argv]
        if (
            in_root
            and words[0] != "sudo"
            and subcommand in words
            and any("baccarat-edge" in w for w in words)
        ):
            found.append(int(proc.name))
    return found


def _enable_start_and_monitor(
    root: Path, step: Step, env: dict[str, str], broker: MosquittoBroker, pki: Path, reader: socket.socket
) -> list[str]:
    """Step 5 line by line: ``systemctl enable --now`` as written (a root has no running
    systemd, so the test starts the daemon as the unit does), the monitor line as written, the
    lines only a booted systemd can run skipped (NOT_IN_A_ROOT); then SIGTERM, as
    ``systemctl stop`` sends it. The statuses the table published."""
    [block] = step.blocks
    lines = [line for line in block if line.strip() and not line.startswith("#")]
    client = _observer(broker, pki)
    statuses, changed = _statuses(client)
    daemon: subprocess.Popen[str] | None = None
    skipped: list[str] = []
    try:
        for line in lines:
            command = line.split("#", 1)[0].strip()
            if command in NOT_IN_A_ROOT:
                skipped.append(command)
            elif command == "sudo systemctl enable --now baccarat-edge":
                # enable works offline; --now needs a running systemd, which a root has not
                enabled = run_in_root(root, ["bash", "-c", line], user=TECHNICIAN, env=env)
                assert enabled.returncode == 0 or (
                    enabled.returncode == 1
                    and "System has not been booted with systemd as init system" in enabled.stderr
                ), enabled.stdout + enabled.stderr
                wants = root / "etc/systemd/system/multi-user.target.wants"
                assert (wants / "baccarat-edge.service").is_symlink()
                daemon = _start_as_the_unit(root, statuses, changed)
            elif "baccarat-edge monitor" in command:
                assert daemon is not None, "the guide runs the monitor before the daemon is started"
                _monitor_shows_the_table_online(root, line, env)
            else:
                _run_block(root, (line,), env)
        assert sorted(skipped) == sorted(NOT_IN_A_ROOT), skipped
        assert daemon is not None, "step 5 no longer starts the daemon"
        _integrity_held_and_restored(root, broker, pki, reader)
        daemon.terminate()
        log, _ = daemon.communicate(timeout=60)
        assert daemon.returncode == 0, log[-4000:]
        _runtime_directory_removed(root)
        with changed:
            changed.wait_for(lambda: statuses[-1:] == ["offline"], 30)
        _planted_byte_code_never_runs(root, broker, pki)
    finally:
        if daemon is not None and daemon.poll() is None:
            daemon.kill()
            daemon.communicate(timeout=30)
        client.loop_stop()
        client.disconnect()
    return statuses


class _Table:
    """What a second observer sees of table T07: events (by seq), health reports, replies."""

    def __init__(self, client: mqtt.Client, key: bytes, game_server_key: bytes) -> None:
        self.events: dict[int, dict[str, Any]] = {}
        self.health: dict[str, Any] = {}
        self.statuses: list[dict[str, Any]] = []
        self.changed = threading.Condition()
        self.sender = CommandSender(client, "T07", Secret(key, "sup-anna"), key_id="sup-anna")
        self.game_server = CommandSender(client, "T07", Secret(game_server_key, "gs-main"), key_id="gs-main")
        client.on_message = self._on_message
        for topic in ("events", "health", "status", "cmd/reply"):
            client.subscribe(f"baccarat/v1/T07/{topic}", qos=1)
        client.loop_start()

    def _on_message(self, _client: mqtt.Client, _userdata: object, message: mqtt.MQTTMessage) -> None:
        body = json.loads(message.payload)
        with self.changed:
            if message.topic.endswith("/cmd/reply"):
                self.sender.on_reply(bytes(message.payload))
                self.game_server.on_reply(bytes(message.payload))
            elif message.topic.endswith("/events"):
                self.events[body["seq"]] = body
            elif message.topic.endswith("/health"):
                self.health = body
            else:
                self.statuses.append(body)
            self.changed.notify_all()

    def wait(self, what: str, predicate: Any, timeout: float = 90) -> None:
        with self.changed:
            assert self.changed.wait_for(predicate, timeout), f"{what}; health: {self.health}"


def _deal_cards(reader: socket.socket, table: _Table, steps: int) -> list[socket.socket]:
    """The shoe: the first ``steps`` steps of a simulated shoe (Angel Eye frames to the daemon's
    reader connection, ``new_shoe`` from the game server's key), 20 times slower than the
    service tests deal. Returns the reader's connections (open until the caller closes them)."""
    _deal, _plan, plan_steps = dealt_shoe(seed=24, max_hands=2)
    reader.settimeout(0)
    connections: list[socket.socket] = []
    while True:
        try:
            connections.append(reader.accept()[0])
        except BlockingIOError:
            break
    assert connections, "the daemon's reader never connected"
    at = 0.0
    for step in plan_steps[:steps]:
        time.sleep((step.t - at) / 20)
        at = step.t
        if step.supervisor is not None:
            reply = table.game_server.send(step.supervisor.action, dict(step.supervisor.args), timeout=60)
            assert reply["status"] == "accepted", reply
        elif step.data is not None:
            for connection in connections:  # check-config's probes connected first, and left
                with contextlib.suppress(OSError):
                    connection.sendall(step.data)
    return connections


def _integrity_held_and_restored(
    root: Path, broker: MosquittoBroker, pki: Path, reader: socket.socket
) -> None:
    """Attestation on the installed package: it passed at start; one installed file changed and a
    supervisor's signed ``attest`` raise ``integrity_failed``; the cards dealt then are journaled
    but not published; the file restored and ``attest`` again clear it and the held events go out."""
    secrets_dir = root / "etc/baccarat-edge/secrets"
    client = _observer(broker, pki, client_id="observer-attest")
    table = _Table(
        client,
        (secrets_dir / "sup-anna.key").read_bytes().strip(),
        (secrets_dir / "gs-main.key").read_bytes().strip(),
    )
    shoe: list[socket.socket] = []
    try:
        table.wait(
            "the birth status and a health report after the start-up checks",
            lambda: table.statuses and table.health.get("startup", {}).get("stage") == "done",
        )
        attestation = table.health["attestation"]
        assert (attestation["status"], attestation["required"], attestation["problems"]) == (
            "passed",
            True,
            [],
        )
        manifest = (root / "opt/baccarat-edge/attestation/manifest.json").read_bytes()
        digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
        assert attestation["manifest_digest"] == digest
        assert table.statuses[-1]["manifest_digest"] == digest  # the birth message

        [changed] = (root / "opt/baccarat-edge/venv/lib").glob("python3*/site-packages/daemon/cli.py")
        original = changed.read_bytes()
        changed.write_bytes(original + b"# changed on the table\n")
        installed_path = "/" + str(changed.relative_to(root))
        reply = table.sender.send("attest", timeout=60)
        assert reply["status"] == "refused", reply
        assert f"changed: {installed_path}" in reply["reason"]
        table.wait(
            "integrity_failed published",
            lambda: any(e["data"].get("code") == "integrity_failed" for e in table.events.values()),
        )
        [alert] = [e for e in table.events.values() if e["data"].get("code") == "integrity_failed"]
        assert alert["data"]["severity"] == "critical"
        assert alert["data"]["problems"] == [f"changed: {installed_path}"]

        shoe = _deal_cards(reader, table, 14)
        table.wait(
            "the cards journaled (health last_seq) while held",
            lambda: (
                table.health["last_seq"] >= alert["seq"] + 4
                and table.health["attestation"]["held_after_seq"] == alert["seq"]
            ),
        )
        assert [seq for seq in table.events if seq > alert["seq"]] == []  # no card event published

        changed.write_bytes(original)
        reply = table.sender.send("attest", timeout=60)
        assert reply["status"] == "accepted", reply

        def kinds_after_alert() -> list[str]:
            return [table.events[seq]["kind"] for seq in sorted(table.events) if seq > alert["seq"]]

        table.wait(
            "the held cards published, then the alert cleared",
            lambda: {"card_dealt", "alert_cleared"} <= set(kinds_after_alert()),
        )
        with table.changed:
            # no gap from the first event this observer saw (it subscribed after the daemon started)
            assert sorted(table.events) == list(range(min(table.events), max(table.events) + 1))
            kinds = kinds_after_alert()
        assert kinds.index("card_dealt") < kinds.index("alert_cleared"), kinds  # held, then released
    finally:
        for connection in shoe:
            connection.close()
        client.loop_stop()
        client.disconnect()


# Run as root in the Debian root by the venv's Python: a .pyc for MODULE in its __pycache__, with
# the header a compile of the installed source would have (its time and size), whose code does
# what the module does, then creates MARKER. Prints the .pyc's path.
PLANT_BYTE_CODE = """
import importlib.util, marshal, os, sys
module, marker = sys.argv[1:]
source = os.stat(module)
with open(module) as fh:
    code = compile(fh.read() + f"\\nopen({marker!r}, 'w').close()\\n", module, "exec")
header = importlib.util.MAGIC_NUMBER + bytes(4)  # flags 0: valid while the source's time and size match
header += int(source.st_mtime).to_bytes(4, "little") + (source.st_size & 0xFFFFFFFF).to_bytes(4, "little")
pyc = importlib.util.cache_from_source(module)
os.makedirs(os.path.dirname(pyc), exist_ok=True)
with open(pyc, "wb") as fh:
    fh.write(header + marshal.dumps(code))
print(pyc)
"""


def _planted_byte_code_never_runs(root: Path, broker: MosquittoBroker, pki: Path) -> None:
    """A ``.pyc`` planted in the venv for a module the daemon imports first (its command line's
    ``daemon.cli``), valid for the installed source: the daemon started as the unit never runs
    it, and its start-up attestation names it (``integrity_failed``); the venv's own Python
    without the unit's byte code folder does run it, so the planted file is one Python would run."""
    [module] = (root / "opt/baccarat-edge/venv/lib").glob("python3*/site-packages/daemon/cli.py")
    marker = root / "var/lib/baccarat-edge/planted-byte-code-ran"
    python = "/opt/baccarat-edge/venv/bin/python"
    argv = [
        python,
        "-B",
        "-c",
        PLANT_BYTE_CODE,
        "/" + str(module.relative_to(root)),
        "/" + str(marker.relative_to(root)),
    ]
    planted = _ok(run_in_root(root, argv)).strip()
    assert (root / planted.lstrip("/")).is_file()
    assert "/__pycache__/" in planted

    secrets_dir = root / "etc/baccarat-edge/secrets"
    client = _observer(broker, pki, client_id="observer-byte-code")
    table = _Table(
        client,
        (secrets_dir / "sup-anna.key").read_bytes().strip(),
        (secrets_dir / "gs-main.key").read_bytes().strip(),
    )
    _fresh_runtime_directory(root)
    started = time.time()
    daemon = subprocess.Popen(
        root_argv(root, _unit_argv(root), own_pids=False),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        table.wait(
            "a health report of the restarted daemon after its start-up checks",
            lambda: (
                table.health.get("ts", 0) >= started
                and table.health.get("startup", {}).get("stage") == "done"
                and any(e["data"].get("problems") == [f"extra: {planted}"] for e in table.events.values())
            ),
        )
        assert table.health["attestation"]["status"] == "failed"
        assert table.health["attestation"]["problems"] == [f"extra: {planted}"]
        assert not marker.exists(), "the daemon ran the planted byte code"
        daemon.terminate()
        log, _ = daemon.communicate(timeout=60)
        assert daemon.returncode == 0, log[-4000:]
        _runtime_directory_removed(root)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.communicate(timeout=30)
        client.loop_stop()
        client.disconnect()
    assert not marker.exists()
    _ok(run_in_root(root, [python, "-B", "-c", "import daemon.cli"], user=USER))  # no prefix: it runs
    assert marker.is_file(), (
        "the planted byte code is not one Python would run: the check above proves nothing"
    )
    marker.unlink()
    # left in place: the prerm removes it with the package (checked below: nothing is left)


def _start_as_the_unit(
    root: Path, statuses: list[str], changed: threading.Condition
) -> subprocess.Popen[str]:
    """What ``systemctl start`` does in a booted system: the unit's command line, user and
    environment; returns once the daemon published ``online``."""
    _fresh_runtime_directory(root)
    daemon = subprocess.Popen(
        root_argv(root, _unit_argv(root), own_pids=False),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    with changed:
        changed.wait_for(lambda: "online" in statuses or daemon.poll() is not None, 90)
    if "online" not in statuses or daemon.poll() is not None:
        if daemon.poll() is None:
            daemon.terminate()
        log, _ = daemon.communicate(timeout=60)
        raise AssertionError(f"the daemon did not go online (exit {daemon.returncode}):\n{log[-4000:]}")
    return daemon


@pytest.fixture
def debian12_root(tmp_path: Path) -> Iterator[Path]:
    """A fresh minbase bookworm root, deleted afterwards (about 600 MB once installed)."""
    root = unpack_root(tmp_path / "root")
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.mosquitto
def test_fresh_debian12_root_follows_the_guide_to_an_online_table_then_removes_and_purges(
    deb: Path, debian12_root: Path, tls_broker: MosquittoBroker, pki: Path, tcp_reader: socket.socket
) -> None:
    root = debian12_root
    steps = install_steps()
    assert [step.number for step in steps] == [1, 2, 3, 4, 5], [s.title for s in steps]
    install, hardware, config, check, enable = steps
    assert hardware.title == HARDWARE_STEP
    env = _technician(root, pki, deb, tls_broker.port, tcp_reader.getsockname()[1])

    # 1. The one command of the install guide (the technician answers apt's question).
    [block] = install.blocks
    assert block == (f"sudo apt install ./{deb.name}",), "the guide names another package file"
    out = _run_block(root, block, env, typed="y\n")
    keep_apt_archives(root)
    assert "baccarat-edge: not enabled. Next: write /etc/baccarat-edge/table.yaml" in out

    # The program runs on Debian's interpreter, as the daemon's user.
    version = _ok(run_in_root(root, ["baccarat-edge", "--version"], user=USER))
    assert version.strip() == f"baccarat-edge {VERSION}"
    python = _ok(run_in_root(root, ["readlink", "-f", "/opt/baccarat-edge/venv/bin/python"])).strip()
    assert re.fullmatch(r"/usr/bin/python3\.\d+", python)
    assert "python3" in _ok(run_in_root(root, ["dpkg-query", "-S", python]))
    assert _byte_code(root) == [], "the package ships no byte code and the postinst compiles none"

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

    # 3. The config, copied and edited; the table's files from the technician's folder; the
    # password typed in.
    first, second = config.blocks
    _run_block(root, first, env)
    _run_block(root, second, env, typed=PASSWORD + "\n")
    assert "socket://127.0.0.1:" in (root / "etc/baccarat-edge/table.yaml").read_text()
    for name in ("T07.key", "events.key", "mqtt-password", "gs-main.key"):
        st = (root / "etc/baccarat-edge/secrets" / name).stat()
        assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (0, gid, 0o640), name

    # 4. check-config as the daemon's user, no --allow-insecure: TLS, client certificate, login.
    [block] = check.blocks
    report = _run_block(root, block, env)
    assert "/etc/baccarat-edge/table.yaml: valid — table T07" in report
    assert "[ok] broker MQTT: mqtts://127.0.0.1:" in report or "connection accepted" in report, report
    assert "everything it points at was found" in report
    # Root reads the same secrets (as check-config, monitor and fleet run with sudo do).
    as_root = run_in_root(root, ["baccarat-edge", "check-config", "/etc/baccarat-edge/table.yaml"])
    assert "everything it points at was found" in _ok(as_root)
    assert _byte_code(root) == [], "root's run wrote byte code into the venv (its #! line runs python -B)"

    # 5. Enabled, started as the unit starts it, online; the monitor shows it; stopped.
    statuses = _enable_start_and_monitor(root, enable, env, tls_broker, pki, tcp_reader)
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
    leftovers = _ok(run_in_root(root, ["find", "/", "-xdev", "-not", "-path", f"{HOME}/*", *owned_or_named]))
    assert leftovers == "", leftovers
    for path in listed:
        if path != "/." and (root / path.lstrip("/")).exists():
            assert (root / path.lstrip("/")).is_dir(), f"{path} left after purge"
            holder = run_in_root(root, ["dpkg-query", "-S", path])
            assert holder.returncode == 0, f"{path} left after purge and owned by no other package"
