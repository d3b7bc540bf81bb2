"""The systemd unit, sysusers, tmpfiles and udev rules as a table technician installs them."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SYSTEMD_DIR = Path(__file__).resolve().parents[2] / "systemd"
UNIT = SYSTEMD_DIR / "baccarat-edge.service"
STRICT_DROP_IN = SYSTEMD_DIR / "strict-devices.conf"
INSTALLED_BINARY = "/opt/baccarat-edge/venv/bin/baccarat-edge"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: the systemd tests need it (apt-get install systemd)")
    return path


def _unit_settings(*drop_ins: Path) -> dict[str, list[str]]:
    """Every ``Key=value`` of the unit, by key (repeated keys keep every value), then of each
    drop-in: as systemd applies them, an empty assignment of a list setting empties it."""
    settings: dict[str, list[str]] = {}
    for path in (UNIT, *drop_ins):
        for raw in path.read_text().splitlines():
            line = raw.strip()
            if not line or line.startswith(("#", ";", "[")):
                continue
            key, _, value = line.partition("=")
            if value.strip():
                settings.setdefault(key.strip(), []).append(value.strip())
            else:
                settings[key.strip()] = []
    return settings


def _verify(unit_text: str, drop_in_text: str | None, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``systemd-analyze verify`` on the unit (ExecStart pointed at this checkout's entry point,
    which must exist) with the drop-in, if any, in ``baccarat-edge.service.d/`` beside it."""
    entry_point = Path(sys.executable).with_name("baccarat-edge")
    assert entry_point.exists(), f"{entry_point} missing: install the project (make venv)"
    copy = tmp_path / UNIT.name
    copy.write_text(unit_text.replace(INSTALLED_BINARY, str(entry_point)))
    if drop_in_text is not None:
        (tmp_path / f"{UNIT.name}.d").mkdir()
        (tmp_path / f"{UNIT.name}.d" / STRICT_DROP_IN.name).write_text(drop_in_text)
    return subprocess.run(
        [_tool("systemd-analyze"), "verify", str(copy)], capture_output=True, text=True, timeout=60
    )


def test_unit_passes_systemd_analyze_verify_without_any_message(tmp_path: Path) -> None:
    # verify checks that ExecStart exists: point it at this checkout's entry point, which is
    # the same program the install guide puts under /opt/baccarat-edge/venv.
    entry_point = Path(sys.executable).with_name("baccarat-edge")
    assert entry_point.exists(), f"{entry_point} missing: install the project (make venv)"
    text = UNIT.read_text()
    assert INSTALLED_BINARY in text
    copy = tmp_path / UNIT.name
    copy.write_text(text.replace(INSTALLED_BINARY, str(entry_point)))
    result = subprocess.run(
        [_tool("systemd-analyze"), "verify", str(copy)], capture_output=True, text=True, timeout=60
    )
    # systemd-analyze exits 0 even on value parse errors: any output at all is a failure.
    assert result.stderr == "", result.stderr
    assert result.stdout == "", result.stdout
    assert result.returncode == 0


def test_verify_would_catch_a_typo(tmp_path: Path) -> None:
    """The verify test above is only meaningful if a bad key produces output."""
    entry_point = Path(sys.executable).with_name("baccarat-edge")
    bad = UNIT.read_text().replace(INSTALLED_BINARY, str(entry_point))
    bad = bad.replace("WatchdogSec=30s", "WatchdogSec=thirty\nProtectSystm=strict")
    copy = tmp_path / UNIT.name
    copy.write_text(bad)
    result = subprocess.run(
        [_tool("systemd-analyze"), "verify", str(copy)], capture_output=True, text=True, timeout=60
    )
    assert "ProtectSystm" in result.stderr
    assert "Failed to parse sec value" in result.stderr


def test_unit_has_notify_watchdog_restart_and_hardening() -> None:
    s = _unit_settings()
    assert s["Type"] == ["notify"]
    assert s["Restart"] == ["on-failure"]
    assert len(s["WatchdogSec"]) == 1
    assert s["WatchdogSec"][0] not in ("0", "infinity")
    assert s["User"] == ["baccarat-edge"]
    assert set(s["SupplementaryGroups"][0].split()) == {"dialout", "plugdev", "video"}
    assert s["ProtectSystem"] == ["strict"]
    assert s["StateDirectory"] == ["baccarat-edge"]
    assert s["DevicePolicy"] == ["closed"]
    allowed = {v.split()[0] for v in s["DeviceAllow"]}
    assert {"/dev/baccarat-shoe", "/dev/baccarat-camera"} <= allowed
    assert "PrivateDevices" not in s, "PrivateDevices hides /dev/ttyUSB* and the camera"
    assert s["NoNewPrivileges"] == ["yes"]
    assert "RestartSteps" not in s, "RestartSteps= needs systemd 254+"
    # The unit file itself must parse as INI with the three sections.
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(re.sub(r"(?m)^(DeviceAllow|Environment)=", r"#\1=", UNIT.read_text()))
    assert {"Unit", "Service", "Install"} <= set(parser.sections())


def test_unit_keeps_byte_code_out_of_the_attested_venv() -> None:
    """Python looks up byte code only in the service's own runtime folder (emptied by systemd
    at every stop and start), never in the venv's ``__pycache__`` (daemon/attestation/byte_code.py)."""
    s = _unit_settings()
    [runtime] = s["RuntimeDirectory"]
    assert s["RuntimeDirectoryMode"] == ["0700"]
    assert "RuntimeDirectoryPreserve" not in s  # "no": removed at every stop, restarts included
    prefixes = [v.split("=", 1)[1] for v in s["Environment"] if v.startswith("PYTHONPYCACHEPREFIX=")]
    assert prefixes == [f"/run/{runtime}/pycache"]
    # the package's entry point, whose #! line runs python -B (systemd/debian/rules): no byte code written
    assert s["ExecStart"][0].split()[0] == INSTALLED_BINARY


