"""What ``check-config`` looks at beyond the file: device paths, the journal and the broker.

Each probe returns a :class:`Finding` saying what it found in words a technician
can act on. Nothing here changes anything: devices are opened read-only and closed
at once (never while the daemon holds them with an exclusive lock: that is reported
as "busy"), the broker gets one connection with a client id of its own, so the
running daemon is not disconnected.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import ssl
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel

from daemon.mqtt.settings import BrokerSettings


@dataclass(frozen=True, slots=True)
class Finding:
    """One probe's result: ``ok`` False means the daemon would not work as configured."""

    subject: str
    ok: bool
    detail: str
    warning: bool = False  # accepted, but worth a second look (e.g. an allowed insecure setting)

    def __str__(self) -> str:
        label = "PROBLEM" if not self.ok else "WARNING" if self.warning else "ok"
        return f"[{label}] {self.subject}: {self.detail}"


def probe_serial_url(subject: str, url: str, timeout: float = 2.0) -> Finding:
    """A device path (exists, is a character device, can be opened) or a socket:// server."""
    if "://" in url:
        parts = urlsplit(url)
        if parts.scheme in ("socket", "rfc2217"):
            return probe_tcp(subject, parts.hostname or "", parts.port or 0, timeout)
        return Finding(subject, True, f"{url}: scheme {parts.scheme!r} not probed")
    return probe_device_path(subject, Path(url))


