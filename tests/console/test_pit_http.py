"""The console's defects found by a pit supervisor and a penetration tester, over HTTP: each
test here failed on the console before its fix (the browser side is test_pit_browser.py)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import select
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daemon.console import passwords
from daemon.console.floor import MAX_TABLES
from daemon.console.login_throttle import MAX_FAILURES, MAX_UNKNOWN_NAMES, LoginThrottle
from daemon.console.server import ConsoleApp
from daemon.console.sessions import SessionStore
from daemon.mqtt.envelope import encode, signed_message
from daemon.mqtt.secrets import Secret
from daemon.service.table_view import SEEN_IDS, TableView
from tests.console.test_http import Browser, Where, _app
from tests.support.secrets import write_secret

EVENTS_KEY = "the tables' events key, long enough\n"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[ConsoleApp]:
    console = _app(tmp_path)
    console.start()
    try:
        yield console
    finally:
        console.stop()


def _raw(app: ConsoleApp, request: str) -> bytes:
    """One request on a fresh connection; the whole answer (the server closes or it is complete)."""
    sock = socket.create_connection(("127.0.0.1", app.port), timeout=10)
    sock.sendall(request.encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    sock.close()
    return data


# ---------------------------------------------------------------------- log-in lock
def test_a_flood_of_made_up_names_does_not_unlock_a_real_name(app: ConsoleApp) -> None:
    browser = Browser(app)
    for _ in range(MAX_FAILURES):
        assert browser.log_in("not the password") == 401
    assert browser.log_in() == 429
    # more made-up names than the throttle remembers (over HTTP each costs a decoy scrypt, so
    # the flood goes to the throttle the handler uses; its last one over HTTP too)
    for i in range(MAX_UNKNOWN_NAMES + 500):
        app.throttle.failed(f"made-up-{i}")
    assert Browser(app).log_in("wrong", "made-up-last") == 401
    assert browser.log_in() == 429  # the real name is still locked: its right password is refused
    assert app.throttle.remembered() <= MAX_UNKNOWN_NAMES + 1


def test_the_throttle_keeps_a_real_name_locked_whatever_else_fails() -> None:
    now = [0.0]
    throttle = LoginThrottle(lambda: now[0], known=["anna"])
    for _ in range(MAX_FAILURES):
        throttle.failed("anna")
    for i in range(3 * MAX_UNKNOWN_NAMES):
        throttle.failed(f"x{i}")
    assert throttle.locked("anna")
    assert throttle.remembered() == MAX_UNKNOWN_NAMES + 1
    for _ in range(MAX_FAILURES):
        throttle.failed("x-last")
    assert throttle.locked("x-last")  # a made-up name is locked as a real one is
    now[0] = 61.0
    assert not throttle.locked("anna")


def test_an_unknown_name_costs_the_same_scrypt_as_a_real_one(
    app: ConsoleApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer's timing does not tell which names exist: a log-in with a name nobody has
    runs one scrypt of the users' cost, as a wrong password for a real name does."""
    calls: list[int] = []
    real_scrypt = hashlib.scrypt

    def counting(password: bytes, **kwargs: Any) -> bytes:
        calls.append(int(kwargs["n"]))
        return real_scrypt(password, **kwargs)

    monkeypatch.setattr(hashlib, "scrypt", counting)
    assert Browser(app).log_in("wrong password", "anna") == 401
    assert Browser(app).log_in("wrong password", "nobody-by-this-name") == 401
    assert calls == [2**14, 2**14]


# ---------------------------------------------------------------------- the floor's cap
def test_forged_status_on_made_up_ids_neither_shows_nor_keeps_a_real_table_off(tmp_path: Path) -> None:
    key_file = write_secret(tmp_path / "events.key", EVENTS_KEY)
    app = _app(tmp_path, verify={"keys": [{"file": str(key_file)}]})
    app.start()
    try:
        forger = Secret(b"a key the tables do not have, 32b", "forger")
        for i in range(MAX_TABLES):
            table = f"FAKE-{i}"
            body = {"table_id": table, "status": "online", "ts": 1.0}
            app.floor.apply(f"baccarat/v1/{table}/status", encode(signed_message(body, forger)))
        app.floor.apply("baccarat/v1/FAKE-x/status", b'{"table_id": "FAKE-x", "status": "online"}')
        real = {"table_id": "T-NEW", "status": "online", "ts": 2.0}
        key = Secret(EVENTS_KEY.strip().encode(), "events")
        app.floor.apply("baccarat/v1/T-NEW/status", encode(signed_message(real, key)))
        browser = Browser(app)
        assert browser.log_in() == 303
        status, _h, body_bytes, _c = browser.request("GET", "/api/floor")
        floor = json.loads(body_bytes)
        assert status == 200
        assert [row["table_id"] for row in floor["tables"]] == ["T-NEW"]
        assert floor["tables"][0]["trust"] == "verified"
        assert floor["refused_unknown"] == MAX_TABLES + 1
    finally:
        app.stop()


