"""The TLS context for broker connections (daemon and ``tail``): verification on by default."""

from __future__ import annotations

import logging
import ssl

from daemon.mqtt.settings import TlsSettings

log = logging.getLogger(__name__)


def tls_context(tls: TlsSettings) -> ssl.SSLContext:
    """Client context: TLS 1.2+, the CA file (or the system store), optional client
    certificate; certificate and host name verification unless ``tls.verify`` is false."""
    context = ssl.create_default_context(
        ssl.Purpose.SERVER_AUTH, cafile=str(tls.ca_file) if tls.ca_file else None
    )
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if tls.cert_file is not None and tls.key_file is not None:
        context.load_cert_chain(str(tls.cert_file), str(tls.key_file))
    if not tls.verify:
        log.warning("TLS certificate verification is OFF for the broker connection (tls.verify=false)")
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context