def probe_device_path(subject: str, path: Path) -> Finding:
    """Whether ``path`` is a character device this user may open read-write."""
    try:
        resolved = path.resolve(strict=True)
    except FileNotFoundError:
        hint = (
            " (is the shoe plugged in? are the udev rules installed?)"
            if str(path).startswith("/dev/")
            else ""
        )
        return Finding(subject, False, f"{path} does not exist{hint}")
    except OSError as exc:
        return Finding(subject, False, f"{path}: {exc.strerror}")
    where = f"{path} -> {resolved}" if resolved != path else str(path)
    mode = resolved.stat().st_mode
    if not stat.S_ISCHR(mode):
        return Finding(subject, False, f"{where} is not a character device")
    try:
        fd = os.open(resolved, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    except PermissionError:
        return Finding(
            subject, False, f"{where}: permission denied (is the user in the device's group, e.g. dialout?)"
        )
    except OSError as exc:
        return Finding(subject, False, f"{where}: cannot open: {exc.strerror}")
    os.close(fd)
    return Finding(subject, True, f"{where}: character device, opens read-write")


def probe_tcp(subject: str, host: str, port: int, timeout: float = 2.0) -> Finding:
    if not host or not port:
        return Finding(subject, False, "no host or port")
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return Finding(subject, True, f"{host}:{port} accepts TCP connections")
    except OSError as exc:
        return Finding(subject, False, f"{host}:{port} unreachable: {exc.strerror or exc}")


def probe_reader(name: str, driver: str, settings: BaseModel) -> Finding:
    subject = f"reader {name!r} ({driver})"
    url = getattr(settings, "url", None)
    if isinstance(url, str):
        return probe_serial_url(subject, url)
    vendor, product = getattr(settings, "vendor_id", None), getattr(settings, "product_id", None)
    if isinstance(vendor, int) and isinstance(product, int):
        return probe_usb(subject, vendor, product, getattr(settings, "serial_number", None))
    return Finding(subject, True, "nothing to probe for this driver")


def probe_usb(subject: str, vendor: int, product: int, serial: str | None) -> Finding:
    ident = f"{vendor:04x}:{product:04x}" + (f" serial {serial}" if serial else "")
    try:
        import usb.core
    except Exception as exc:
        return Finding(subject, False, f"pyusb unavailable: {exc}")
    try:
        devices = list(usb.core.find(find_all=True, idVendor=vendor, idProduct=product) or [])
    except Exception as exc:  # no libusb backend, no permission on /dev/bus/usb
        return Finding(subject, False, f"cannot list USB devices: {exc}")
    if serial is not None:
        devices = [d for d in devices if _usb_serial(d) == serial]
    if not devices:
        return Finding(subject, False, f"no USB device {ident} found (plugged in? udev rule installed?)")
    return Finding(subject, True, f"USB device {ident} present ({len(devices)} found)")


def _usb_serial(device: Any) -> str | None:
    try:
        value = device.serial_number
    except Exception:
        return None
    return value if isinstance(value, str) else None


def probe_camera(name: str, settings: BaseModel) -> Finding:
    subject = f"camera {name!r}"
    source = getattr(settings, "source", None)
    if isinstance(source, int):
        return probe_device_path(subject, Path(f"/dev/video{source}"))
    if isinstance(source, (str, Path)):
        text = str(source)
        if "://" in text:
            parts = urlsplit(text)
            return probe_tcp(
                subject, parts.hostname or "", parts.port or (554 if parts.scheme == "rtsp" else 80)
            )
        path = Path(text)
        if text.startswith("/dev/"):
            return probe_device_path(subject, path)
        if path.exists():
            kind = "folder of images" if path.is_dir() else "file"
            return Finding(subject, True, f"{path}: {kind} present")
        return Finding(subject, False, f"{path} does not exist")
    return Finding(subject, True, "source not probed")


def probe_state_dir(path: Path) -> Finding:
    subject = "state directory"
    if path.exists():
        if not path.is_dir():
            return Finding(subject, False, f"{path} exists but is not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            return Finding(subject, False, f"{path} is not writable by this user")
        return Finding(subject, True, f"{path} is writable")
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is not None and os.access(parent, os.W_OK | os.X_OK):
        return Finding(subject, True, f"{path} does not exist yet; will be created (under {parent})")
    return Finding(
        subject,
        False,
        f"{path} does not exist and cannot be created (systemd creates it via StateDirectory=)",
    )


def probe_broker(settings: BrokerSettings, table_id: str, timeout: float = 5.0) -> list[Finding]:
    """TCP reachability, then one MQTT connect with the configured TLS and credentials."""
    host, port = settings.host, settings.effective_port
    tcp = probe_tcp("broker", host, port, timeout)
    if not tcp.ok:
        return [tcp]
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    mqtt5 = settings.protocol.value == "mqtt5"
    client = mqtt.Client(
        CallbackAPIVersion.VERSION2,
        client_id=f"baccarat-edge-check-{table_id}-{os.getpid()}",
        protocol=mqtt.MQTTv5 if mqtt5 else mqtt.MQTTv311,
    )
    scheme = "mqtt"
    if settings.tls.enabled:
        from daemon.mqtt.tls import tls_context

        scheme = "mqtts"
        try:  # the daemon's own context: TLS 1.2 floor, verification as configured
            client.tls_set_context(tls_context(settings.tls))
        except (OSError, ssl.SSLError, ValueError) as exc:
            return [tcp, Finding("broker TLS", False, f"cannot load the TLS files: {exc}")]
    if settings.auth is not None:
        password = None
        if settings.auth.password is not None:
            try:
                password = settings.auth.password.load().reveal_text()
            except ValueError as exc:
                return [tcp, Finding("broker credentials", False, str(exc))]
        client.username_pw_set(settings.auth.username, password)
    answered = threading.Event()
    verdict: list[str] = []

    def on_connect(_c: Any, _u: Any, _f: Any, reason: Any, _p: Any = None) -> None:
        verdict.append("accepted" if not getattr(reason, "is_failure", False) else f"refused: {reason}")
        answered.set()

    client.on_connect = on_connect
    where = f"{scheme}://{host}:{port} (MQTT {'5' if mqtt5 else '3.1.1'})"
    try:
        client.connect(host, port, keepalive=10)
    except ssl.SSLError as exc:
        return [tcp, Finding("broker TLS", False, f"{where}: TLS handshake failed: {exc.reason or exc}")]
    except OSError as exc:
        return [tcp, Finding("broker MQTT", False, f"{where}: {exc}")]
    client.loop_start()
    try:
        if not answered.wait(timeout):
            return [tcp, Finding("broker MQTT", False, f"{where}: no CONNACK within {timeout:.0f}s")]
    finally:
        client.disconnect()
        client.loop_stop()
    ok = verdict[0] == "accepted"
    return [tcp, Finding("broker MQTT", ok, f"{where}: connection {verdict[0]}")]


def probe_secrets(settings: BrokerSettings) -> list[Finding]:
    """Every configured secret and TLS file is readable by this user (values never shown)."""
    from daemon.mqtt.secrets import SecretSource

    sources: list[tuple[str, SecretSource | None]] = [
        ("broker password", settings.auth.password if settings.auth else None),
        ("events signing key", settings.signing.events_key),
        ("command key", settings.signing.command_key),
    ]
    sources += [(f"command key {k.key_id} ({k.role.value})", k.secret) for k in settings.signing.command_keys]
    findings: list[Finding] = []
    for subject, source in sources:
        if source is None:
            if subject == "command key" and not settings.signing.command_keys:
                findings.append(Finding(subject, True, "not configured: every supervisor command is refused"))
            continue
        try:
            secret = source.load()
        except ValueError as exc:
            findings.append(Finding(subject, False, str(exc)))
            continue
        findings.append(
            Finding(subject, True, f"readable from {secret.origin} ({len(secret.reveal())} bytes)")
        )
    if settings.tls.enabled:
        for subject, path in (
            ("TLS CA file", settings.tls.ca_file),
            ("TLS client certificate", settings.tls.cert_file),
            ("TLS client key", settings.tls.key_file),
        ):
            if path is None:
                continue
            try:
                with open(path, "rb"):
                    pass
            except OSError as exc:
                findings.append(Finding(subject, False, f"{path}: {exc.strerror}"))
            else:
                findings.append(Finding(subject, True, f"{path} readable"))
    return findings


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address: traffic that never leaves the machine."""
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def insecure_settings(settings: BrokerSettings) -> list[str]:
    """Every broker setting that leaves the table open to eavesdropping or forgery."""
    found: list[str] = []
    tls = settings.tls
    if tls.enabled and not tls.verify:
        found.append(
            "broker.tls.verify is false: the broker certificate and host name are not checked, "
            "anyone on the path can pose as the broker"
        )
    if not tls.enabled and not is_loopback(settings.host):
        found.append(
            f"broker.tls.enabled is false with the remote host {settings.host!r}: events, commands "
            "and the login cross the network in clear text"
        )
    client_certificate = tls.enabled and tls.cert_file is not None  # mutual TLS identifies the table
    if not client_certificate:
        if settings.auth is None:
            found.append("no broker.auth: the table logs in anonymously (the broker must allow anyone)")
        elif settings.auth.password is None:
            found.append("broker.auth has no password: the broker cannot tell this table from an impostor")
    if settings.signing.events_key is None:
        found.append(
            "no broker.signing.events_key: events and replies are unsigned, "
            "a consumer cannot detect forgeries"
        )
    return found
