"""The TLS context for broker connections (daemon and ``tail``): verification on by default,
and the check of the TLS files a config names (:func:`check_tls_files`)."""

from __future__ import annotations

import logging
import re
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from daemon.mqtt.secrets import SecretError, check_secret_file
from daemon.mqtt.settings import TlsSettings

log = logging.getLogger(__name__)


def tls_context(tls: TlsSettings) -> ssl.SSLContext:
    """Client context: TLS 1.2+, the CA file (or the system store), optional client
    certificate; certificate and host name verification unless ``tls.verify`` is false."""
    context = ssl.create_default_context(
        ssl.Purpose.SERVER_AUTH, cafile=str(tls.ca_file) if tls.ca_file else None
    )
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if tls.cert_file is not None and tls.key_file is not None:
        context.load_cert_chain(str(tls.cert_file), str(tls.key_file))
    if not tls.verify:
        log.warning("TLS certificate verification is OFF for the broker connection (tls.verify=false)")
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


@dataclass(frozen=True, slots=True)
class TlsFileProblem:
    """One TLS file the broker connection could not use; ``key`` is its ``broker.tls`` key."""

    key: Literal["ca_file", "cert_file", "key_file"]
    path: Path
    message: str
    dated: bool = False
    """Outside its validity dates by this PC's clock: may mend itself (a clock set wrong at
    boot), so ``run`` keeps going with it (:func:`check_tls_dates`); structural problems
    (missing, not PEM, key mismatch) never mend and stay configuration errors."""

    def __str__(self) -> str:
        return f"broker.tls.{self.key}: {self.path}: {self.message}"


def check_tls_files(tls: TlsSettings) -> list[TlsFileProblem]:
    """Every problem of the TLS files ``tls`` names, found by loading them as :func:`tls_context` does.

    Called while the config is validated (before the state directory is touched), so a
    missing, unreadable or non-PEM file, a CA file without a certificate, a client key that
    is encrypted, open to others (:func:`daemon.mqtt.secrets.check_secret_file`) or not the
    certificate's, and a client certificate outside its validity period are configuration
    errors, not a connection that fails forever. Nothing is checked when TLS is off.
    """
    if not tls.enabled:
        return []
    problems: list[TlsFileProblem] = []
    if tls.ca_file is not None:
        problems.extend(_check_ca_file(tls.ca_file))
    if tls.cert_file is not None and tls.key_file is not None:
        cert_problems = _check_client_certificate(tls.cert_file)
        key_problems = _check_client_key(tls.key_file)
        problems.extend(cert_problems + key_problems)
        if not cert_problems and not key_problems:
            problems.extend(_check_pair(tls.cert_file, tls.key_file))
    return problems


def check_tls_dates(tls: TlsSettings) -> list[TlsFileProblem]:
    """The date problems of :func:`check_tls_files` only (what ``run`` watches at runtime)."""
    return [problem for problem in check_tls_files(tls) if problem.dated]


def _read(key: Literal["ca_file", "cert_file", "key_file"], path: Path) -> str | TlsFileProblem:
    """The file's text (PEM is ASCII), or the problem reading it."""
    try:
        if not path.exists():
            return TlsFileProblem(key, path, "file not found")
        if not path.is_file():
            return TlsFileProblem(key, path, "not a regular file")
        return path.read_bytes().decode("latin-1")
    except OSError as exc:
        return TlsFileProblem(key, path, f"cannot read: {exc.strerror or exc}")


def _check_ca_file(path: Path) -> list[TlsFileProblem]:
    unreadable = _read("ca_file", path)
    if isinstance(unreadable, TlsFileProblem):
        return [unreadable]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.load_verify_locations(cafile=str(path))
    except (ssl.SSLError, OSError, ValueError):
        return [TlsFileProblem("ca_file", path, "not a PEM certificate (no certificate found in it)")]
    stats = context.cert_store_stats()
    if stats["x509"] == 0:
        return [TlsFileProblem("ca_file", path, "holds no certificate (only revocation lists)")]
    listed = context.get_ca_certs()
    now = time.time()
    if len(listed) == stats["x509"] and not any(_in_validity(cert, now) for cert in listed):
        return [
            TlsFileProblem(
                "ca_file",
                path,
                "no certificate in it is valid now (expired or not yet valid): install the current CA",
                dated=True,
            )
        ]
    return []


def _in_validity(cert: Mapping[str, object], now: float) -> bool:
    not_before, not_after = cert.get("notBefore"), cert.get("notAfter")
    if not isinstance(not_before, str) or not isinstance(not_after, str):
        return True  # nothing to judge by: leave it to the handshake
    return ssl.cert_time_to_seconds(not_before) <= now <= ssl.cert_time_to_seconds(not_after)


