"""The MQTT client of the command-line tools ``monitor``, ``tail`` and ``command`` (``fleet``
shares its flags).

One set of connection flags, one resolution (flags over the daemon config named by
``--config``), one way to connect and subscribe, and one exit code for each kind of
failure, the same from every tool:

====  ===============================================================================
code  meaning
====  ===============================================================================
0     done
1     the tool's own "no": ``command``'s action was refused; ``tail`` saw a rejected or
      conflicting event or a gap it cannot explain
2     bad usage or configuration: a flag, the ``--config`` file, a secret file
3     the broker cannot be reached: no such host, connection refused or timed out, or
      no answer to the MQTT CONNECT
4     the broker refused the login or the subscription: bad user name or password, or
      not authorised
5     TLS failed: the TLS files cannot be used, or the handshake failed (certificate not
      trusted, expired, or not for this host name)
6     the broker refused the connection for another reason (the reason is printed)
7     ``command``: no reply from the table in time
8     ``command``: the reply's signature does not verify with the table's events key
====  ===============================================================================

The tools print one line on stderr naming the failure before they exit.
"""

from __future__ import annotations

import argparse
import ssl
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from daemon.mqtt.client_options import ClientOptions, build_client
from daemon.mqtt.secrets import Secret, SecretError, SecretSource, SigningKeySource
from daemon.mqtt.settings import TlsSettings
from daemon.mqtt.topics import TopicError, validate_table_id

if TYPE_CHECKING:
    import paho.mqtt.client as mqtt

CONNECT_TIMEOUT_S = 10.0
"""How long a tool waits for the broker's CONNACK and SUBACK."""

_LOGIN_REFUSED = frozenset({134, 135, 140})
"""CONNACK/SUBACK reason codes of a refused login: bad user name or password, not
authorised, bad authentication method (MQTT 3.1.1's codes 4 and 5 arrive as 134 and 135)."""


class ExitCode(IntEnum):
    """The exit status of the command-line MQTT tools (the table in the module docstring)."""

    OK = 0
    NO = 1
    USAGE = 2
    UNREACHABLE = 3
    NOT_AUTHORISED = 4
    TLS_FAILED = 5
    BROKER_REFUSED = 6
    NO_REPLY = 7
    REPLY_UNVERIFIED = 8


EXIT_CODES_HELP = (
    "exit status: 0 done; 1 refused (command) or not clean (tail); 2 bad usage or configuration; "
    "3 broker unreachable; 4 login or subscription refused; 5 TLS failed; "
    "6 connection refused for another reason; 7 no reply (command); 8 reply signature bad (command)"
)
"""The exit codes in one line, for each tool's ``--help``."""


