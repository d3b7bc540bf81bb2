"""Run the official AsyncAPI parser (``@asyncapi/parser``, the JS reference) on the MQTT contract.

The npm project in ``tests/contract_parser/`` pins the parser (``package.json`` and its
committed ``package-lock.json``); ``validate.mjs`` there parses a contract, prints every
diagnostic with its severity, file, line and JSON pointer, and exits 1 on any error.

The pinned packages are installed with ``npm ci`` once per lock file, into
``<cache>/<hash of package.json and package-lock.json>/node_modules`` outside the repository,
so every checkout and worktree shares one install. The cache is
``$BACCARAT_CONTRACT_PARSER_CACHE``, else ``$XDG_CACHE_HOME/baccarat-edge/asyncapi-parser``
(``~/.cache/...``). Install scripts are not run (``--ignore-scripts``: the parser needs none).

Run directly to check the repository's contract:
``.venv/bin/python -m tests.mqtt.official_parser [path/to/asyncapi.yaml]``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PROJECT = REPO_ROOT / "tests" / "contract_parser"
CONTRACT = REPO_ROOT / "daemon" / "mqtt" / "contract" / "asyncapi.yaml"
INSTALL_TIMEOUT_S = 600
PARSE_TIMEOUT_S = 300


class ParserSetupError(RuntimeError):
    """node/npm is missing or the pinned parser could not be installed; the message says what to fix."""


@dataclass(frozen=True)
class ParserRun:
    """One run of ``validate.mjs``: its exit status and what it printed."""

    returncode: int
    output: str


def cache_root() -> Path:
    """Where installs are cached (see the module docstring)."""
    override = os.environ.get("BACCARAT_CONTRACT_PARSER_CACHE")
    if override:
        return Path(override)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "baccarat-edge" / "asyncapi-parser"


def lock_hash() -> str:
    """Hash of the pinned npm project: a new pin gets a fresh install."""
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((PROJECT / name).read_bytes())
    return digest.hexdigest()[:16]


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise ParserSetupError(
            f"{name} is not installed: the contract check runs the official AsyncAPI parser on "
            "Node.js. Install Node.js and npm (e.g. `apt-get install nodejs npm`, or "
            "`make system-deps`)."
        )
    return found


def _npm_ci(npm: str, work: Path) -> None:
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(PROJECT / name, work / name)
    command = [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
    try:
        ran = subprocess.run(
            command, cwd=work, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise ParserSetupError(f"`npm ci` did not finish within {INSTALL_TIMEOUT_S} s") from exc
    if ran.returncode != 0:
        raise ParserSetupError(f"`npm ci` failed (exit {ran.returncode}): {ran.stderr.strip()}")


def ensure_installed(root: Path | None = None) -> Path:
    """The ``node_modules`` folder of the pinned parser, installed with ``npm ci`` when missing."""
    npm = _tool("npm")
    root = root or cache_root()
    target = root / lock_hash()
    done = target / ".installed"
    if done.is_file():
        return target / "node_modules"
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test worker or checkout may be installing it
        if done.is_file():
            return target / "node_modules"
        work = Path(tempfile.mkdtemp(prefix=".install-", dir=root))
        try:
            _npm_ci(npm, work)
            (work / ".installed").touch()
            shutil.rmtree(target, ignore_errors=True)
            work.rename(target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return target / "node_modules"


def run_validator(contract: Path = CONTRACT, node_modules: Path | None = None) -> ParserRun:
    """Parse ``contract`` with the pinned parser; exit status 0 means no error-severity diagnostic."""
    node = _tool("node")
    modules = node_modules or ensure_installed()
    with tempfile.TemporaryDirectory() as work:
        # validate.mjs resolves @asyncapi/parser from its own folder: run a copy beside the install
        script = Path(work) / "validate.mjs"
        shutil.copyfile(PROJECT / "validate.mjs", script)
        (Path(work) / "node_modules").symlink_to(modules, target_is_directory=True)
        ran = subprocess.run(
            [node, str(script), str(contract)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=PARSE_TIMEOUT_S,
            check=False,
        )
    return ParserRun(ran.returncode, ran.stdout + ran.stderr)


if __name__ == "__main__":
    try:
        result = run_validator(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else CONTRACT)
    except ParserSetupError as exc:
        print(f"contract check: {exc}", file=sys.stderr)
        sys.exit(2)
    print(result.output, end="")
    sys.exit(result.returncode)