# ---------------------------------------------------------------------- DNS rebinding
def test_a_host_name_the_console_does_not_serve_is_refused(app: ConsoleApp) -> None:
    """A page of evil.example whose name was re-pointed at the console sends its own Host and a
    matching Origin: the Origin check alone (Origin == Host) let it through."""
    evil = f"evil.example:{app.port}"
    form = "csrf=t&name=anna&password=x"
    answer = _raw(
        app,
        f"POST /login HTTP/1.1\r\nHost: {evil}\r\nOrigin: http://{evil}\r\nCookie: console_login=t\r\n"
        f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {len(form)}\r\n"
        f"Connection: close\r\n\r\n{form}",
    )
    assert answer.startswith(b"HTTP/1.1 421"), answer[:200]
    answer = _raw(app, f"GET /login HTTP/1.1\r\nHost: {evil}\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 421"), answer[:200]
    for host in (f"127.0.0.1:{app.port}", f"localhost:{app.port}", f"[::1]:{app.port}"):
        answer = _raw(app, f"GET /login HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200"), (host, answer[:200])


def test_the_console_names_in_the_settings_are_served(tmp_path: Path) -> None:
    app = _app(tmp_path, listen={"host": "127.0.0.1", "port": 0, "hostnames": ["pit-console.casino.local"]})
    app.start()
    try:
        host = f"PIT-console.casino.local:{app.port}"
        answer = _raw(app, f"GET /login HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        answer = _raw(app, "GET /login HTTP/1.1\r\nHost: other.casino.local\r\nConnection: close\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 421"), answer[:200]
    finally:
        app.stop()


# ---------------------------------------------------------------------- one write per response
def test_each_response_on_a_kept_alive_connection_arrives_in_one_piece(app: ConsoleApp) -> None:
    """Headers and body written apart wait for the client's delayed ACK (Nagle): the body came
    ~40 ms after the headers on every kept-alive request. Written at once, the first read of
    each response holds all of it."""
    sock = socket.create_connection(("127.0.0.1", app.port), timeout=10)
    try:
        for _ in range(6):
            sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{app.port}\r\n\r\n".encode())
            readable, _w, _x = select.select([sock], [], [], 10)
            assert readable
            first = sock.recv(65536)
            head, sep, body = first.partition(b"\r\n\r\n")
            length = re.search(rb"Content-Length: (\d+)", head)
            assert sep, first
            assert length is not None, first
            assert len(body) == int(length.group(1)), f"the body came apart from the headers: {first!r}"
    finally:
        sock.close()


# ---------------------------------------------------------------------- who stays logged in
def test_a_dealer_display_keeps_only_a_watch_only_session_alive(tmp_path: Path) -> None:
    app = _app(tmp_path)
    users = app.settings.users_file
    digest = passwords.hash_password("vic long password", n=2**14)
    users.write_text(users.read_text() + f"  - {{name: vic, password_hash: '{digest}', role: viewer}}\n")
    app.reload_users()
    now = [0.0]
    app.sessions = SessionStore(idle_s=60, max_s=6000, clock=lambda: now[0])
    app.start()
    try:
        anna, vic = Browser(app), Browser(app)
        assert anna.log_in() == 303
        assert vic.log_in("vic long password", "vic") == 303
        streams = {name: _stream(app, b, "/stream/dealer/T1") for name, b in (("anna", anna), ("vic", vic))}
        for step in range(1, 5):  # 4 x 20 s with the display open: past anna's 60 s idle limit
            time.sleep(1.3)  # each stream looks at its session at least once a second
            now[0] = 20.0 * step
            app.floor.wake_all()
        time.sleep(1.3)
        assert app.sessions.get(vic.cookies["console_session"], touch=False) is not None
        assert app.sessions.get(anna.cookies["console_session"], touch=False) is None
        received = _read_until(streams["anna"], b"event: expired")
        assert b"event: expired" in received
        for sock in streams.values():
            sock.close()
    finally:
        app.stop()


def _stream(app: ConsoleApp, browser: Browser, path: str, until: bytes = b"data: ") -> socket.socket:
    """A live stream of ``browser``'s session, read up to ``until``."""
    sock = socket.create_connection(("127.0.0.1", app.port), timeout=10)
    cookie = "; ".join(f"{k}={v}" for k, v in browser.cookies.items())
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookie}\r\n\r\n".encode())
    received = _read_until(sock, until)
    assert until in received, received
    _received[sock.fileno()] = received
    return sock


