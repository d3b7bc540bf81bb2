"""The console's HTTP side without a browser: log-in, CSRF, Origin, throttling, static files,
session expiry on a stream, and HTTPS. The broker feed points at a closed port (no broker is
needed for these: the console keeps retrying in the background)."""

from __future__ import annotations

import http.client
import json
import re
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from daemon.console.login_throttle import MAX_FAILURES
from daemon.console.passwords import hash_password
from daemon.console.server import ConsoleApp
from daemon.console.sessions import SessionStore
from daemon.console.settings import ConsoleSettings
from tests.support.broker import free_port
from tests.support.secrets import write_secret

PASSWORD = "anna's long password"


def _app(tmp: Path, tls: dict[str, str] | None = None, **extra: Any) -> ConsoleApp:
    key = write_secret(tmp / "sup-anna.key", "a supervisor key of some length\n")
    digest = hash_password(PASSWORD, n=2**14)
    users = tmp / "users.yaml"
    users.write_text(
        f"users:\n  - {{name: anna, password_hash: '{digest}', role: supervisor, key_id: sup-anna, "
        f"key_file: {key}}}\n"
    )
    listen: dict[str, Any] = {"host": "127.0.0.1", "port": 0}
    if tls:
        listen["tls"] = tls
    settings = ConsoleSettings.model_validate(
        {
            "listen": listen,
            "broker": {"host": "127.0.0.1", "port": free_port(), "tls": {"enabled": False}},
            "users_file": str(users),
            **extra,
        }
    )
    return ConsoleApp(settings)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[ConsoleApp]:
    console = _app(tmp_path)
    console.start()
    try:
        yield console
    finally:
        console.stop()


@dataclass(frozen=True)
class Where:
    """A console by its port alone (one this test did not start, e.g. the demo's)."""

    port: int


class Browser:
    """A minimal cookie-keeping client that does not follow redirects."""

    def __init__(self, app: ConsoleApp | Where, context: ssl.SSLContext | None = None) -> None:
        self.app = app
        self.context = context
        self.cookies: dict[str, str] = {}

    def request(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes, list[str]]:
        if self.context is not None:
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                "127.0.0.1", self.app.port, context=self.context, timeout=10
            )
        else:
            conn = http.client.HTTPConnection("127.0.0.1", self.app.port, timeout=10)
        sent = dict(headers or {})
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        conn.request(method, path, body=body, headers=sent)
        response = conn.getresponse()
        data = response.read()
        set_cookies = response.headers.get_all("Set-Cookie") or []
        for line in set_cookies:
            name, _, rest = line.partition("=")
            self.cookies[name] = rest.split(";", 1)[0]
        conn.close()
        return response.status, dict(response.headers), data, set_cookies

    def log_in(self, password: str = PASSWORD, name: str = "anna") -> int:
        status, _h, page, _c = self.request("GET", "/login")
        assert status == 200
        token = re.search(rb'name="csrf" value="([^"]+)"', page)
        assert token is not None
        form = urllib.parse.urlencode({"csrf": token.group(1).decode(), "name": name, "password": password})
        status, _h, _b, _c = self.request(
            "POST", "/login", form.encode(), {"Content-Type": "application/x-www-form-urlencoded"}
        )
        return status

    def csrf(self) -> str:
        status, _h, page, _c = self.request("GET", "/")
        assert status == 200
        found = re.search(rb'name="csrf-token" content="([^"]+)"', page)
        assert found is not None
        return found.group(1).decode()


def test_pages_need_a_session_and_the_log_in_needs_its_form_token(app: ConsoleApp) -> None:
    browser = Browser(app)
    status, headers, _b, _c = browser.request("GET", "/")
    assert (status, headers["Location"]) == (303, "/login")
    assert browser.request("GET", "/api/floor")[0] == 401
    forged = urllib.parse.urlencode({"csrf": "made-up", "name": "anna", "password": PASSWORD}).encode()
    assert browser.request("POST", "/login", forged)[0] == 403
    assert browser.log_in("wrong password!") == 401
    assert browser.log_in() == 303
    session_cookie = next(c for c in browser.request("GET", "/login")[3] if c.startswith("console_login"))
    assert "HttpOnly" in session_cookie
    assert "SameSite=Strict" in session_cookie
    status, headers, page, _c = browser.request("GET", "/")
    assert status == 200
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY"
    assert b'<script src="/static/console.js">' in page
    assert b"<script>" not in page  # nothing inline: the policy would refuse it


