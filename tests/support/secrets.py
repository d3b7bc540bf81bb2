"""Secret files as the install guide makes them: readable and writable by their owner only."""

from __future__ import annotations

from pathlib import Path


def write_secret(path: Path, content: str | bytes) -> Path:
    """Write ``content`` to ``path`` with mode 0600 (the daemon refuses a secret others may read)."""
    if isinstance(content, str):
        path.write_text(content)
    else:
        path.write_bytes(content)
    path.chmod(0o600)
    return path
