"""A throw-away Debian 12 root for the package test: a cached ``debootstrap`` and a chroot.

``debootstrap --variant=minbase bookworm`` takes minutes and downloads ~40 MB, so its result
is kept as a tar file outside the repository, keyed by the ISO week (the cached package lists
then never lag the mirror by more than a week; bookworm's main suite changes only at point
releases). The ``.deb`` files apt downloads into a root (python3.11, systemd, ...) are kept
beside it and handed to the next root, so a run after the first downloads nothing.

Commands run in the root under ``unshare --mount --pid --fork --mount-proc`` + ``chroot``: the
root gets its own /proc, every process started in it dies with the call, and the mounts
vanish with the namespace even if the test is interrupted. The network namespace is the
host's, so the root reaches the test's broker on 127.0.0.1.
"""

from __future__ import annotations

import datetime
import fcntl
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

SUITE = "bookworm"
MIRROR = os.environ.get("BACCARAT_EDGE_DEBIAN_MIRROR", "http://deb.debian.org/debian")
PATH_IN_ROOT = "/usr/sbin:/usr/bin:/sbin:/bin"


def cache_dir() -> Path:
    """Where the debootstrap tar file, the apt archives and the wheel cache live."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "baccarat-edge"


def require_tools(*names: str) -> dict[str, str]:
    """The absolute path of every tool, or an AssertionError naming the missing ones."""
    found = {name: shutil.which(name) for name in names}
    missing = sorted(name for name, path in found.items() if path is None)
    assert not missing, f"missing {', '.join(missing)}: run .ci/system-deps (apt-get install)"
    return {name: path for name, path in found.items() if path is not None}


def _week_key(today: datetime.date) -> str:
    year, week, _ = today.isocalendar()
    return f"{year}-W{week:02d}"


def root_tarball(today: datetime.date | None = None) -> Path:
    """This week's minbase root as a tar file, made (once, under a lock) when missing."""
    folder = cache_dir() / "debian12"
    folder.mkdir(parents=True, exist_ok=True)
    tarball = folder / f"{SUITE}-minbase-{_week_key(today or datetime.date.today())}.tar"
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test run may be making the same file
        if tarball.exists():
            return tarball
        work = folder / f".debootstrap-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        try:
            made = subprocess.run(
                ["debootstrap", "--variant=minbase", SUITE, str(work), MIRROR],
                capture_output=True,
                text=True,
                timeout=1200,
            )
            assert made.returncode == 0, f"debootstrap failed:\n{made.stdout[-3000:]}\n{made.stderr[-3000:]}"
            partial = tarball.with_suffix(".tar.partial")
            subprocess.run(["tar", "--numeric-owner", "-C", str(work), "-cf", str(partial), "."], check=True)
            os.replace(partial, tarball)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        for old in folder.glob(f"{SUITE}-minbase-*.tar"):
            if old != tarball:
                old.unlink()
        return tarball


def unpack_root(dest: Path) -> Path:
    """A fresh root in ``dest`` from the cached tar file, with the cached apt archives in it."""
    dest.mkdir(parents=True)
    subprocess.run(["tar", "--numeric-owner", "-C", str(dest), "-xf", str(root_tarball())], check=True)
    archives = cache_dir() / "debian12" / "apt-archives"
    if archives.is_dir():
        for deb in archives.glob("*.deb"):
            shutil.copy2(deb, dest / "var/cache/apt/archives" / deb.name)
    # The standard chroot guard: no service is ever started in the root by any package.
    policy = dest / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    return dest


def keep_apt_archives(root: Path) -> None:
    """Store the ``.deb`` files apt downloaded into ``root`` for the next root."""
    archives = cache_dir() / "debian12" / "apt-archives"
    archives.mkdir(parents=True, exist_ok=True)
    for deb in (root / "var/cache/apt/archives").glob("*.deb"):
        target = archives / deb.name
        if not target.exists():
            partial = archives / f".{deb.name}.{os.getpid()}"
            shutil.copy2(deb, partial)
            os.replace(partial, target)


def root_argv(
    root: Path,
    argv: Sequence[str],
    *,
    user: str | None = None,
    own_pids: bool = True,
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """The command line that runs ``argv`` inside ``root`` (as ``user`` with its groups, when
    given; ``env`` added to the minimal environment). ``own_pids=False`` keeps the host's pid
    namespace: without ``--fork`` every step execs the next, so the process started is the
    program itself and can be signalled."""
    as_user = (
        ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"] if user is not None else []
    )
    namespaces = ["--mount", "--pid", "--fork"] if own_pids else ["--mount"]
    return [
        "unshare",
        *namespaces,
        f"--mount-proc={root / 'proc'}",
        "chroot",
        str(root),
        "env",
        "-i",
        f"PATH={PATH_IN_ROOT}",
        "LANG=C.UTF-8",
        "DEBIAN_FRONTEND=noninteractive",
        *(f"{name}={value}" for name, value in (env or {}).items()),
        *as_user,
        *argv,
    ]


def run_in_root(
    root: Path,
    argv: Sequence[str],
    *,
    user: str | None = None,
    timeout: float = 600,
    env: Mapping[str, str] | None = None,
    stdin: str = "",
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` inside ``root`` to its end, its own pid namespace taking every child with it
    (``stdin``: what is typed to it)."""
    return subprocess.run(
        root_argv(root, argv, user=user, env=env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