def test_strict_devices_drop_in_passes_verify_without_any_message(tmp_path: Path) -> None:
    result = _verify(UNIT.read_text(), STRICT_DROP_IN.read_text(), tmp_path)
    assert result.stderr == "", result.stderr
    assert result.stdout == "", result.stdout
    assert result.returncode == 0


def test_verify_reads_the_drop_in(tmp_path: Path) -> None:
    """The drop-in test above means something only if verify loads the drop-in: a typo there prints."""
    bad = STRICT_DROP_IN.read_text().replace("DeviceAllow=/dev/baccarat-camera rw", "DeviceAlow=/dev/x rw")
    result = _verify(UNIT.read_text(), bad, tmp_path)
    assert "DeviceAlow" in result.stderr
    assert STRICT_DROP_IN.name in result.stderr


def test_strict_drop_in_allows_only_the_udev_names() -> None:
    default = {v.split()[0] for v in _unit_settings()["DeviceAllow"]}
    assert {"char-ttyUSB", "char-ttyACM", "char-usb_device", "char-video4linux"} <= default
    strict = _unit_settings(STRICT_DROP_IN)
    allowed = [v.split() for v in strict["DeviceAllow"]]
    assert all(access == "rw" for _path, access in allowed)
    assert {path for path, _ in allowed} == _udev_symlinks()
    assert strict["DevicePolicy"] == ["closed"]  # the drop-in narrows the list, not the policy
    assert "PrivateDevices" not in strict


def test_sysusers_creates_the_user_in_the_device_groups(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc" / "sysusers.d").mkdir(parents=True)
    (root / "etc" / "group").write_text("dialout:x:20:\nvideo:x:44:\nplugdev:x:46:\n")
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    shutil.copy(SYSTEMD_DIR / "baccarat-edge.sysusers", root / "etc" / "sysusers.d" / "baccarat-edge.conf")
    result = subprocess.run(
        [_tool("systemd-sysusers"), f"--root={root}", "baccarat-edge.conf"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    passwd = (root / "etc" / "passwd").read_text()
    assert re.search(r"^baccarat-edge:x:\d+:\d+:.*:/var/lib/baccarat-edge:/usr/sbin/nologin$", passwd, re.M)
    groups = {
        line.split(":")[0]: line.split(":")[3] for line in (root / "etc" / "group").read_text().splitlines()
    }
    for group in ("dialout", "plugdev", "video"):
        assert "baccarat-edge" in groups[group].split(","), group


def test_tmpfiles_creates_config_secrets_and_state_dirs(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc" / "tmpfiles.d").mkdir(parents=True)
    (root / "etc" / "group").write_text("baccarat-edge:x:995:\n")
    (root / "etc" / "passwd").write_text(
        "baccarat-edge:x:995:995::/var/lib/baccarat-edge:/usr/sbin/nologin\n"
    )
    shutil.copy(SYSTEMD_DIR / "baccarat-edge.tmpfiles", root / "etc" / "tmpfiles.d" / "baccarat-edge.conf")
    result = subprocess.run(
        [_tool("systemd-tmpfiles"), f"--root={root}", "--create", "baccarat-edge.conf"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    for path, mode in (
        ("etc/baccarat-edge", 0o750),
        ("etc/baccarat-edge/secrets", 0o750),
        ("var/lib/baccarat-edge", 0o750),
    ):
        st = (root / path).stat()
        assert st.st_mode & 0o777 == mode, path
        assert st.st_gid == 995, path
    assert (root / "var/lib/baccarat-edge").stat().st_uid == 995


def _udev_symlinks() -> set[str]:
    """The ``/dev/`` names the udev rules create."""
    text = (SYSTEMD_DIR / "99-baccarat-edge.rules").read_text()
    return {"/dev/" + name for name in re.findall(r'SYMLINK\+="([^"]+)"', text)}


def test_udev_rules_match_the_unit_names_and_groups() -> None:
    rules = [
        line
        for line in (SYSTEMD_DIR / "99-baccarat-edge.rules").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert rules
    unit_groups = set(_unit_settings()["SupplementaryGroups"][0].split())
    pair_re = re.compile(r'([A-Z_]+(?:\{[A-Za-z_]+\})?)(?:==|!=|\+=|=|:=)"([^"]*)"')
    symlinks = set()
    for rule in rules:
        fields: dict[str, str] = {}
        for pair in (p.strip() for p in rule.split(", ")):
            match = pair_re.fullmatch(pair)
            assert match is not None, f"malformed udev key: {pair}"
            fields[match.group(1)] = match.group(2)
        assert fields.get("TAG") == "systemd", rule
        assert fields.get("GROUP") in unit_groups, rule
        assert fields.get("MODE") == "0660", rule
        if "SYMLINK" in fields:
            symlinks.add("/dev/" + fields["SYMLINK"])
    allowed = {v.split()[0] for v in _unit_settings()["DeviceAllow"]}
    assert symlinks == {"/dev/baccarat-shoe", "/dev/baccarat-shoe-usb", "/dev/baccarat-camera"}
    assert symlinks == _udev_symlinks()
    assert symlinks <= allowed
