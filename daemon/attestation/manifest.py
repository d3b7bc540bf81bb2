"""The signed manifest of a package's installed files: build, sign, verify.

The manifest is canonical JSON (sorted keys, no spaces, UTF-8)::

    {"format": 1, "package": "baccarat-edge", "version": "0.9.0",
     "owned_dirs": ["/opt/baccarat-edge"],
     "unlisted": ["/opt/baccarat-edge/attestation/manifest.json", ...],
     "files": {"/opt/baccarat-edge/venv/bin/python": "symlink:/usr/bin/python3.11",
               "/usr/lib/systemd/system/baccarat-edge.service": "sha256:<64 hex>", ...}}

Every installed file is listed by its absolute path with its SHA-256 (a symbolic link by
its target: the file it points at may belong to another package). Under ``owned_dirs`` (the
package's own folders) a file the manifest does not list is an *extra* file; elsewhere
other packages' files live beside ours and are not looked at; ``unlisted`` names the files
left out on purpose (the manifest itself and its signature), not extra either. The package
ships no byte code and the daemon never reads any from its folders
(:mod:`~daemon.attestation.byte_code`): a ``.pyc`` under an owned folder is an extra file like
any other, and a staging tree holding one is refused. Configuration files a technician edits
are not listed.

The signature (file ``<manifest>.sig``) is the Ed25519 signature of the manifest's bytes,
base64. Ed25519 rather than the HMAC of the command channel: the table holds only the
public half, so nothing on the table can sign a manifest the check would accept.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

FORMAT = 1
BYTE_CODE_DIR = "__pycache__"
CHUNK = 1 << 20


class AttestationError(Exception):
    """The manifest, its signature or a key cannot be used (the message says which and why)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """The result of checking the installed files against a manifest."""

    digest: str
    """``sha256:<hex>`` of the manifest's bytes (what birth and health messages publish)."""
    changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    checked: int = 0
    """How many listed files were compared."""
    owned_dirs: list[str] = field(default_factory=list)
    """The manifest's ``owned_dirs`` (the folders no other package writes in)."""

    @property
    def ok(self) -> bool:
        return not (self.changed or self.missing or self.extra)

    def problems(self, limit: int = 20) -> list[str]:
        """One line per problem, at most ``limit`` (then how many more)."""
        lines = [
            *(f"changed: {p}" for p in self.changed),
            *(f"missing: {p}" for p in self.missing),
            *(f"extra: {p}" for p in self.extra),
        ]
        if len(lines) > limit:
            return [*lines[:limit], f"... and {len(lines) - limit} more"]
        return lines


def manifest_digest(manifest: bytes) -> str:
    """``sha256:<hex>`` of a manifest's bytes."""
    return "sha256:" + hashlib.sha256(manifest).hexdigest()


def file_entry(path: Path) -> str:
    """The manifest entry of one installed path: ``symlink:<target>`` or ``sha256:<hex>``.

    Raises ``OSError`` when it cannot be read."""
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        return "symlink:" + os.readlink(path)
    if not stat.S_ISREG(info.st_mode):
        return f"special:{stat.filemode(info.st_mode)}"
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def _walk(folder: Path) -> Iterable[Path]:
    """Every file and symbolic link under ``folder`` (links to folders are not followed)."""
    for dirpath, dirnames, filenames in os.walk(folder):
        base = Path(dirpath)
        for name in dirnames:
            if (base / name).is_symlink():
                yield base / name
        yield from (base / name for name in filenames)


def _is_byte_code(path: str) -> bool:
    parts = path.split("/")
    return len(parts) >= 2 and parts[-2] == BYTE_CODE_DIR and parts[-1].endswith(".pyc")


