"""`KafkaProxy`: a TCP proxy in front of a Kafka broker, for clients that cannot talk to it directly.

kcat 1.7.1 (librdkafka 2.0.2, the Debian package) cannot talk to the embedded broker directly:
Tansu writes every tagged field of its ApiVersions v3 response, default values included, and
librdkafka 2.0.2 misreads that section ("Read underflow ... ApiVersion v3 at 274/279") and drops
the connection. Real Kafka omits tags at their defaults. `KafkaProxy` sits between the clients and
a broker that advertises the proxy's address, and removes only that trailing tag section of
ApiVersions responses; every other byte (produce requests, record batches, fetches) passes through.
While the broker is down, a client connecting to the proxy sees its connection closed and retries.
"""
from __future__ import annotations

import contextlib
import socket
import struct
import threading

API_VERSIONS = 18


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _skip_tags(buf: bytes, pos: int) -> int:
    count, pos = _uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        pos += size
    return pos


def strip_api_versions_tags(payload: bytes) -> bytes:
    """An ApiVersions v3+ response (correlation id first) with an empty top-level tag section."""
    pos = 4 + 2  # correlation id, error code
    entries, pos = _uvarint(payload, pos)  # compact array: length + 1
    for _ in range(max(entries - 1, 0)):
        pos = _skip_tags(payload, pos + 6)  # api key, min, max version, then the entry's tags
    pos += 4  # throttle_time_ms
    return payload[:pos] + b"\x00"


class KafkaProxy:
    """Forwards Kafka frames both ways, normalising ApiVersions responses (see above)."""

    def __init__(self, listen_port: int, target_port: int, host: str = "127.0.0.1"):
        self.host, self.target_port = host, target_port
        self.server = socket.create_server((host, listen_port))
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.server.accept()
            except OSError:  # closed
                return
            try:
                upstream = socket.create_connection((self.host, self.target_port), timeout=5)
            except OSError:  # broker down: the client sees a closed connection and retries
                client.close()
                continue
            upstream.settimeout(None)
            asked: set[int] = set()  # correlation ids of ApiVersions v3+ requests in flight
            threading.Thread(target=self._pump, args=(client, upstream, asked, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, asked, False), daemon=True).start()

    @staticmethod
    def _read(sock: socket.socket, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return bytes(data)

    def _pump(self, src: socket.socket, dst: socket.socket, asked: set[int], requests: bool) -> None:
        try:
            while True:
                payload = self._read(src, struct.unpack(">i", self._read(src, 4))[0])
                if requests:
                    key, version, corr = struct.unpack(">hhi", payload[:8])
                    if key == API_VERSIONS and version >= 3:
                        asked.add(corr)
                else:
                    corr = struct.unpack(">i", payload[:4])[0]
                    if corr in asked:
                        asked.discard(corr)
                        payload = strip_api_versions_tags(payload)
                dst.sendall(struct.pack(">i", len(payload)) + payload)
        except (OSError, ConnectionError, struct.error):
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.close()

    def close(self) -> None:
        self.closed = True
        self.server.close()