class ClientFailure(Exception):
    """A tool cannot go on: its exit code and the line it prints."""

    def __init__(self, code: ExitCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def report(self, tool: str) -> int:
        """Print ``tool: message`` on stderr; the exit code."""
        print(f"{tool}: {self.message}", file=sys.stderr)
        return int(self.code)


def add_connection_arguments(
    parser: argparse.ArgumentParser, *, events_key: bool, table: bool = True
) -> None:
    """The broker, TLS, login and table flags (and the events key flags when ``events_key``;
    no ``--table`` for a tool that watches every table, ``table=False``)."""
    if table:
        parser.add_argument("--table", help="table id (default: table_id of --config)")
    parser.add_argument(
        "--broker",
        help="mqtt://host:port or mqtts://host:port (default: mqtt://localhost:1883, or --config's)",
    )
    parser.add_argument(
        "--config", type=Path, help="take broker, TLS, login, table (and events key) from this daemon config"
    )
    parser.add_argument("--ca-file", type=Path, help="CA bundle for mqtts:// (system store when unset)")
    parser.add_argument("--cert-file", type=Path, help="client certificate (PEM) for mqtts://")
    parser.add_argument("--key-file", type=Path, help="client key (PEM) for mqtts://")
    parser.add_argument("--username", help="broker user name")
    parser.add_argument(
        "--password-file", type=Path, help="file holding the broker password (never on the command line)"
    )
    parser.add_argument(
        "--password-env", metavar="VAR", help="environment variable holding the broker password"
    )
    if events_key:
        parser.add_argument("--events-key-file", type=Path, help="file holding the table's events HMAC key")
        parser.add_argument(
            "--events-key-env", metavar="VAR", help="environment variable holding the events key"
        )
    parser.add_argument("--mqtt", choices=["3.1.1", "5"], default="5", help="MQTT protocol version")


class _Resolved:
    """The options as they are worked out: defaults, then ``--config``, then the flags."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.host, self.port, self.use_tls, self.verify = "localhost", 1883, False, True
        self.ca_file: Path | None = args.ca_file
        self.cert_file: Path | None = args.cert_file
        self.key_file: Path | None = args.key_file
        self.username: str | None = args.username
        self.password: Secret | None = None
        self.events_key: Secret | None = None
        self.mqtt5 = args.mqtt == "5"
        self.table: str | None = getattr(args, "table", None)

    def take_config(self, path: Path) -> None:
        """What the daemon config names, under the flags already given. Raises ``ConfigError``."""
        from daemon.service.config import load_config

        cfg = load_config(path).config
        broker = cfg.broker
        self.host, self.port, self.use_tls = broker.host, broker.effective_port, broker.tls.enabled
        self.verify = broker.tls.verify
        self.ca_file = self.ca_file or broker.tls.ca_file
        self.cert_file = self.cert_file or broker.tls.cert_file
        self.key_file = self.key_file or broker.tls.key_file
        self.mqtt5 = broker.protocol.value == "mqtt5"
        self.table = self.table or cfg.table_id
        if broker.auth is not None and self.username is None:
            self.username = broker.auth.username
            if broker.auth.password is not None:
                self.password = broker.auth.password.load()
        if broker.signing.events_key is not None:
            self.events_key = broker.signing.events_key.load()

    def take_broker_url(self, text: str) -> str | None:
        """``--broker``; an error text when it is not an mqtt:// or mqtts:// URL with a port."""
        url = urlsplit(text if "://" in text else f"mqtt://{text}")
        if url.scheme not in ("mqtt", "mqtts"):
            return f"--broker {text!r}: the scheme must be mqtt:// or mqtts://"
        self.use_tls = url.scheme == "mqtts"
        self.host = url.hostname or "localhost"
        try:
            self.port = url.port or (8883 if self.use_tls else 1883)
        except ValueError:
            return f"--broker {text!r}: the port is not a number"
        return None

    def take_secret_flags(self, args: argparse.Namespace) -> None:
        """The password and events key flags. Raises ``SecretError``."""
        if args.password_file is not None:
            self.password = SecretSource(file=args.password_file).load()
        elif args.password_env is not None:
            self.password = SecretSource(env=args.password_env).load()
        if getattr(args, "events_key_file", None) is not None:
            self.events_key = SigningKeySource(file=args.events_key_file).load()
        elif getattr(args, "events_key_env", None) is not None:
            self.events_key = SigningKeySource(env=args.events_key_env).load()


def resolve(args: argparse.Namespace, *, table_required: bool = True) -> ClientOptions | str:
    """The options from the flags over ``--config``; an error text naming the problem.
    Without ``table_required`` the table may stay unset (``table`` is then "")."""
    from daemon.service.configfile import ConfigError

    found = _Resolved(args)
    try:
        if args.config is not None:
            found.take_config(args.config)
        if args.broker is not None:
            problem = found.take_broker_url(args.broker)
            if problem is not None:
                return problem
        found.take_secret_flags(args)
    except (ConfigError, SecretError) as exc:
        return str(exc)
    if not found.table and table_required:
        return "give --table ID (or --config FILE with a table_id)"
    try:
        if found.table or table_required:
            validate_table_id(found.table or "")
    except TopicError as exc:
        return str(exc)
    try:
        tls = (
            TlsSettings(
                ca_file=found.ca_file, cert_file=found.cert_file, key_file=found.key_file, verify=found.verify
            )
            if found.use_tls
            else None
        )
    except ValueError as exc:
        return f"TLS options: {exc}"
    return ClientOptions(
        host=found.host,
        port=found.port,
        tls=tls,
        username=found.username,
        password=found.password,
        mqtt5=found.mqtt5,
        table=found.table or "",
        events_key=found.events_key,
    )


def resolve_or_fail(args: argparse.Namespace, *, table_required: bool = True) -> ClientOptions:
    """:func:`resolve`; raises :class:`ClientFailure` (``USAGE``) with its error text."""
    options = resolve(args, table_required=table_required)
    if isinstance(options, str):
        raise ClientFailure(ExitCode.USAGE, options)
    return options


def new_client(options: ClientOptions, name: str, client_id: str | None = None) -> mqtt.Client:
    """:func:`daemon.mqtt.client_options.build_client`; raises :class:`ClientFailure`
    (``TLS_FAILED``) when the TLS files cannot be used."""
    try:
        return build_client(options, name, client_id)
    except (OSError, ValueError) as exc:
        raise ClientFailure(ExitCode.TLS_FAILED, f"TLS set-up failed: {exc}") from exc


def connect_failure(options: ClientOptions, exc: Exception) -> ClientFailure:
    """What an exception of paho's ``connect()`` means (a TLS handshake failure is an
    ``ssl.SSLError``, itself an ``OSError``)."""
    where = f"{options.host}:{options.port}"
    if isinstance(exc, ssl.SSLError):
        return ClientFailure(ExitCode.TLS_FAILED, f"TLS handshake with {where} failed: {exc}")
    return ClientFailure(ExitCode.UNREACHABLE, f"cannot reach the broker at {where}: {exc}")


def refusal(reason: Any, what: str) -> ClientFailure:
    """What a CONNACK or SUBACK failure reason code means."""
    code = getattr(reason, "value", None)
    if code in _LOGIN_REFUSED:
        return ClientFailure(ExitCode.NOT_AUTHORISED, f"the broker refused the {what}: {reason}")
    return ClientFailure(ExitCode.BROKER_REFUSED, f"the broker refused the {what}: {reason}")


class _Handshake:
    """The CONNACK and SUBACK of one connection, as the tool's thread waits for them."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.done = threading.Event()
        self.failure: ClientFailure | None = None

    def on_connect(self, client: mqtt.Client, _u: object, _f: object, reason: Any, _p: object = None) -> None:
        if reason.is_failure:
            self.failure = refusal(reason, "connection")
            self.done.set()
            return
        client.subscribe(self.topic, qos=1)  # again after each reconnect

    def on_subscribe(self, _c: mqtt.Client, _u: object, _mid: int, reasons: Any, _p: object = None) -> None:
        refused = [reason for reason in reasons if getattr(reason, "is_failure", False)]
        if refused and not self.done.is_set():
            self.failure = refusal(refused[0], f"subscription to {self.topic}")
        self.done.set()


@contextmanager
def subscribed(
    options: ClientOptions,
    *,
    name: str,
    topic: str,
    on_message: Callable[[str, bytes], None],
    timeout: float = CONNECT_TIMEOUT_S,
) -> Iterator[mqtt.Client]:
    """A client of ``options`` connected and subscribed to ``topic`` (SUBACK received), its
    network loop running, each message handed to ``on_message(topic, payload)``; disconnected
    on leaving. Raises :class:`ClientFailure` with the code of what went wrong."""
    client = new_client(options, name)
    handshake = _Handshake(topic)
    client.on_connect = handshake.on_connect
    client.on_subscribe = handshake.on_subscribe
    client.on_message = lambda _c, _u, message: on_message(message.topic, bytes(message.payload))
    try:
        client.connect(options.host, options.port, keepalive=30)
    except (OSError, ValueError) as exc:
        raise connect_failure(options, exc) from exc
    client.loop_start()
    try:
        if not handshake.done.wait(timeout):
            raise ClientFailure(
                ExitCode.UNREACHABLE,
                f"no answer from the broker at {options.host}:{options.port} within {timeout:g} s",
            )
        if handshake.failure is not None:
            raise handshake.failure
        yield client
    finally:
        client.disconnect()
        client.loop_stop()
