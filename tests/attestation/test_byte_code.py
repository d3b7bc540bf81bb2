"""Byte code the daemon could run: a planted ``.pyc`` beside an attested source, and where the
running interpreter reads byte code from (``sys.pycache_prefix``)."""

from __future__ import annotations

import importlib.util
import marshal
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from daemon.attestation.byte_code import byte_code_problems
from daemon.attestation.manifest import build_manifest, sign_manifest
from daemon.attestation.settings import AttestationSettings
from daemon.journal.settings import JournalSettings
from daemon.journal.store import Journal
from daemon.service.attestation import Attestation, attestation_finding
from daemon.service.startup_checks import PublishGate
from tests.attestation.keys import new_key

PLANTED = "open(MARKER, 'w').close()\n"


def _plant(module: Path, marker: Path) -> Path:
    """A ``.pyc`` in ``module``'s ``__pycache__`` whose header matches the source (size, time)
    as a compile would write it, but whose code writes ``marker``: what Python runs unchecked."""
    source = module.stat()
    code = compile(f"MARKER = {str(marker)!r}\n" + PLANTED, str(module), "exec")
    header = importlib.util.MAGIC_NUMBER + b"\0\0\0\0"  # flags 0: checked by time and size
    header += int(source.st_mtime).to_bytes(4, "little") + (source.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    pyc = module.parent / "__pycache__" / f"{module.stem}.{sys.implementation.cache_tag}.pyc"
    pyc.parent.mkdir(exist_ok=True)
    pyc.write_bytes(header + marshal.dumps(code))
    return pyc


def _import(package: Path, env: dict[str, str], *flags: str) -> None:
    subprocess.run(
        [sys.executable, *flags, "-c", "import table_code"],
        cwd=package,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"} | env,
        check=True,
        timeout=60,
    )


def test_a_planted_pyc_runs_without_a_prefix_and_never_with_one(tmp_path: Path) -> None:
    package = tmp_path / "opt/pkg"
    package.mkdir(parents=True)
    (package / "table_code.py").write_text("SAFE = True\n")
    marker = tmp_path / "planted-code-ran"
    _plant(package / "table_code.py", marker)

    prefix = tmp_path / "run/pycache"
    _import(package, {"PYTHONPYCACHEPREFIX": str(prefix)}, "-B")  # as the unit runs the daemon
    assert not marker.exists()
    assert not prefix.exists()  # -B: nothing written there either

    _import(package, {}, "-B")  # the same without the prefix: the planted code runs
    assert marker.exists()


def test_the_interpreter_must_read_byte_code_outside_the_attested_folders(tmp_path: Path) -> None:
    owned = [str(tmp_path / "opt/pkg")]
    prefix = tmp_path / "run/pycache"
    assert byte_code_problems(str(prefix), owned) == []
    assert byte_code_problems(None, owned) == [
        "byte code: PYTHONPYCACHEPREFIX is not set, so Python would run byte code found in the "
        "installed __pycache__ folders (the systemd unit sets it)"
    ]
    assert byte_code_problems("pycache", owned) == [
        "byte code: PYTHONPYCACHEPREFIX pycache is not an absolute path"
    ]
    inside = f"{tmp_path}/opt/pkg/cache"
    assert byte_code_problems(inside, owned) == [
        f"byte code: PYTHONPYCACHEPREFIX {inside} is inside the attested folder {tmp_path}/opt/pkg"
    ]
    # The daemon runs with -B and writes none: byte code of the attested files there was put there.
    mirror = Path(prefix, *Path(owned[0]).parts[1:], "lib")
    mirror.mkdir(parents=True)
    (mirror / "code.cpython-311.pyc").write_bytes(b"prepared elsewhere")
    (prefix / "usr/lib/python3").mkdir(parents=True)
    (prefix / "usr/lib/python3/os.cpython-311.pyc").write_bytes(b"not ours to judge")
    assert byte_code_problems(str(prefix), owned) == [
        f"byte code: {mirror}/code.cpython-311.pyc (the daemon writes none: it came from elsewhere)"
    ]


def _required_package(tmp: Path) -> AttestationSettings:
    tree = tmp / "installed/opt/pkg"
    tree.mkdir(parents=True)
    (tree / "code.py").write_text("SAFE = True\n")
    private, public = new_key()
    manifest = build_manifest(
        tmp / "installed",
        package="pkg",
        version="1",
        install_root=str(tmp / "installed"),
        owned_dirs=[str(tree)],
    )
    (tmp / "manifest.json").write_bytes(manifest)
    (tmp / "manifest.json.sig").write_bytes(sign_manifest(manifest, private))
    (tmp / "build.pub").write_bytes(public)
    return AttestationSettings(
        required=True, manifest_file=tmp / "manifest.json", public_key_file=tmp / "build.pub"
    )


def test_a_daemon_without_the_prefix_fails_its_required_check_check_config_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _required_package(tmp_path)
    journal = Journal(JournalSettings(path=tmp_path / "journal.sqlite3"), "T7")
    try:
        monkeypatch.setattr(sys, "pycache_prefix", None)  # a unit edited to drop the setting
        attestation = Attestation(settings, journal, PublishGate(), clock=time.time, notify=lambda: None)
        assert not attestation.check_at_start()
        [problem] = attestation.health()["problems"]
        assert problem.startswith("byte code: PYTHONPYCACHEPREFIX is not set")
        assert attestation.alert_id is not None  # integrity_failed
        # check-config is no daemon: it runs no table code, the files alone are judged
        assert attestation_finding(settings).ok

        monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "run/pycache"))
        assert attestation.check() is False  # the alert stays open until a supervisor's attest
        assert attestation.health()["problems"] == []
        assert attestation.health()["status"] == "passed"
    finally:
        journal.close()
