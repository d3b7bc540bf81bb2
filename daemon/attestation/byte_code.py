"""Where the running daemon may read byte code from: never from the attested files' folders.

The manifest lists source files, but Python runs the byte code it finds in ``__pycache__``
beside them when its header matches the source's size and time (or, for a checked-hash
``.pyc``, the source's hash): the code inside is not compared with the source, so a planted
``.pyc`` would run although every listed file matches. The package therefore ships no byte
code, and the systemd unit runs the daemon with ``PYTHONPYCACHEPREFIX`` in a fresh per-start
runtime folder (``sys.pycache_prefix``: Python then ignores every ``__pycache__`` folder of
the source tree) and with ``-B`` (the package's command line: it writes no byte code at all,
so nothing is ever found in the prefix either).

A ``.pyc`` under an owned folder is an extra file of the manifest check; this module adds what
only the running daemon can tell: that its interpreter reads byte code from somewhere safe.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

PREFIX_ENV = "PYTHONPYCACHEPREFIX"
LIMIT = 5


def byte_code_problems(pycache_prefix: str | None, owned_dirs: Iterable[str]) -> list[str]:
    """The problems of a daemon whose ``sys.pycache_prefix`` is ``pycache_prefix``, checking
    the package's ``owned_dirs``: each a ``byte code: ...`` line; empty when none."""
    owned = [PurePosixPath(d) for d in owned_dirs]
    if pycache_prefix is None:
        return [
            f"byte code: {PREFIX_ENV} is not set, so Python would run byte code found in the "
            "installed __pycache__ folders (the systemd unit sets it)"
        ]
    prefix = PurePosixPath(pycache_prefix)
    if not prefix.is_absolute():
        return [f"byte code: {PREFIX_ENV} {pycache_prefix} is not an absolute path"]
    for folder in owned:
        if prefix == folder or folder in prefix.parents:
            return [f"byte code: {PREFIX_ENV} {pycache_prefix} is inside the attested folder {folder}"]
    found = sorted(str(p) for folder in owned for p in _files(Path(prefix, *folder.parts[1:])))
    problems = [f"byte code: {p} (the daemon writes none: it came from elsewhere)" for p in found[:LIMIT]]
    if len(found) > LIMIT:
        problems.append(f"byte code: ... and {len(found) - LIMIT} more in {pycache_prefix}")
    return problems


def _files(folder: Path) -> Iterable[Path]:
    for dirpath, _dirnames, filenames in os.walk(folder):
        yield from (Path(dirpath, name) for name in filenames)
