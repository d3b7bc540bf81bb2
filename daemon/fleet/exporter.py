"""``fleet --serve-metrics ADDR``: the fleet view as a Prometheus exporter.

A :class:`~daemon.fleet.collect.LiveFleet` keeps every table's retained topics current; each
scrape of ``GET /metrics`` summarizes them at that moment (:mod:`daemon.fleet.metrics`).
Nothing is cached between scrapes and nothing blocks on the broker: a scrape reads the store.
``GET /healthz`` answers 200 while the broker connection is up, 503 otherwise. Binds to
loopback unless told otherwise: metrics name every table of the floor.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from daemon.fleet.collect import LiveFleet
from daemon.fleet.metrics import CONTENT_TYPE, exposition
from daemon.fleet.tables import Thresholds, worst_first


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``:PORT`` (loopback) -> (host, port); ValueError naming the problem."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"--serve-metrics {text!r}: give HOST:PORT, e.g. 127.0.0.1:9108")
    return (host.strip("[]") or "127.0.0.1"), int(port_text)


def scrape_body(live: LiveFleet, limits: Thresholds, clock: Callable[[], float] = time.time) -> str:
    """One scrape: every table's figures now."""
    summaries = worst_first(live.fleet.records(), clock(), limits)
    return exposition(summaries, live.messages, live.connected, live.fleet.ignored_topics)


class _ThreadingHTTPServerV6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class MetricsServer:
    """The HTTP side: ``/metrics`` and ``/healthz`` on a background thread."""

    def __init__(self, live: LiveFleet, address: tuple[str, int], limits: Thresholds) -> None:
        self.live = live
        self.limits = limits
        handler = self._handler_class()
        server_class = _ThreadingHTTPServerV6 if ":" in address[0] else ThreadingHTTPServer
        self.httpd = server_class(address, handler)
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="fleet-metrics", daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, scrape_body(server.live, server.limits), CONTENT_TYPE)
                elif path == "/healthz":
                    up = server.live.connected
                    self._send(200 if up else 503, "ok\n" if up else "broker disconnected\n")
                else:
                    self._send(404, "not found: /metrics, /healthz\n")

            def _send(self, code: int, body: str, content_type: str = "text/plain; charset=utf-8") -> None:
                data = body.encode("utf-8")
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                """Scrapes are not logged (one line per table per 15 s would drown the journal)."""

        return Handler