def test_a_hostile_id_in_the_url_is_escaped_in_the_page(app: ConsoleApp) -> None:
    browser = Browser(app)
    assert browser.log_in() == 303
    status, _h, page, _c = browser.request("GET", "/table/%3Cscript%3Ealert(1)%3C%2Fscript%3E%22")
    assert status == 200
    assert b"<script>alert(1)" not in page
    assert b'data-table="&lt;script&gt;alert(1)&lt;/script&gt;&quot;"' in page


def test_commands_need_the_csrf_token_and_the_same_origin(app: ConsoleApp) -> None:
    browser = Browser(app)
    assert browser.log_in() == 303
    token = browser.csrf()
    body = json.dumps({"table_id": "T7", "action": "resolve_hold", "args": {}}).encode()
    status, _h, reply, _c = browser.request("POST", "/api/command", body)
    assert status == 403
    assert b"CSRF" in reply
    status, _h, reply, _c = browser.request(
        "POST", "/api/command", body, {"X-CSRF-Token": token, "Origin": "http://evil.example"}
    )
    assert (status, json.loads(reply)) == (403, {"error": "cross-site request refused"})
    bad_action = json.dumps({"table_id": "T7", "action": "launch_missiles", "args": {}}).encode()
    status, _h, reply, _c = browser.request("POST", "/api/command", bad_action, {"X-CSRF-Token": token})
    assert (status, json.loads(reply)) == (400, {"error": "unknown action 'launch_missiles'"})
    # logging out needs the token too
    browser.request("POST", "/logout", b"csrf=wrong")
    assert browser.request("GET", "/")[0] == 200
    browser.request("POST", "/logout", f"csrf={token}".encode())
    assert browser.request("GET", "/")[0] == 303


def test_failed_log_ins_lock_the_name(app: ConsoleApp) -> None:
    browser = Browser(app)
    for _ in range(MAX_FAILURES):
        assert browser.log_in("not the password") == 401
    assert browser.log_in() == 429  # even the right password, for a minute


def test_only_the_packaged_assets_are_served(app: ConsoleApp) -> None:
    browser = Browser(app)
    status, headers, script, _c = browser.request("GET", "/static/console.js")
    assert status == 200
    assert headers["Content-Type"].startswith("text/javascript")
    # the script builds nodes with textContent: no HTML sink anywhere
    assert re.findall(rb"\.innerHTML|\.outerHTML|insertAdjacentHTML|document\.write|\beval\(", script) == []
    for path in ("/static/../server.py", "/static/%2e%2e/server.py", "/static/README.md"):
        assert browser.request("GET", path)[0] == 404


def test_an_expired_session_ends_the_stream(app: ConsoleApp) -> None:
    now = [0.0]
    app.sessions = SessionStore(idle_s=60, max_s=600, clock=lambda: now[0])
    browser = Browser(app)
    assert browser.log_in() == 303
    sock = socket.create_connection(("127.0.0.1", app.port), timeout=10)
    cookie = "; ".join(f"{k}={v}" for k, v in browser.cookies.items())
    sock.sendall(f"GET /stream/floor HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookie}\r\n\r\n".encode())
    received = b""
    while b"data: " not in received:
        received += sock.recv(4096)
    assert b'"tables": []' in received
    now[0] = 61.0
    app.floor.wake_all()
    while b"event: expired" not in received:
        chunk = sock.recv(4096)
        assert chunk, f"the stream closed without saying why: {received!r}"
        received += chunk
    sock.close()


