"""A TCP proxy between a client and a real mosquitto that turns the broker's PUBACKs for
chosen PUBLISHes into failures (MQTT 5 reason codes).

mosquitto has no switch to refuse a publish *transiently* (quota exceeded, unspecified
error), so the publisher's retry path is tested with the real broker behind this proxy:
paho decodes a real PUBACK packet carrying the reason code, exactly as if the broker had
sent it. Only the reason code byte is changed; every other byte passes unchanged.
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import threading
import time
from collections.abc import Callable


def _read_packet(sock: socket.socket) -> bytes | None:
    """One whole MQTT control packet (fixed header included), or None at EOF."""
    first = _read_exact(sock, 1)
    if first is None:
        return None
    header = bytearray(first)
    length = 0
    multiplier = 1
    while True:
        byte = _read_exact(sock, 1)
        if byte is None:
            return None
        header += byte
        length += (byte[0] & 0x7F) * multiplier
        if not byte[0] & 0x80:
            break
        multiplier *= 128
    body = _read_exact(sock, length) if length else b""
    return None if body is None else bytes(header) + body


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        try:
            chunk = sock.recv(n - len(data))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _event_seq(rest: bytes) -> int | None:
    """The ``seq`` of an MQTT 5 PUBLISH's JSON payload (``rest``: properties + payload), if any."""
    length = 0
    multiplier = 1
    i = 0
    while True:  # the properties length, a variable byte integer
        length += (rest[i] & 0x7F) * multiplier
        multiplier *= 128
        i += 1
        if not rest[i - 1] & 0x80:
            break
    try:
        seq = json.loads(rest[i + length :]).get("seq")
    except (ValueError, AttributeError):
        return None
    return seq if isinstance(seq, int) else None


def _body_offset(packet: bytes) -> int:
    i = 1
    while packet[i] & 0x80:
        i += 1
    return i + 1


class PubackProxy:
    """Listens on ``port``; each connection is piped to ``127.0.0.1:target_port``.

    :meth:`fail_next` makes the next ``count`` PUBACKs for PUBLISHes whose topic satisfies
    ``topic_filter`` carry ``code`` instead of success; :meth:`refuse_seq` refuses the copies
    of one event (by its JSON ``seq``) a number of times, whatever else goes through.

    ``broker_latency_s`` delays every packet from the broker by that much (in order, without
    limiting throughput): a PUBACK then reaches the client well after the broker forwarded
    the message to its subscribers, a window in which a crash test can kill the client."""

    def __init__(self, target_port: int, broker_latency_s: float = 0.0) -> None:
        self.target_port = target_port
        self.broker_latency_s = broker_latency_s
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._fail_left = 0
        self._code = 0
        self._topic_filter: Callable[[str], bool] = lambda topic: True
        self._watched: set[int] = set()
        # packet id -> event seq of MQTT 5 event PUBLISHes, and seq -> (refusals left, code).
        self._seq_of: dict[int, int] = {}
        self._refuse: dict[int, tuple[int, int]] = {}
        self.failed = 0
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def fail_next(self, count: int, code: int, topic_filter: Callable[[str], bool]) -> None:
        with self._lock:
            self._fail_left = count
            self._code = code
            self._topic_filter = topic_filter

    def refuse_seq(self, seq: int, code: int, times: int) -> None:
        """Answer the next ``times`` PUBLISHes of the event with this ``seq`` with ``code``
        (MQTT 5 clients only: the payload is found after the properties)."""
        with self._lock:
            self._refuse[seq] = (times, code)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            broker = socket.create_connection(("127.0.0.1", self.target_port))
            self._sockets += [client, broker]
            threading.Thread(target=self._pipe, args=(client, broker, self._from_client), daemon=True).start()
            latency = self.broker_latency_s
            threading.Thread(
                target=self._pipe, args=(broker, client, self._from_broker, latency), daemon=True
            ).start()

    def _pipe(
        self,
        source: socket.socket,
        sink: socket.socket,
        rewrite: Callable[[bytes], bytes],
        latency: float = 0.0,
    ) -> None:
        delayed: queue.Queue[tuple[float, bytes] | None] | None = None
        if latency > 0:
            delayed = queue.Queue()
            threading.Thread(target=self._send_delayed, args=(delayed, source, sink), daemon=True).start()
        while True:
            packet = _read_packet(source)
            if packet is None:
                break
            if delayed is not None:
                delayed.put((time.monotonic() + latency, rewrite(packet)))
                continue
            try:
                sink.sendall(rewrite(packet))
            except OSError:
                break
        if delayed is not None:
            delayed.put(None)
            return  # the sender shuts both down once the delayed packets went out
        self._shutdown(source, sink)

    def _send_delayed(
        self, delayed: queue.Queue[tuple[float, bytes] | None], source: socket.socket, sink: socket.socket
    ) -> None:
        while (item := delayed.get()) is not None:
            due, packet = item
            time.sleep(max(0.0, due - time.monotonic()))
            try:
                sink.sendall(packet)
            except OSError:
                break
        self._shutdown(source, sink)

    @staticmethod
    def _shutdown(*sockets: socket.socket) -> None:
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _from_client(self, packet: bytes) -> bytes:
        if packet[0] >> 4 == 3 and (packet[0] >> 1) & 0x03:  # PUBLISH with QoS 1 or 2
            body = packet[_body_offset(packet) :]
            topic_len = int.from_bytes(body[0:2], "big")
            topic = body[2 : 2 + topic_len].decode("utf-8")
            packet_id = int.from_bytes(body[2 + topic_len : 4 + topic_len], "big")
            seq = _event_seq(body[4 + topic_len :])
            with self._lock:
                if self._topic_filter(topic):
                    self._watched.add(packet_id)
                if seq is not None:
                    self._seq_of[packet_id] = seq
        return packet

    def _from_broker(self, packet: bytes) -> bytes:
        if packet[0] != 0x40:  # not a PUBACK
            return packet
        body = packet[_body_offset(packet) :]
        packet_id = int.from_bytes(body[0:2], "big")
        with self._lock:
            seq = self._seq_of.pop(packet_id, None)
            left, code = self._refuse.get(seq, (0, 0)) if seq is not None else (0, 0)
            if left > 0 and seq is not None:
                self._refuse[seq] = (left - 1, code)
                self._watched.discard(packet_id)
            elif packet_id not in self._watched:
                return packet
            else:
                self._watched.discard(packet_id)
                if self._fail_left <= 0:
                    return packet
                self._fail_left -= 1
                code = self._code
            self.failed += 1
        # PUBACK: packet id, reason code, no properties.
        return bytes([0x40, 0x03]) + body[0:2] + bytes([code])
