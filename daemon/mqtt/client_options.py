"""Connection options of the command-line MQTT clients (``tail``, ``monitor``, ``command``,
``fleet``) and their client factory, using :func:`daemon.mqtt.tls.tls_context` (TLS 1.2+,
verification on). The flags and their resolution over the daemon config are the tools' own
(``daemon/commands/_mqtt_client.py``)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from daemon.mqtt.secrets import Secret
from daemon.mqtt.settings import TlsSettings

if TYPE_CHECKING:
    import paho.mqtt.client as mqtt


@dataclass(frozen=True, kw_only=True)
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
