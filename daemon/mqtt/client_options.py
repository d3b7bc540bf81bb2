"""Connection options of the command-line MQTT clients (``tail``, ``monitor``): one set of
flags, one resolution (flags over the daemon config), one client factory using
:func:`daemon.mqtt.tls.tls_context` (TLS 1.2+, verification on)."""

from __future__ import annotations

import argparse
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from daemon.mqtt.secrets import Secret, SecretError, SecretSource, SigningKeySource
from daemon.mqtt.settings import TlsSettings

if TYPE_CHECKING:
    import paho.mqtt.client as mqtt


@dataclass(frozen=True)
class ClientOptions:
    """Where and how a command-line client connects, and to which table."""

    host: str
    port: int
    tls: TlsSettings | None
    """None for plain MQTT."""
    username: str | None
    password: Secret | None
    mqtt5: bool
    table: str
    events_key: Secret | None


def add_connection_arguments(parser: argparse.ArgumentParser, events_key: bool, table: bool = True) -> None:
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


def resolve(args: argparse.Namespace, table_required: bool = True) -> ClientOptions | str:
    """The options from the flags over ``--config``; an error text naming the problem.
    Without ``table_required`` the table may stay unset (``table`` is then "")."""
    host, port, use_tls, verify = "localhost", 1883, False, True
    ca_file: Path | None = args.ca_file
    cert_file: Path | None = args.cert_file
    key_file: Path | None = args.key_file
    username: str | None = args.username
    password: Secret | None = None
    key: Secret | None = None
    mqtt5 = args.mqtt == "5"
    table: str | None = getattr(args, "table", None)
    try:
        if args.config is not None:
            from daemon.service.config import load_config
            from daemon.service.configfile import ConfigError

            try:
                cfg = load_config(args.config).config
            except ConfigError as exc:
                return str(exc)
            broker = cfg.broker
            host, port, use_tls = broker.host, broker.effective_port, broker.tls.enabled
            verify = broker.tls.verify
            ca_file = ca_file or broker.tls.ca_file
            cert_file = cert_file or broker.tls.cert_file
            key_file = key_file or broker.tls.key_file
            mqtt5 = broker.protocol.value == "mqtt5"
            table = table or cfg.table_id
            if broker.auth is not None and username is None:
                username = broker.auth.username
                if broker.auth.password is not None:
                    password = broker.auth.password.load()
            if broker.signing.events_key is not None:
                key = broker.signing.events_key.load()
        if args.broker is not None:
            url = urlsplit(args.broker if "://" in args.broker else f"mqtt://{args.broker}")
            if url.scheme not in ("mqtt", "mqtts"):
                return f"--broker {args.broker!r}: the scheme must be mqtt:// or mqtts://"
            use_tls = url.scheme == "mqtts"
            host = url.hostname or "localhost"
            try:
                port = url.port or (8883 if use_tls else 1883)
            except ValueError:
                return f"--broker {args.broker!r}: the port is not a number"
        if args.password_file is not None:
            password = SecretSource(file=args.password_file).load()
        elif args.password_env is not None:
            password = SecretSource(env=args.password_env).load()
        if getattr(args, "events_key_file", None) is not None:
            key = SigningKeySource(file=args.events_key_file).load()
        elif getattr(args, "events_key_env", None) is not None:
            key = SigningKeySource(env=args.events_key_env).load()
    except SecretError as exc:
        return str(exc)
    if not table and table_required:
        return "give --table ID (or --config FILE with a table_id)"
    from daemon.mqtt.topics import TopicError, validate_table_id

    try:
        if table or table_required:
            validate_table_id(table or "")
    except TopicError as exc:
        return str(exc)
    try:
        tls = (
            TlsSettings(ca_file=ca_file, cert_file=cert_file, key_file=key_file, verify=verify)
            if use_tls
            else None
        )
    except ValueError as exc:
        return f"TLS options: {exc}"
    return ClientOptions(host, port, tls, username, password, mqtt5, table or "", key)


def build_client(options: ClientOptions, name: str, client_id: str | None = None) -> mqtt.Client:
    """A paho client (``client_id``, or a random ``baccarat-edge-<name>-xxxx``) with TLS and login set.

    Raises ``OSError``/``ValueError`` (``ssl.SSLError`` is an ``OSError``) when the TLS files
    cannot be used."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    from daemon.mqtt.tls import tls_context

    client = mqtt.Client(
        CallbackAPIVersion.VERSION2,
        client_id=client_id or f"baccarat-edge-{name}-{secrets.token_hex(4)}",
        protocol=mqtt.MQTTv5 if options.mqtt5 else mqtt.MQTTv311,
    )
    if options.tls is not None:
        client.tls_set_context(tls_context(options.tls))
    if options.username:
        client.username_pw_set(options.username, options.password.reveal_text() if options.password else None)
    return client
