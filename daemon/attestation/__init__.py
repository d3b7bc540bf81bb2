"""Self-attestation: the package's signed manifest of its installed files and its check.

:mod:`~daemon.attestation.manifest` builds, signs and verifies the manifest (the package
build signs it with the build key's Ed25519 private half; the daemon verifies it with the
public half its config names); :mod:`~daemon.attestation.build` is the command the package
build runs.
"""
