"""The TLS files a config names are checked when it is loaded, as the broker connection loads
them: a missing, unreadable or non-PEM file, a CA file without a certificate, a client key
that is encrypted, open to others or not the certificate's, and a client certificate outside
its validity are configuration errors naming the key and the file; ``run`` exits 78 before
the state directory exists (except for dates: it runs and alerts) and ``check-config`` lists
them all with exit 1. Certificates are
made by config/mosquitto/make-pki.sh and the ``openssl`` binary."""

from __future__ import annotations

import json
import os
import shlex
import ssl
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from common.yamlfile import format_key_path
from daemon.alerts import AlertCode
from daemon.mqtt.settings import TlsSettings
from daemon.mqtt.tls import certificate_validity, check_tls_files, tls_context
from daemon.service.config import load_config
from daemon.service.configfile import ConfigError
from daemon.service.runner import Daemon
from tests.conftest import REPO_ROOT

MAKE_PKI = REPO_ROOT / "config" / "mosquitto" / "make-pki.sh"

CA_CONFIG = """\
[ca]
default_ca = d
[d]
database = index.txt
serial = serial
new_certs_dir = .
policy = p
default_md = sha256
default_crl_days = 30
unique_subject = no
[p]
commonName = supplied
"""


def _openssl(cwd: Path, command: str) -> None:
    subprocess.run(["openssl", *shlex.split(command)], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ca.crt, T1.crt/key, T2.crt/key (valid), expired.crt, future.crt (each with its .key),
    crl.pem (a CA file holding only a revocation list), old-ca.crt (an expired CA) and
    T1-encrypted.key."""
    out = tmp_path_factory.mktemp("pki")
    subprocess.run(
        ["bash", str(MAKE_PKI), str(out), "127.0.0.1", "T1", "T2"], check=True, capture_output=True
    )
    (out / "ca.cnf").write_text(CA_CONFIG)
    (out / "index.txt").write_text("")
    (out / "serial").write_text("1000\n")
    (out / "ca-ext.cnf").write_text("basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign\n")
    old_umask = os.umask(0o077)  # private keys 0600, as make-pki.sh makes them
    try:
        for name in ("expired", "future", "old-ca"):
            _openssl(out, f"req -newkey rsa:2048 -nodes -keyout {name}.key -out {name}.csr -subj /CN={name}")
        _openssl(
            out,
            "x509 -req -in expired.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days -1 -out expired.crt",
        )
        _openssl(
            out,
            "ca -batch -config ca.cnf -cert ca.crt -keyfile ca.key -in future.csr -out future.crt -notext "
            "-startdate 20990101000000Z -enddate 21000101000000Z",
        )
        _openssl(out, "ca -gencrl -config ca.cnf -cert ca.crt -keyfile ca.key -out crl.pem")
        _openssl(
            out, "x509 -req -in old-ca.csr -signkey old-ca.key -days -1 -extfile ca-ext.cnf -out old-ca.crt"
        )
        _openssl(out, "pkey -in T1.key -aes256 -passout pass:secret -out T1-encrypted.key")
    finally:
        os.umask(old_umask)
    return out


def _tls(pki: Path, **files: Path) -> TlsSettings:
    chosen = {"ca_file": pki / "ca.crt", "cert_file": pki / "T1.crt", "key_file": pki / "T1.key", **files}
    return TlsSettings.model_validate(chosen)


def _problems(tls: TlsSettings) -> dict[str, str]:
    return {problem.key: problem.message for problem in check_tls_files(tls)}


def test_a_good_set_of_files_passes_and_loads_into_a_real_context(pki: Path) -> None:
    tls = _tls(pki)
    assert check_tls_files(tls) == []
    context = tls_context(tls)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.cert_store_stats()["x509_ca"] == 1


def test_missing_files_are_named_with_their_key(tmp_path: Path, pki: Path) -> None:
    tls = _tls(pki, ca_file=tmp_path / "ca.pem", cert_file=tmp_path / "t1.crt", key_file=tmp_path / "t1.key")
    problems = check_tls_files(tls)
    assert [str(p) for p in problems] == [
        f"broker.tls.ca_file: {tmp_path / 'ca.pem'}: file not found",
        f"broker.tls.cert_file: {tmp_path / 't1.crt'}: file not found",
        f"broker.tls.key_file: {tmp_path / 't1.key'}: file not found",
    ]


def test_a_directory_is_not_a_tls_file(tmp_path: Path, pki: Path) -> None:
    assert _problems(_tls(pki, ca_file=tmp_path)) == {"ca_file": "not a regular file"}


def test_a_ca_file_that_is_not_pem_or_holds_no_certificate_is_refused(tmp_path: Path, pki: Path) -> None:
    garbage = tmp_path / "ca.pem"
    garbage.write_text("this is not a certificate\n")
    assert _problems(_tls(pki, ca_file=garbage)) == {
        "ca_file": "not a PEM certificate (no certificate found in it)"
    }
    # a private key where the CA belongs
    assert _problems(_tls(pki, ca_file=pki / "T2.key")) == {
        "ca_file": "not a PEM certificate (no certificate found in it)"
    }
    # a revocation list alone loads into the context but gives it nothing to trust
    assert _problems(_tls(pki, ca_file=pki / "crl.pem")) == {
        "ca_file": "holds no certificate (only revocation lists)"
    }


def test_a_ca_file_whose_every_certificate_expired_is_refused(tmp_path: Path, pki: Path) -> None:
    assert _problems(_tls(pki, ca_file=pki / "old-ca.crt")) == {
        "ca_file": "no certificate in it is valid now (expired or not yet valid): install the current CA"
    }
    # an expired CA beside a valid one is what a bundle looks like during a CA change: accepted
    bundle = tmp_path / "bundle.pem"
    bundle.write_text((pki / "old-ca.crt").read_text() + (pki / "ca.crt").read_text())
    assert check_tls_files(_tls(pki, ca_file=bundle)) == []


def test_a_client_certificate_or_key_that_is_not_pem_is_refused(tmp_path: Path, pki: Path) -> None:
    garbage = tmp_path / "garbage"
    garbage.write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n")
    garbage.chmod(0o600)
    assert _problems(_tls(pki, cert_file=garbage)) == {
        "cert_file": "not a PEM certificate (its first certificate is damaged)"
    }
    assert _problems(_tls(pki, cert_file=pki / "T1.key")) == {"cert_file": "not a PEM certificate"}
    assert _problems(_tls(pki, key_file=garbage)) == {"key_file": "not a PEM private key"}


def test_a_key_that_is_not_the_certificates_is_refused(pki: Path) -> None:
    assert _problems(_tls(pki, key_file=pki / "T2.key")) == {
        "key_file": f"not the private key of the certificate {pki / 'T1.crt'}"
    }
    # the same mismatch is what the real context reports
    with pytest.raises(ssl.SSLError, match="KEY_VALUES_MISMATCH"):
        tls_context(_tls(pki, key_file=pki / "T2.key"))


def test_an_encrypted_key_is_refused_without_prompting(pki: Path) -> None:
    key = pki / "T1-encrypted.key"
    message = _problems(_tls(pki, key_file=key))["key_file"]
    assert message.startswith("encrypted with a passphrase, which the daemon cannot type")
    assert f"openssl pkey -in {key}" in message


def test_a_client_key_open_to_others_is_refused_with_the_fix(tmp_path: Path, pki: Path) -> None:
    key = tmp_path / "T1.key"
    key.write_bytes((pki / "T1.key").read_bytes())
    key.chmod(0o644)
    message = _problems(_tls(pki, key_file=key))["key_file"]
    assert f"secret file {key} has mode 0644, open to every user" in message
    assert f"chmod 600 {key}" in message
    key.chmod(0o600)
    assert check_tls_files(_tls(pki, key_file=key)) == []


def test_an_expired_or_not_yet_valid_client_certificate_is_refused(pki: Path) -> None:
    expired = _problems(_tls(pki, cert_file=pki / "expired.crt", key_file=pki / "expired.key"))
    assert expired["cert_file"].startswith("expired on ")
    assert expired["cert_file"].endswith(" UTC: install a renewed certificate")
    future = _problems(_tls(pki, cert_file=pki / "future.crt", key_file=pki / "future.key"))
    assert future == {"cert_file": "not valid before 2099-01-01 00:00:00 UTC (check this PC's clock)"}


def test_certificate_validity_reads_the_dates_openssl_reads(pki: Path) -> None:
    for name in ("T1", "expired", "future", "ca", "old-ca"):
        dates = subprocess.run(
            ["openssl", "x509", "-in", str(pki / f"{name}.crt"), "-noout", "-startdate", "-enddate"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split("\n")
        expected = tuple(
            datetime.strptime(line.split("=", 1)[1], "%b %d %H:%M:%S %Y GMT").replace(tzinfo=UTC)
            for line in dates[:2]
        )
        der = ssl.PEM_cert_to_DER_cert((pki / f"{name}.crt").read_text())
        assert certificate_validity(der) == expected
    with pytest.raises(ValueError, match="DER"):
        certificate_validity(b"\x30\x03\x02\x01\x01")


def test_nothing_is_checked_when_tls_is_off(tmp_path: Path) -> None:
    tls = TlsSettings.model_validate({"enabled": False, "ca_file": str(tmp_path / "absent.pem")})
    assert check_tls_files(tls) == []


def _config(tmp_path: Path, tls: str) -> Path:
    path = tmp_path / "table.yaml"
    path.write_text(
        f"table_id: T7\nstate_dir: {tmp_path / 'state'}\n"
        "readers:\n  - driver: angel_eye\n    settings: {url: /dev/null}\n"
        f"broker:\n  host: 127.0.0.1\n  tls:\n{tls}"
    )
    return path


def test_load_config_reports_every_tls_problem_with_file_line_and_key(tmp_path: Path, pki: Path) -> None:
    path = _config(
        tmp_path,
        f"    ca_file: {tmp_path / 'missing-ca.pem'}\n"
        f"    cert_file: {pki / 'expired.crt'}\n"
        f"    key_file: {pki / 'T2.key'}\n",
    )
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    found = {format_key_path(p.path): p for p in info.value.problems}
    assert sorted(found) == ["broker.tls.ca_file", "broker.tls.cert_file"]
    ca = found["broker.tls.ca_file"]
    assert (ca.source, ca.line) == (str(path), 9)
    assert str(ca) == f"{path}:9: broker.tls.ca_file: {tmp_path / 'missing-ca.pem'}: file not found"
    assert found["broker.tls.cert_file"].line == 10
    assert "expired on" in found["broker.tls.cert_file"].message


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daemon.cli", *args], capture_output=True, text=True, timeout=60
    )


def test_run_exits_78_on_a_bad_tls_file_before_the_state_directory_exists(tmp_path: Path) -> None:
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("hello\n")
    path = _config(tmp_path, f"    ca_file: {not_pem}\n")
    result = _cli("run", "--config", str(path))
    assert result.returncode == 78, result.stderr
    assert f"{path}:9: broker.tls.ca_file: {not_pem}: not a PEM certificate" in result.stderr
    assert not (tmp_path / "state").exists()


def test_check_config_lists_tls_problems_with_the_other_errors(tmp_path: Path, pki: Path) -> None:
    path = _config(
        tmp_path,
        f"    ca_file: {pki / 'crl.pem'}\n"
        f"    cert_file: {pki / 'future.crt'}\n"
        f"    key_file: {pki / 'future.key'}\n",
    )
    path.write_text(path.read_text() + "  keepalive_s: 1\n")
    result = _cli("check-config", str(path), "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    problems = json.loads(result.stdout)["problems"]
    assert len(problems) == 3, problems
    assert any("broker.keepalive_s" in p for p in problems)
    assert any(f"broker.tls.ca_file: {pki / 'crl.pem'}: holds no certificate" in p for p in problems)
    assert any(f"broker.tls.cert_file: {pki / 'future.crt'}: not valid before 2099" in p for p in problems)


def test_run_loads_a_config_whose_certificate_is_only_outside_its_dates(tmp_path: Path, pki: Path) -> None:
    """A clock wrong at boot is no config error for ``run`` (check-config still says it)."""
    path = _config(
        tmp_path,
        f"    ca_file: {pki / 'ca.crt'}\n"
        f"    cert_file: {pki / 'future.crt'}\n"
        f"    key_file: {pki / 'future.key'}\n",
    )
    with pytest.raises(ConfigError, match="not valid before 2099"):
        load_config(path, environ={})
    assert load_config(path, environ={}, tls_dates=False).config.broker.tls.cert_file == pki / "future.crt"
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    broken = _config(tmp_path, f"    ca_file: {not_pem}\n")
    with pytest.raises(ConfigError, match="not a PEM certificate"):
        load_config(broken, environ={}, tls_dates=False)  # structural: still a config error


def test_the_daemon_runs_alerts_once_and_clears_when_the_certificate_is_in_its_dates(
    tmp_path: Path, pki: Path
) -> None:
    cert, key = tmp_path / "client.crt", tmp_path / "client.key"
    cert.write_bytes((pki / "future.crt").read_bytes())
    key.write_bytes((pki / "future.key").read_bytes())
    key.chmod(0o600)
    path = _config(tmp_path, f"    ca_file: {pki / 'ca.crt'}\n    cert_file: {cert}\n    key_file: {key}\n")
    daemon = Daemon(load_config(path, environ={}, tls_dates=False), config_path=path)
    daemon.start()
    try:
        assert daemon.tls_dates is not None
        assert daemon.journal is not None
        daemon.tls_dates.check(force=True)  # still wrong: no second alert
        # the clock is right again, as far as this certificate goes: a certificate in its dates
        cert.write_bytes((pki / "T1.crt").read_bytes())
        key.write_bytes((pki / "T1.key").read_bytes())
        daemon.tls_dates.check(force=True)
        alerts = [
            (e.kind, e.data["alert_id"], e.data.get("problems"))
            for e in daemon.journal.events(origin=None)
            if e.kind.startswith("alert") and e.data.get("code") == AlertCode.TLS_CERTIFICATE_DATES
        ]
    finally:
        daemon.stop()
    [(raised, raised_id, problems), (cleared, cleared_id, _)] = alerts
    assert (raised, cleared, cleared_id) == ("alert_raised", "alert_cleared", raised_id)
    assert problems == [
        f"broker.tls.cert_file: {cert}: not valid before 2099-01-01 00:00:00 UTC (check this PC's clock)"
    ]