_CERT_BLOCK = re.compile(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", re.DOTALL)


def _check_client_certificate(path: Path) -> list[TlsFileProblem]:
    text = _read("cert_file", path)
    if isinstance(text, TlsFileProblem):
        return [text]
    block = _CERT_BLOCK.search(text)
    if block is None:
        return [TlsFileProblem("cert_file", path, "not a PEM certificate")]
    try:
        not_before, not_after = certificate_validity(ssl.PEM_cert_to_DER_cert(block.group(0)))
    except ValueError:
        return [TlsFileProblem("cert_file", path, "not a PEM certificate (its first certificate is damaged)")]
    now = datetime.now(UTC)
    if now < not_before:
        return [
            TlsFileProblem(
                "cert_file",
                path,
                f"not valid before {not_before:%Y-%m-%d %H:%M:%S} UTC (check this PC's clock)",
                dated=True,
            )
        ]
    if now > not_after:
        return [
            TlsFileProblem(
                "cert_file",
                path,
                f"expired on {not_after:%Y-%m-%d %H:%M:%S} UTC: install a renewed certificate",
                dated=True,
            )
        ]
    return []


def _check_client_key(path: Path) -> list[TlsFileProblem]:
    text = _read("key_file", path)
    if isinstance(text, TlsFileProblem):
        return [text]
    if "PRIVATE KEY-----" not in text:
        return [TlsFileProblem("key_file", path, "not a PEM private key")]
    if "ENCRYPTED" in text:
        return [
            TlsFileProblem(
                "key_file",
                path,
                "encrypted with a passphrase, which the daemon cannot type: store it decrypted "
                f"(`openssl pkey -in {path} -out {path}.plain`, then give it the group and mode of the "
                "other secrets: `chgrp baccarat-edge` and `chmod 640`)",
            )
        ]
    try:
        check_secret_file(path)
    except SecretError as exc:
        return [TlsFileProblem("key_file", path, str(exc))]
    return []


def _check_pair(cert_file: Path, key_file: Path) -> list[TlsFileProblem]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.load_cert_chain(str(cert_file), str(key_file), password=_no_passphrase)
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            return [
                TlsFileProblem("key_file", key_file, f"not the private key of the certificate {cert_file}")
            ]
        return [
            TlsFileProblem("key_file", key_file, f"cannot be loaded with the certificate {cert_file}: {exc}")
        ]
    except (OSError, ValueError) as exc:
        return [
            TlsFileProblem("key_file", key_file, f"cannot be loaded with the certificate {cert_file}: {exc}")
        ]
    return []


def _no_passphrase() -> bytes:
    """Never prompt on a terminal for a key passphrase (the daemon has no terminal)."""
    raise ValueError("the key asks for a passphrase")


def certificate_validity(der: bytes) -> tuple[datetime, datetime]:
    """``(notBefore, notAfter)`` of a DER X.509 certificate, in UTC.

    The standard library loads certificates but does not decode a local one, so this walks
    the few DER items in front of the validity (RFC 5280 4.1): Certificate, tbsCertificate,
    optional [0] version, serialNumber, signature, issuer, then validity. Raises ValueError
    for bytes that are not such a certificate.
    """
    tag, certificate, _ = _der_item(der, 0)
    _expect(tag, _SEQUENCE)
    tag, tbs, _ = _der_item(certificate, 0)
    _expect(tag, _SEQUENCE)
    tag, _, offset = _der_item(tbs, 0)
    if tag != _VERSION:
        offset = 0
    for _ in range(3):  # serialNumber, signature, issuer
        _, _, offset = _der_item(tbs, offset)
    tag, validity, _ = _der_item(tbs, offset)
    _expect(tag, _SEQUENCE)
    first_tag, first, after = _der_item(validity, 0)
    second_tag, second, _ = _der_item(validity, after)
    return _der_time(first_tag, first), _der_time(second_tag, second)


_SEQUENCE = 0x30
_VERSION = 0xA0
_UTC_TIME = 0x17
_GENERALIZED_TIME = 0x18


def _der_item(data: bytes, offset: int) -> tuple[int, bytes, int]:
    """``(tag, contents, offset after it)`` of the DER item at ``offset``."""
    if offset + 2 > len(data):
        raise ValueError("truncated DER item")
    tag, length = data[offset], data[offset + 1]
    offset += 2
    if length & 0x80:
        count = length & 0x7F
        if not 1 <= count <= 4 or offset + count > len(data):
            raise ValueError("bad DER length")
        length = int.from_bytes(data[offset : offset + count], "big")
        offset += count
    end = offset + length
    if end > len(data):
        raise ValueError("truncated DER item")
    return tag, data[offset:end], end


def _expect(tag: int, wanted: int) -> None:
    if tag != wanted:
        raise ValueError(f"DER tag 0x{tag:02x} where 0x{wanted:02x} belongs")


def _der_time(tag: int, value: bytes) -> datetime:
    """A UTCTime (two-digit year, 50..99 = 19xx per RFC 5280) or GeneralizedTime, UTC."""
    text = value.decode("ascii", errors="replace")
    if tag == _UTC_TIME:
        text = ("19" if int(text[:2]) >= 50 else "20") + text
    elif tag != _GENERALIZED_TIME:
        raise ValueError(f"DER tag 0x{tag:02x} is not a time")
    return datetime.strptime(text, "%Y%m%d%H%M%SZ").replace(tzinfo=UTC)
