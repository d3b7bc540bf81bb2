"""The package build's step: write the signed manifest into the staging tree.

Run by the package build (``systemd/debian/rules``) once every file is in place::

    ATTESTATION_KEY_FILE=/path/to/build.key python -m daemon.attestation.build \\
        --stage debian/baccarat-edge --version 0.9.0 --owned /opt/baccarat-edge \\
        --manifest /opt/baccarat-edge/attestation/manifest.json \\
        --exclude /etc/baccarat-edge/table.example.yaml --public-key-out build/key.pub

The private key's *path* comes from the environment (``ATTESTATION_KEY_FILE``), never its
content from the command line, and neither is ever printed: command lines and build logs
are readable by others.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from daemon.attestation.manifest import AttestationError, build_manifest, manifest_digest, sign_manifest

KEY_ENV = "ATTESTATION_KEY_FILE"
PACKAGE = "baccarat-edge"


def public_half(private_pem: bytes) -> bytes:
    """The PEM public key of an Ed25519 PEM private key (what the table's config names)."""
    key = serialization.load_pem_private_key(private_pem, password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise AttestationError("the build key is not an Ed25519 key")
    public = key.public_key()
    return public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m daemon.attestation.build", description=__doc__)
    parser.add_argument("--stage", type=Path, required=True, help="the package's staging tree")
    parser.add_argument("--version", required=True)
    parser.add_argument("--manifest", required=True, help="the manifest's installed path")
    parser.add_argument("--owned", action="append", default=[], help="a folder the package owns whole")
    parser.add_argument("--exclude", action="append", default=[], help="an installed path not listed")
    parser.add_argument("--public-key-out", type=Path, help="write the key's public half here")
    args = parser.parse_args(argv)
    key_file = os.environ.get(KEY_ENV)
    if not key_file:
        print(f"{KEY_ENV} is not set: the path of the build's Ed25519 private key", file=sys.stderr)
        return 2
    try:
        private_pem = Path(key_file).read_bytes()
        manifest_path = args.stage / args.manifest.lstrip("/")
        signature_path = manifest_path.with_name(manifest_path.name + ".sig")
        manifest = build_manifest(
            args.stage,
            package=PACKAGE,
            version=args.version,
            owned_dirs=args.owned,
            exclude=[*args.exclude, args.manifest, f"{args.manifest}.sig"],
        )
        signature = sign_manifest(manifest, private_pem)
        if args.public_key_out is not None:
            args.public_key_out.write_bytes(public_half(private_pem))
    except (OSError, AttestationError) as exc:
        print(f"attestation manifest not written: {exc}", file=sys.stderr)
        return 1
    manifest_path.parent.mkdir(parents=True, exist_ok=True)
    manifest_path.write_bytes(manifest)
    signature_path.write_bytes(signature)
    os.chmod(manifest_path, 0o644)
    os.chmod(signature_path, 0o644)
    print(f"attestation manifest {args.manifest}: {manifest_digest(manifest)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
