"""The console application: settings, users, the broker feed, sessions and the HTTP server."""

from __future__ import annotations

import ssl
import threading
import time
from pathlib import Path

import structlog

from daemon.console.feed import BrokerFeed
from daemon.console.floor import Floor
from daemon.console.http_app import ConsoleHttpServer
from daemon.console.login_throttle import LoginThrottle
from daemon.console.passwords import decoy_hash, verify_password
from daemon.console.sessions import SessionStore
from daemon.console.settings import ConsoleSettings
from daemon.console.stream_limits import StreamLimits
from daemon.console.users import User, UserFile, load_users
from daemon.console.verification import MessageVerifier


class ConsoleApp:
    """Everything one running console holds. ``start()`` binds and serves in a thread."""

    def __init__(self, settings: ConsoleSettings, users: UserFile | None = None) -> None:
        self.settings = settings
        self.users = users if users is not None else load_users(settings.users_file)
        self.verifier = MessageVerifier.from_settings(settings.verify)
        self.floor = Floor(settings.tables, self.verifier)
        self.feed = BrokerFeed(settings.broker, self.floor, settings.tables, self.verifier)
        self.streams = StreamLimits(settings.max_streams_per_session, settings.max_streams)
        self.sessions = SessionStore(settings.session_idle_s, settings.session_max_s, time.monotonic)
        self.throttle = LoginThrottle(time.monotonic, (u.name for u in self.users.users))
        self.decoy_hash = decoy_hash([u.password_hash for u in self.users.users])
        self.log = structlog.get_logger("baccarat_edge.console")
        self.tls = settings.listen.tls is not None
        self._http: ConsoleHttpServer | None = None
        self._thread: threading.Thread | None = None

    def user(self, name: str) -> User | None:
        return self.users.find(name)

    def check_password(self, name: str, password: str) -> User | None:
        """The user when ``password`` is theirs, else None. A name nobody has is checked against
        a decoy hash of the same cost: the answer takes as long either way."""
        user = self.users.find(name)
        ok = verify_password(password, user.password_hash if user is not None else self.decoy_hash)
        return user if ok and user is not None else None

    @property
    def port(self) -> int:
        assert self._http is not None, "not started"
        return int(self._http.server_address[1])

    @property
    def url(self) -> str:
        host = self.settings.listen.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    def start(self) -> None:
        """Connect to the broker and serve HTTP(S) in a background thread."""
        listen = self.settings.listen
        context = None
        if listen.tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.load_cert_chain(listen.tls.cert_file, listen.tls.key_file)
        self._http = ConsoleHttpServer((listen.host, listen.port), self, context)
        self.feed.start()
        self._thread = threading.Thread(target=self._http.serve_forever, name="console-http", daemon=True)
        self._thread.start()
        self.log.info("console_started", url=self.url, users=len(self.users.users))

    def stop(self) -> None:
        if self._http is not None:
            self._http.stopping.set()
            self.floor.wake_all()
            self._http.shutdown()
            self._http.server_close()
        self.feed.stop()
        if self._thread is not None:
            self._thread.join(5)

    def reload_users(self, path: Path | None = None) -> None:
        """Read the user file again; people no longer in it are logged out."""
        users = load_users(path or self.settings.users_file)
        gone = {u.name for u in self.users.users} - {u.name for u in users.users}
        self.users = users
        self.throttle.set_known(u.name for u in users.users)
        self.decoy_hash = decoy_hash([u.password_hash for u in users.users])
        for name in gone:
            self.sessions.end_user(name)
