"""The console's HTTP routes (stdlib ``http.server``; one thread per request or stream).

Pages need a session; every POST needs the session's CSRF token (the log-in form its own
double-submitted one) and, when the browser sends one, an ``Origin`` of this console.
Live data goes out as server-sent events (``/stream/...``): the JSON view model each time
it changes, a comment every 15 s to keep the connection open.
"""

from __future__ import annotations

import ipaddress
import json
import re
import secrets
import select
import socket
import ssl
import sys
import threading
import time
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from daemon.console.actions import perform
from daemon.console.pages import app_page, login_page
from daemon.console.sessions import Session, csrf_ok
from daemon.console.users import PersonRole

if TYPE_CHECKING:
    from daemon.console.server import ConsoleApp

SESSION_COOKIE = "console_session"
LOGIN_COOKIE = "console_login"
KEEPALIVE_S = 15.0
STREAM_POLL_S = 1.0
FLOOR_EVERY_S = 0.25
"""The floor's model (every table) is rebuilt at most this often on one stream."""
"""How often an idle stream looks whether its client went away."""
MAX_BODY = 16_384
MAX_PANES = 6
"""Tables one ``/tables/A,B,...`` page shows side by side."""
MAX_VIEWS_PER_STREAM = 64
"""Views one stream may carry (a browser's pages: floor, tables, dealer displays)."""
STATIC_FILES = {
    "console.js": "text/javascript",
    "console-worker.js": "text/javascript",
    "reveal-check.js": "text/javascript",
    "console.css": "text/css",
}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # "no-referrer" makes form posts send Origin: null
    "Cache-Control": "no-store",
}