def build_manifest(
    stage: Path,
    *,
    package: str,
    version: str,
    install_root: str = "/",
    owned_dirs: Iterable[str] = (),
    exclude: Iterable[str] = (),
) -> bytes:
    """The manifest of every file under ``stage`` (the package's staging tree), as installed
    under ``install_root``; ``exclude``: installed paths left out (the manifest itself), or with
    a final ``/`` every path under that folder (``/etc/``: the conffiles a technician edits)."""
    skip = {e for e in exclude if not e.endswith("/")}
    skip_under = tuple(e for e in exclude if e.endswith("/"))
    root = install_root.rstrip("/")
    files: dict[str, str] = {}
    for path in _walk(stage):
        installed = f"{root}/{path.relative_to(stage).as_posix()}"
        if _is_byte_code(installed):
            raise AttestationError(f"{path}: byte code in the staging tree (the package ships none)")
        if installed not in skip and not installed.startswith(skip_under):
            files[installed] = file_entry(path)
    body = {
        "format": FORMAT,
        "package": package,
        "version": version,
        "owned_dirs": sorted(owned_dirs),
        "unlisted": sorted(skip),
        "files": files,
    }
    return canonical(body)


def canonical(body: Mapping[str, Any]) -> bytes:
    """The manifest's canonical bytes: sorted keys, no spaces, UTF-8, a final newline."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def sign_manifest(manifest: bytes, private_key_pem: bytes) -> bytes:
    """The ``.sig`` file's content: base64 of the Ed25519 signature of ``manifest``."""
    try:
        key = serialization.load_pem_private_key(private_key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise AttestationError(f"the build key is not a usable PEM private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise AttestationError("the build key is not an Ed25519 key (openssl genpkey -algorithm ed25519)")
    return base64.b64encode(key.sign(manifest)) + b"\n"


def load_public_key(pem: bytes, where: str) -> Ed25519PublicKey:
    """The Ed25519 public key of a PEM file's content (``where``: the file, for the message)."""
    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError) as exc:
        raise AttestationError(f"{where}: not a PEM public key ({exc})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise AttestationError(f"{where}: not an Ed25519 public key")
    return key


def check_signature(manifest: bytes, signature: bytes, key: Ed25519PublicKey) -> None:
    """Raise :class:`AttestationError` unless ``signature`` (the ``.sig`` content) signs ``manifest``."""
    try:
        raw = base64.b64decode(signature.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise AttestationError("the manifest signature is not base64") from None
    try:
        key.verify(raw, manifest)
    except InvalidSignature:
        raise AttestationError(
            "the manifest's signature does not verify with the configured public key "
            "(the manifest was altered, or signed with another build key)"
        ) from None


def parse_manifest(manifest: bytes) -> tuple[dict[str, str], list[str], set[str]]:
    """The ``files``, ``owned_dirs`` and ``unlisted`` of a (signature-checked) manifest."""
    try:
        body = json.loads(manifest)
    except ValueError as exc:
        raise AttestationError(f"the manifest is not JSON ({exc})") from None
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise AttestationError(f"the manifest is not of format {FORMAT}")
    files, owned, unlisted = body.get("files"), body.get("owned_dirs"), body.get("unlisted", [])
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise AttestationError("the manifest's files must map each path to its entry")
    if not isinstance(owned, list) or not all(isinstance(d, str) and d.startswith("/") for d in owned):
        raise AttestationError("the manifest's owned_dirs must be absolute paths")
    if not isinstance(unlisted, list) or not all(isinstance(p, str) for p in unlisted):
        raise AttestationError("the manifest's unlisted must be a list of paths")
    return {str(k): v for k, v in files.items()}, owned, set(unlisted)


def verify_installed(manifest: bytes, signature: bytes, key: Ed25519PublicKey) -> Verdict:
    """Check the signature, then every listed file, then look for extra files in the owned
    folders. Raises :class:`AttestationError` when the manifest itself cannot be trusted."""
    check_signature(manifest, signature, key)
    files, owned, unlisted = parse_manifest(manifest)
    changed: list[str] = []
    missing: list[str] = []
    for path, expected in sorted(files.items()):
        try:
            found = file_entry(Path(path))
        except FileNotFoundError:
            missing.append(path)
            continue
        except OSError as exc:
            changed.append(f"{path} (unreadable: {exc.strerror})")
            continue
        if found != expected:
            changed.append(path)
    extra = sorted(
        str(p)
        for folder in owned
        for p in _walk(Path(folder))
        if str(p) not in files and str(p) not in unlisted
    )
    return Verdict(manifest_digest(manifest), changed, missing, extra, checked=len(files), owned_dirs=owned)