_received: dict[int, bytes] = {}


def _read_until(sock: socket.socket, marker: bytes) -> bytes:
    received = _received.pop(sock.fileno(), b"")
    while marker not in received:
        chunk = sock.recv(4096)
        if not chunk:
            break
        received += chunk
    return received


def test_one_stream_carries_several_views(app: ConsoleApp) -> None:
    browser = Browser(app)
    assert browser.log_in() == 303
    sock = _stream(app, browser, "/stream?v=floor&v=table%3AT1&v=dealer%3AT2&v=floor", b'"view": "dealer:T2"')
    received = _read_until(sock, b'"view": "dealer:T2"')
    sock.close()
    views = [json.loads(line[6:])["view"] for line in received.split(b"\n") if line.startswith(b"data: ")]
    assert views == ["floor", "table:T1", "dealer:T2"]
    assert browser.request("GET", "/stream?v=nonsense")[0] == 400
    assert browser.request("GET", "/stream")[0] == 400


# ---------------------------------------------------------------------- memory per event
def test_remembered_event_ids_are_bounded() -> None:
    view = TableView("T1")
    for seq in range(1, 3 * SEEN_IDS):
        env = {"event_id": f"e{seq}", "seq": seq, "kind": "card_outside_game", "data": {"counted": False}}
        view.apply("baccarat/v1/T1/events", json.dumps(env).encode())
    assert view.remembered_ids == SEEN_IDS
    recent = {
        "event_id": f"e{3 * SEEN_IDS - 5}",
        "seq": 3 * SEEN_IDS - 5,
        "kind": "card_outside_game",
        "data": {},
    }
    view.apply("baccarat/v1/T1/events", json.dumps(recent).encode())
    assert view.duplicates == 1  # a repeat of a recent event is still dropped


# ---------------------------------------------------------------------- console --demo
def test_the_demo_tells_the_round_it_holds_and_warns_of_nothing(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "console", "--demo", "--port", "0", "--speed", "20"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "default"},
    )
    try:
        assert process.stderr is not None
        lines: list[str] = []
        while not any("Ctrl-C" in line for line in lines):
            line = process.stderr.readline()
            assert line, "".join(lines)
            lines.append(line)
        text = "".join(lines)
        assert "Warning" not in text, text
        assert "after hand 3: round 4 is held" in text
        url = re.search(r"open (http://127\.0\.0\.1:\d+)/table/(\S+) ", text)
        password = re.search(r"log in as 'supervisor' with password '([^']+)'", text)
        assert url is not None
        assert password is not None
        held = _demo_holds(url.group(1), url.group(2), password.group(1))
        assert held == [4]
    finally:
        process.terminate()
        process.wait(20)


def _demo_holds(base: str, table: str, password: str) -> list[int]:
    """The held rounds the demo's console shows, once it shows one."""
    parts = urllib.parse.urlsplit(base)
    assert parts.port is not None
    browser = Browser(Where(parts.port))
    assert browser.log_in(password, "supervisor") == 303
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        status, _h, body, _c = browser.request("GET", f"/api/table/{table}")
        if status == 200 and (holds := json.loads(body)["holds"]):
            return [h["hand"] for h in holds]
        time.sleep(0.3)
    raise AssertionError("the demo never held a round")


def test_limits_and_host_names_in_the_settings_are_checked(tmp_path: Path) -> None:
    from pydantic import ValidationError

    for bad in (
        {"limits": {"T1": "25\u202e000"}},
        {"limits": {"T1": "x" * 41}},
        {"limits": {"a/b": "25"}},
        {"listen": {"hostnames": ["evil.example/x"]}},
        {"listen": {"hostnames": ["a b"]}},
    ):
        with pytest.raises(ValidationError):
            _app(tmp_path, **bad)
    app = _app(tmp_path, limits={"T1": "25 - 5,000"}, listen={"hostnames": ["Pit.Local"]})
    assert app.settings.limits == {"T1": "25 - 5,000"}
    assert app.settings.listen.hostnames == ("pit.local",)