class ConsoleHttpServer(ThreadingHTTPServer):
    """The HTTP server carrying the console application; HTTPS with ``tls_context``.

    The TLS handshake runs in the connection's own thread (not in ``accept``), so one slow or
    broken client cannot stall the others."""

    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], app: ConsoleApp, tls_context: ssl.SSLContext | None = None
    ) -> None:
        self.app = app
        self.stopping = threading.Event()
        self.tls_context = tls_context
        super().__init__(address, ConsoleHandler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = self.socket.accept()
        if self.tls_context is not None:
            sock = self.tls_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that breaks off (or fails the handshake) is logged in one line, not a traceback."""
        self.app.log.info(
            "console_connection_error", client=str(client_address[0]), error=repr(sys.exc_info()[1])
        )


class ConsoleHandler(BaseHTTPRequestHandler):
    server: ConsoleHttpServer
    protocol_version = "HTTP/1.1"
    server_version = "baccarat-edge-console"
    sys_version = ""
    timeout = 30.0
    """Seconds a connection may stay silent (a stream writes at least every KEEPALIVE_S)."""

    wbufsize = 64 * 1024
    """Status line, headers and body leave in one write (``flush`` after the handler): written
    apart, Nagle's algorithm held the body back until the client's delayed ACK, ~40 ms per
    response on a kept-alive connection."""

    def setup(self) -> None:
        super().setup()
        # small writes (a stream's events) go out at once
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if isinstance(self.request, ssl.SSLSocket):
            self.request.do_handshake()

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged line by line (the console logs actions and logins)."""

    @property
    def app(self) -> ConsoleApp:
        return self.server.app

    # ------------------------------------------------------------------ plumbing
    def _send(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in {**SECURITY_HEADERS, **self._tls_headers(), **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _tls_headers(self) -> dict[str, str]:
        return {"Strict-Transport-Security": "max-age=31536000"} if self.app.tls else {}

    def _json(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(body).encode(), "application/json", headers)

    def _html(self, status: int, text: str, headers: dict[str, str] | None = None) -> None:
        self._send(status, text.encode(), "text/html; charset=utf-8", headers)

    def _redirect(self, where: str, headers: dict[str, str] | None = None) -> None:
        self._send(HTTPStatus.SEE_OTHER, b"", "text/plain", {"Location": where, **(headers or {})})

    def _cookies(self) -> dict[str, str]:
        try:
            jar = SimpleCookie(self.headers.get("Cookie", ""))
        except CookieError:
            return {}
        return {name: morsel.value for name, morsel in jar.items()}

    def _cookie(self, name: str, value: str, max_age: int | None = None) -> str:
        parts = [f"{name}={value}", "Path=/", "HttpOnly", "SameSite=Strict"]
        if self.app.tls:
            parts.append("Secure")
        if max_age is not None:
            parts.append(f"Max-Age={max_age}")
        return "; ".join(parts)

    def _session(self, touch: bool = True) -> Session | None:
        return self.app.sessions.get(self._cookies().get(SESSION_COOKIE), touch=touch)

    def _body(self) -> bytes | None:
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            return None
        if not 0 <= length <= MAX_BODY:
            return None
        return self.rfile.read(length)

    def _host_ok(self) -> bool:
        """The request's Host must name this console: an IP address, localhost, or one of
        ``listen.hostnames``. A page of another site whose DNS name was re-pointed at the
        console (DNS rebinding) names its own host and is refused, so the Origin check below
        cannot be fooled by a Host the attacker chose."""
        host = _host_name(self.headers.get("Host", ""))
        if host is None:
            return False
        if host == "localhost" or host in self.app.settings.listen.hostnames:
            return True
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return False
        return True

    def _refuse_host(self) -> None:
        self._json(HTTPStatus.MISDIRECTED_REQUEST,
                   {"error": "this console does not serve that host name (listen.hostnames)"})  # fmt: skip

    def _origin_ok(self) -> bool:
        """A browser's Origin header, when sent, must be this console itself (under a Host
        :meth:`_host_ok` accepted)."""
        origin = self.headers.get("Origin")
        if origin is None:
            return True
        host = self.headers.get("Host", "")
        scheme = "https" if self.app.tls else "http"
        return self._host_ok() and origin.lower() == f"{scheme}://{host}".lower()

    # ------------------------------------------------------------------ GET
    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if not self._host_ok():
            self._refuse_host()
            return
        if path == "/login":
            self._login_form()
        elif path.startswith("/static/"):
            self._static(path.removeprefix("/static/"))
        elif path == "/favicon.ico":
            self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon")
        elif path == "/healthz":
            self._json(200, {"broker_connected": self.app.feed.connected.is_set()})
        else:
            session = self._session()
            if session is None:
                if path == "/stream" or path.startswith(("/api/", "/stream/")):
                    self._json(
                        HTTPStatus.UNAUTHORIZED, {"error": "log in first (the session may have expired)"}
                    )
                else:
                    self._redirect("/login")
                return
            self._authenticated_get(path, session)

    def _authenticated_get(self, path: str, session: Session) -> None:
        user = self.app.user(session.user)
        if user is None:
            self.app.sessions.end(session.session_id)
            self._redirect("/login")
            return
        actions = sorted(user.role.actions)
        if path == "/":
            self._html(200, app_page("floor", session.csrf, user.name, user.role.value, actions))
        elif path.startswith(("/table/", "/dealer/")):
            view, _, raw = path[1:].partition("/")
            self._html(200, app_page(view, session.csrf, user.name, user.role.value, actions, unquote(raw)))
        elif path.startswith("/tables/"):
            ids = [t for t in unquote(path.removeprefix("/tables/")).split(",") if t][:MAX_PANES]
            self._html(
                200, app_page("tables", session.csrf, user.name, user.role.value, actions, ",".join(ids))
            )
        elif path == "/api/floor":
            self._json(200, self.app.floor.floor_model())
        elif path.startswith("/api/table/"):
            model = self.app.floor.table_model(unquote(path.removeprefix("/api/table/")))
            self._json(200 if model else 404, model or {"error": "no such table on the broker"})
        elif path == "/stream":
            self._stream(session, _views(urlsplit(self.path).query))
        elif path == "/stream/floor":
            self._stream(session, ["floor"])
        elif path.startswith(("/stream/table/", "/stream/dealer/")):
            kind, _, raw = path.removeprefix("/stream/").partition("/")
            self._stream(session, [f"{kind}:{unquote(raw)}"])
        else:
            self._json(404, {"error": "not found"})

    def _login_form(self, message: str = "", status: int = 200) -> None:
        # the same token while its cookie lives: a second tab or a stray request for /login
        # must not invalidate the form already shown
        token = self._cookies().get(LOGIN_COOKIE, "")
        if not re.fullmatch(r"[A-Za-z0-9_-]{32}", token):
            token = secrets.token_urlsafe(24)
        self._html(status, login_page(token, message), {"Set-Cookie": self._cookie(LOGIN_COOKIE, token, 600)})

    def _static(self, name: str) -> None:
        content_type = STATIC_FILES.get(name)
        if content_type is None:
            self._json(404, {"error": "not found"})
            return
        data = resources.files("daemon.console").joinpath("static", name).read_bytes()
        self._send(200, data, f"{content_type}; charset=utf-8")

    def _stream(self, session: Session, views: list[str] | None) -> None:
        if not views:
            self._json(
                400, {"error": f"name 1 to {MAX_VIEWS_PER_STREAM} views (v=floor, v=table:ID, v=dealer:ID)"}
            )
            return
        refusal = self.app.streams.acquire(session.session_id)
        if refusal is not None:
            status, text = refusal
            self._json(status, {"error": text}, {"Retry-After": "30"})
            return
        try:
            self._stream_models(session, views)
        finally:
            self.app.streams.release(session.session_id)

    def _client_gone(self) -> bool:
        """A stream's client sends nothing after its request: anything readable (its close,
        or stray bytes) ends the stream, so a closed page frees its place within STREAM_POLL_S."""
        readable, _w, _x = select.select([self.connection], [], [], 0)
        return bool(readable)

    def _view_model(self, view: str) -> dict[str, Any]:
        floor = self.app.floor
        kind, _, table_id = view.partition(":")
        model = floor.floor_model() if kind == "floor" else floor.table_model(table_id)
        if model is None:
            model = {"table_id": table_id, "missing": True}
        limits = self.app.settings.limits
        # the floor's lines and a table's model are shared by every stream: copied, not changed
        if kind == "floor":
            model["tables"] = [{**row, "limits": limits.get(row["table_id"])} for row in model["tables"]]
        else:
            model = {**model, "limits": limits.get(table_id)}
        model["broker_connected"] = self.app.feed.connected.is_set()
        return model

    def _stream_models(self, session: Session, views: list[str]) -> None:
        """One server-sent stream carrying every view a browser's pages show (its shared
        worker asks for them all at once: a browser opens at most six connections to a
        host, so one stream per page would block the seventh page and every action)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        for name, value in {**SECURITY_HEADERS, **self._tls_headers()}.items():
            self.send_header(name, value)
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        # watch-only screens (the viewer role: the dealer display, a pit screen) stay logged in
        # while a page is open; a person who may act is logged out when idle, page open or not
        user = self.app.user(session.user)
        touch = user is not None and user.role is PersonRole.VIEWER
        floor = self.app.floor
        seen = -1
        last: dict[str, bytes] = {}
        stamps: dict[str, tuple[int, bool]] = {}
        floor_built = 0.0
        floor_due = False
        last_write = time.monotonic()
        try:
            while not self.server.stopping.is_set() and not self._client_gone():
                if self.app.sessions.get(session.session_id, touch=touch) is None:
                    self.wfile.write(b"event: expired\ndata: {}\n\n")
                    self.wfile.flush()
                    return
                version = floor.version
                if version != seen or floor_due:
                    seen = version
                    floor_due = False
                    out = b""
                    connected = self.app.feed.connected.is_set()
                    for view in views:
                        kind, _, table_id = view.partition(":")
                        if kind == "floor":
                            # every table's card changes the floor: at most FLOOR_EVERY_S apart
                            if time.monotonic() - floor_built < FLOOR_EVERY_S and view in last:
                                floor_due = True  # built at the next look
                                continue
                            floor_built = time.monotonic()
                            stamp = (version, connected)
                        else:
                            stamp = (floor.stamp(table_id), connected)
                        if stamps.get(view) == stamp:
                            continue
                        stamps[view] = stamp
                        data = json.dumps(self._view_model(view)).encode()
                        if data != last.get(view):
                            last[view] = data
                            envelope = b'{"view": ' + json.dumps(view).encode() + b', "model": ' + data + b"}"
                            out += b"data: " + envelope + b"\n\n"
                    if out:
                        self.wfile.write(out)
                        self.wfile.flush()
                        last_write = time.monotonic()
                if time.monotonic() - last_write >= KEEPALIVE_S:
                    self.wfile.write(b": keepalive\n\n")
                    self.wfile.flush()
                    last_write = time.monotonic()
                wait = STREAM_POLL_S
                if floor_due:
                    wait = min(wait, max(0.0, FLOOR_EVERY_S - (time.monotonic() - floor_built)))
                floor.wait_change(seen, wait)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            return

    # ------------------------------------------------------------------ POST
    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        body = self._body()
        if body is None:
            self._json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": "bad or too large body"})
            return
        if not self._host_ok():
            self._refuse_host()
            return
        if not self._origin_ok():
            self._json(HTTPStatus.FORBIDDEN, {"error": "cross-site request refused"})
            return
        if path == "/login":
            self._login(body)
        elif path == "/logout":
            self._logout(body)
        elif path == "/api/command":
            self._command(body)
        else:
            self._json(404, {"error": "not found"})

    def _login(self, body: bytes) -> None:
        form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
        cookie = self._cookies().get(LOGIN_COOKIE)
        if not cookie or not secrets.compare_digest(cookie, form.get("csrf", "")):
            self._login_form("The log-in form expired: please try again.", HTTPStatus.FORBIDDEN)
            return
        name, password = form.get("name", ""), form.get("password", "")
        if self.app.throttle.locked(name):
            self._login_form("Too many failed log-ins: wait a minute.", HTTPStatus.TOO_MANY_REQUESTS)
            return
        user = self.app.check_password(name, password)
        if user is None:
            self.app.throttle.failed(name)
            self.app.log.warning("console_login_failed", user=name[:64])
            self._login_form("Unknown name or wrong password.", HTTPStatus.UNAUTHORIZED)
            return
        self.app.throttle.succeeded(name)
        session = self.app.sessions.create(user.name)
        self.app.log.info("console_login", user=user.name, role=user.role.value)
        self._redirect("/", {"Set-Cookie": self._cookie(SESSION_COOKIE, session.session_id)})

    def _logout(self, body: bytes) -> None:
        form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
        session = self._session(touch=False)
        if session is not None:
            if not csrf_ok(session, form.get("csrf")):
                self._json(HTTPStatus.FORBIDDEN, {"error": "missing or wrong CSRF token: reload the page"})
                return
            self.app.sessions.end(session.session_id)
        self._redirect("/login", {"Set-Cookie": self._cookie(SESSION_COOKIE, "", 0)})

    def _command(self, body: bytes) -> None:
        session = self._session()
        if session is None:
            self._json(HTTPStatus.UNAUTHORIZED, {"error": "log in first (the session may have expired)"})
            return
        if not csrf_ok(session, self.headers.get("X-CSRF-Token")):
            self._json(HTTPStatus.FORBIDDEN, {"error": "missing or wrong CSRF token: reload the page"})
            return
        user = self.app.user(session.user)
        if user is None:
            self._json(HTTPStatus.FORBIDDEN, {"error": "this user no longer exists"})
            return
        try:
            request = json.loads(body)
        except ValueError:
            self._json(400, {"error": "the body is not JSON"})
            return
        if not isinstance(request, dict):
            self._json(400, {"error": "the body is not a JSON object"})
            return
        result = perform(
            self.app.feed,
            user,
            request.get("table_id"),
            request.get("action"),
            request.get("args", {}),
            self.app.settings.reply_timeout_s,
        )
        self._json(result.http_status, result.body)


def _views(query: str) -> list[str] | None:
    """The views a ``/stream?v=...`` request names (``floor``, ``table:ID``, ``dealer:ID``),
    de-duplicated in order; None when one is malformed or there are too many."""
    views: list[str] = []
    for value in parse_qs(query, keep_blank_values=True).get("v", []):
        kind, sep, table_id = value.partition(":")
        if not (value == "floor" or (kind in ("table", "dealer") and sep and table_id)):
            return None
        if value not in views:
            views.append(value)
    return views if len(views) <= MAX_VIEWS_PER_STREAM else None


def _host_name(header: str) -> str | None:
    """The host of a ``Host`` header without its port, lower case (IPv6 without brackets);
    None when it is not one."""
    header = header.strip().lower()
    if header.startswith("["):
        host, sep, rest = header[1:].partition("]")
        if not sep or (rest and not re.fullmatch(r":[0-9]{1,5}", rest)):
            return None
        return host
    host, _, port = header.partition(":")
    if not host or (port and not port.isdigit()):
        return None
    return host