def test_https_with_the_console_certificate(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    app = _app(tmp_path, {"cert_file": str(cert), "key_file": str(key)})
    app.start()
    try:
        assert app.url.startswith("https://")
        # a plain-HTTP client that never handshakes does not stall the server for others
        idle = socket.create_connection(("127.0.0.1", app.port), timeout=10)
        browser = Browser(app, ssl.create_default_context(cafile=str(cert)))
        status, headers, _b, cookies = browser.request("GET", "/login")
        assert status == 200
        assert headers["Strict-Transport-Security"].startswith("max-age=")
        assert all("Secure" in c for c in cookies)
        assert browser.log_in() == 303
        idle.close()
        untrusted = Browser(app, ssl.create_default_context())
        with pytest.raises(ssl.SSLCertVerificationError):
            untrusted.request("GET", "/login")
    finally:
        app.stop()


def test_stopping_ends_open_streams(tmp_path: Path) -> None:
    app = _app(tmp_path)
    app.start()
    browser = Browser(app)
    assert browser.log_in() == 303
    sock = socket.create_connection(("127.0.0.1", app.port), timeout=10)
    cookie = "; ".join(f"{k}={v}" for k, v in browser.cookies.items())
    sock.sendall(f"GET /stream/floor HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookie}\r\n\r\n".encode())
    first = sock.recv(4096)
    assert first.startswith(b"HTTP/1.1 200")
    stopper = threading.Thread(target=app.stop)
    stopper.start()
    stopper.join(15)
    assert not stopper.is_alive()
    rest = b""
    while chunk := sock.recv(4096):
        rest += chunk
    sock.close()


def test_a_reread_user_file_logs_out_the_people_removed(tmp_path: Path) -> None:
    app = _app(tmp_path)
    app.start()
    try:
        browser = Browser(app)
        assert browser.log_in() == 303
        assert browser.request("GET", "/")[0] == 200
        users = app.settings.users_file
        digest = hash_password("vic long password", n=2**14)
        viewer = f"  - {{name: vic, password_hash: '{digest}', role: viewer}}"
        users.write_text("users:\n" + viewer + "\n")
        app.reload_users()
        assert browser.request("GET", "/")[0] == 303  # anna is gone, and so is her session
        assert Browser(app).log_in("vic long password", "vic") == 303
    finally:
        app.stop()


def _open_stream(app: ConsoleApp, browser: Browser, path: str = "/stream/floor") -> socket.socket:
    """A live stream of ``browser``'s session, its first model received."""
    sock = socket.create_connection(("127.0.0.1", app.port), timeout=10)
    cookie = "; ".join(f"{k}={v}" for k, v in browser.cookies.items())
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookie}\r\n\r\n".encode())
    received = b""
    while b"data: " not in received:
        chunk = sock.recv(4096)
        assert chunk, received
        received += chunk
    assert received.startswith(b"HTTP/1.1 200"), received
    return sock


def test_live_streams_are_bounded_per_session_and_in_all_and_freed_when_closed(tmp_path: Path) -> None:
    app = _app(tmp_path, max_streams_per_session=2, max_streams=3)
    app.start()
    try:
        anna, desk = Browser(app), Browser(app)  # one person at two desks: two sessions
        assert anna.log_in() == 303
        assert desk.log_in() == 303
        first = _open_stream(app, anna)
        kept = [_open_stream(app, anna, "/stream/table/T1")]  # referenced: not closed by the GC
        status, headers, body, _c = anna.request("GET", "/stream/dealer/T1")
        assert status == 429
        assert headers["Retry-After"] == "30"
        assert "already has 2 live pages open (at most 2)" in json.loads(body)["error"]
        kept.append(_open_stream(app, desk))
        status, _h, body, _c = desk.request("GET", "/stream/floor")  # desk has 1 of 2, the console 3 of 3
        assert status == 503
        assert "serves 3 live pages already" in json.loads(body)["error"]
        assert app.streams.open_count() == 3
        # a page closed frees its place: the stream's thread sees the client go and ends
        first.close()
        session = anna.cookies["console_session"]
        deadline = time.monotonic() + 20
        while app.streams.open_count(session) != 1:
            assert time.monotonic() < deadline, "the closed stream kept its place"
            time.sleep(0.05)
        kept.append(_open_stream(app, desk))
        assert app.streams.open_count() == 3
        for sock in kept:
            sock.close()
    finally:
        app.stop()
    assert app.streams.open_count() == 0
