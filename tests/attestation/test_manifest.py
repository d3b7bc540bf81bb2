"""The signed manifest: built from a staging tree, verified against the installed files."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from daemon.attestation.manifest import (
    AttestationError,
    build_manifest,
    load_public_key,
    manifest_digest,
    sign_manifest,
    verify_installed,
)
from tests.attestation.keys import new_key


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    """A small installed package: its own folder, a file elsewhere, a link, a conffile."""
    root = tmp_path / "root"
    (root / "opt/pkg/lib").mkdir(parents=True)
    (root / "opt/pkg/lib/code.py").write_text("print('dealt')\n")
    (root / "opt/pkg/README").write_text("read me\n")
    (root / "usr/bin").mkdir(parents=True)
    os.symlink(str(root / "opt/pkg/lib/code.py"), root / "usr/bin/pkg")
    (root / "etc/pkg").mkdir(parents=True)
    (root / "etc/pkg/table.yaml").write_text("edited: yes\n")
    (root / "usr/bin/other-package-tool").write_text("not ours\n")
    return root


def _manifest(root: Path) -> bytes:
    """The manifest of ``root`` as installed where it is (paths absolute under it)."""
    body = build_manifest(
        root,
        package="pkg",
        version="1.0",
        install_root=str(root),
        owned_dirs=[str(root / "opt/pkg")],
        exclude=[f"{root}/etc/", f"{root}/usr/bin/other-package-tool"],
    )
    return body


def test_a_manifest_lists_every_file_by_hash_and_links_by_target(installed: Path) -> None:
    files = json.loads(_manifest(installed))["files"]
    assert set(files) == {
        f"{installed}/opt/pkg/lib/code.py",
        f"{installed}/opt/pkg/README",
        f"{installed}/usr/bin/pkg",
    }
    assert files[f"{installed}/usr/bin/pkg"] == f"symlink:{installed}/opt/pkg/lib/code.py"
    assert files[f"{installed}/opt/pkg/README"].startswith("sha256:")
    assert _manifest(installed) == _manifest(installed)  # canonical: the same tree, the same bytes


def test_intact_files_pass(installed: Path) -> None:
    private, public = new_key()
    manifest = _manifest(installed)
    verdict = verify_installed(manifest, sign_manifest(manifest, private), load_public_key(public, "pub"))
    assert verdict.ok
    assert verdict.checked == 3
    assert verdict.digest == manifest_digest(manifest)
    assert verdict.problems() == []


def test_a_changed_file_a_missing_one_and_an_extra_one_are_each_named(installed: Path) -> None:
    private, public = new_key()
    manifest = _manifest(installed)
    signature = sign_manifest(manifest, private)
    (installed / "opt/pkg/lib/code.py").write_text("print('stacked')\n")
    (installed / "opt/pkg/README").unlink()
    (installed / "opt/pkg/lib/backdoor.py").write_text("")
    (installed / "opt/pkg/lib/__pycache__").mkdir()
    (installed / "opt/pkg/lib/__pycache__/code.cpython-311.pyc").write_bytes(b"planted byte code")
    (installed / "etc/pkg/table.yaml").write_text("edited again\n")  # a conffile: not listed
    verdict = verify_installed(manifest, signature, load_public_key(public, "pub"))
    assert not verdict.ok
    assert verdict.changed == [f"{installed}/opt/pkg/lib/code.py"]
    assert verdict.missing == [f"{installed}/opt/pkg/README"]
    assert verdict.extra == [
        f"{installed}/opt/pkg/lib/__pycache__/code.cpython-311.pyc",  # the package ships no byte code
        f"{installed}/opt/pkg/lib/backdoor.py",
    ]
    assert verdict.problems() == [
        f"changed: {installed}/opt/pkg/lib/code.py",
        f"missing: {installed}/opt/pkg/README",
        f"extra: {installed}/opt/pkg/lib/__pycache__/code.cpython-311.pyc",
        f"extra: {installed}/opt/pkg/lib/backdoor.py",
    ]
    assert verdict.owned_dirs == [f"{installed}/opt/pkg"]


def test_a_staging_tree_with_byte_code_is_refused(installed: Path) -> None:
    (installed / "opt/pkg/lib/__pycache__").mkdir()
    (installed / "opt/pkg/lib/__pycache__/code.cpython-311.pyc").write_bytes(b"compiled at build")
    with pytest.raises(AttestationError, match=r"code\.cpython-311\.pyc: byte code in the staging tree"):
        _manifest(installed)


def test_a_relinked_symlink_is_a_change(installed: Path) -> None:
    private, public = new_key()
    manifest = _manifest(installed)
    (installed / "usr/bin/pkg").unlink()
    os.symlink("/tmp/elsewhere", installed / "usr/bin/pkg")
    verdict = verify_installed(manifest, sign_manifest(manifest, private), load_public_key(public, "pub"))
    assert verdict.changed == [f"{installed}/usr/bin/pkg"]


def test_an_edited_manifest_fails_its_signature(installed: Path) -> None:
    private, public = new_key()
    manifest = _manifest(installed)
    signature = sign_manifest(manifest, private)
    (installed / "opt/pkg/lib/code.py").write_text("print('stacked')\n")
    # the attacker rewrites the manifest to match the changed file: the signature no longer does
    forged = _manifest(installed)
    with pytest.raises(AttestationError, match="does not verify with the configured public key"):
        verify_installed(forged, signature, load_public_key(public, "pub"))


def test_a_manifest_signed_with_another_key_fails(installed: Path) -> None:
    _, public = new_key()
    other_private, _ = new_key()
    manifest = _manifest(installed)
    with pytest.raises(AttestationError, match="signed with another build key"):
        verify_installed(manifest, sign_manifest(manifest, other_private), load_public_key(public, "pub"))


def test_a_damaged_signature_or_key_is_named(installed: Path) -> None:
    private, public = new_key()
    manifest = _manifest(installed)
    with pytest.raises(AttestationError, match="not base64"):
        verify_installed(manifest, b"not*base64!", load_public_key(public, "pub"))
    with pytest.raises(AttestationError, match=r"key\.pem: not a PEM public key"):
        load_public_key(b"hello", "key.pem")
    with pytest.raises(AttestationError, match=r"key\.pem: not a PEM public key"):
        load_public_key(private, "key.pem")  # the private half where the public one belongs
    with pytest.raises(AttestationError, match="not a usable PEM private key"):
        sign_manifest(manifest, public)


def test_the_build_command_signs_with_the_key_file_it_is_given(
    installed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from daemon.attestation import build

    private, public = new_key()
    key_file = tmp_path / "build.key"
    key_file.write_bytes(private)
    argv = ["--stage", str(installed), "--version", "1.0", "--manifest", "/opt/pkg/attestation/m.json"]
    argv += ["--owned", "/opt/pkg", "--exclude", "/etc/", "--public-key-out", str(tmp_path / "k.pub")]
    monkeypatch.delenv(build.KEY_ENV, raising=False)
    assert build.main(argv) == 2  # no key named: nothing written
    assert not (installed / "opt/pkg/attestation").exists()
    monkeypatch.setenv(build.KEY_ENV, str(key_file))
    assert build.main(argv) == 0
    manifest = (installed / "opt/pkg/attestation/m.json").read_bytes()
    signature = (installed / "opt/pkg/attestation/m.json.sig").read_bytes()
    assert (tmp_path / "k.pub").read_bytes() == public
    files = json.loads(manifest)["files"]
    assert "/opt/pkg/README" in files
    assert "/etc/pkg/table.yaml" not in files
    assert not any("attestation" in path for path in files)  # the manifest does not list itself
    load_public_key(public, "pub").verify(base64.b64decode(signature), manifest)


def test_the_manifest_and_its_signature_in_an_owned_folder_are_not_extra_files(installed: Path) -> None:
    private, public = new_key()
    folder = installed / "opt/pkg/attestation"
    folder.mkdir()
    manifest = build_manifest(
        installed,
        package="pkg",
        version="1.0",
        install_root=str(installed),
        owned_dirs=[str(installed / "opt/pkg")],
        exclude=[str(folder / "m.json"), str(folder / "m.json.sig"), f"{installed}/etc/"],
    )
    (folder / "m.json").write_bytes(manifest)
    (folder / "m.json.sig").write_bytes(sign_manifest(manifest, private))
    (folder / "m.json.bak").write_bytes(manifest)  # anything else there is
    verdict = verify_installed(manifest, (folder / "m.json.sig").read_bytes(), load_public_key(public, "pub"))
    assert verdict.extra == [str(folder / "m.json.bak")]
