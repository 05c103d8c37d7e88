"""One deadline for a whole HTTP call, enforced at the socket (an httpcore network backend).

A socket timeout bounds one read or write; a receiver that sends one byte every half
second never trips it, and held a call for as long as it liked. Every socket operation
under `deadline(seconds)` is given at most the time left until the deadline (connect,
TLS handshake, sending, the status line, headers, body), and one that starts after it
fails at once with a timeout, so the whole call ends by the deadline whatever the
receiver does. The deadline lives in a context variable: pooled connections serve
calls from several threads, each with its own deadline.
"""
from __future__ import annotations

import contextlib
import contextvars
import ssl
import time
from typing import Any, Iterable, Iterator

import httpcore

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("driftline_http_deadline", default=None)


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Socket operations inside this block end `seconds` from now at the latest."""
    token = _DEADLINE.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _left(timeout: float | None, expired: type[Exception]) -> float | None:
    """`timeout` cut to the time left before the deadline; raises `expired` once it has passed."""
    end = _DEADLINE.get()
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise expired("the call's deadline passed")
    return left if timeout is None else min(timeout, left)


class DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream):
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return DeadlineStream(self._stream.start_tls(ssl_context, server_hostname,
                                                     _left(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's own blocking sockets, each operation bounded by the current deadline."""

    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return DeadlineStream(self._backend.connect_tcp(host, port, _left(timeout, httpcore.ConnectTimeout),
                                                        local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return DeadlineStream(self._backend.connect_unix_socket(path, _left(timeout, httpcore.ConnectTimeout),
                                                                socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)
