"""The ``attestation:`` config section."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

INSTALLED_MANIFEST = Path("/opt/baccarat-edge/attestation/manifest.json")
"""Where the package installs its signed manifest (the signature beside it, ``.sig``)."""


class AttestationSettings(BaseModel):
    """The check of the installed files against the package's signed manifest."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    required: bool = Field(
        default=False,
        description="true: a missing manifest, signature or public key is an integrity failure (an "
        "installed table), and so is a daemon that could run byte code from the installed folders "
        "(PYTHONPYCACHEPREFIX unset: the systemd unit sets it); false: with no manifest the check "
        "reports not_configured (a source or demo run) and, with one, checks it all the same.",
    )
    manifest_file: Path = Field(
        default=INSTALLED_MANIFEST,
        description="The package's signed manifest of its installed files (SHA-256 each); its Ed25519 "
        "signature is the file beside it with .sig added.",
    )
    public_key_file: Path = Field(
        default=Path("/etc/baccarat-edge/attestation.pub"),
        description="The PEM public half of the build key that signed the manifest (installed by the "
        "technician from the vendor, not from the package).",
    )

    @field_validator("manifest_file", "public_key_file")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        if not value.is_absolute():
            raise ValueError(f"must be an absolute path (got {str(value)!r})")
        return value

    @property
    def signature_file(self) -> Path:
        """The manifest's signature: ``<manifest_file>.sig``."""
        return self.manifest_file.with_name(self.manifest_file.name + ".sig")
