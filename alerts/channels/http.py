"""One HTTP call to a receiver and how its answer is classified (retry or give up)."""
from __future__ import annotations

import email.utils
import json
import math
import threading
import time
import urllib.request
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlsplit

import httpcore

from driftline import defaults

from driftline.alerts.channels.deadline import DeadlineBackend, deadline

# What the network can do to a call (refused, reset, timed out, garbled): retried, never raised.
TRANSPORT_ERRORS = (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError, httpcore.ProxyError,
                    httpcore.UnsupportedProtocol)
# Non-2xx answers worth retrying: timeouts, throttling, and the server's own trouble.
RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class SendResult:
    """The outcome of one HTTP call."""

    ok: bool
    status: int | None = None
    error: str | None = None
    retryable: bool = True
    retry_after: float | None = None  # seconds, from a Retry-After header
    response: Any = None  # the answer's body: parsed JSON, or text


def parse_retry_after(value: str | None, now: float | None = None,
                      limit: float = defaults.ALERT_RETRY_AFTER_MAX_SECONDS) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), within [0, limit], or None.

    Whatever the receiver sends (inf, 1e12, NaN, a date in year 9999) the answer is
    finite: a header must never make the next attempt's time unrepresentable.
    """
    if value is None or not str(value).strip():
        return None
    text = str(value).strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
            seconds = when.timestamp() - (time.time() if now is None else now)
        except (TypeError, ValueError, OverflowError, AttributeError):
            return None
    if math.isnan(seconds):
        return None
    return min(max(0.0, seconds), limit)


def result_from_http(status: int, body: Any, headers: Mapping[str, str]) -> SendResult:
    """Classify an HTTP answer: 2xx ok; 408/429/5xx retry (429 with its Retry-After); other 4xx give up."""
    if 200 <= status < 300:
        return SendResult(ok=True, status=status, response=body)
    retry_after = parse_retry_after(_header(headers, "retry-after"))
    text = body if isinstance(body, str) else repr(body)
    return SendResult(ok=False, status=status, error=f"HTTP {status}: {text[:500]}",
                      retryable=status in RETRYABLE_STATUS, retry_after=retry_after, response=body)


def result_from_exception(exc: BaseException, timeout: float) -> SendResult:
    """Network trouble (refused, reset, timed out) is always worth retrying."""
    name = type(exc).__name__
    text = str(exc) or name
    if "timed out" in text.lower() or "timeout" in name.lower():
        return SendResult(ok=False, error=f"timed out after {timeout:g}s ({name})")
    return SendResult(ok=False, error=f"{name}: {text[:500]}")


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


class HttpPoster:
    """POSTs through one pooled httpcore connection pool per channel, with one deadline per call.

    `timeout` bounds the whole call (connect, send, answer, body): see
    driftline.alerts.channels.deadline. At most `max_body_bytes` of an answer are read; the
    rest is never waited for. Proxies come from the environment (HTTPS_PROXY, NO_PROXY), as
    urllib reads them.
    """

    def __init__(self, timeout: float, max_body_bytes: int = defaults.ALERT_RESPONSE_MAX_BYTES):
        self.timeout = timeout
        self.max_body_bytes = max_body_bytes
        self._pools: dict[str | None, Any] = {}
        self._lock = threading.Lock()

    def _pool(self, url: str) -> Any:
        proxy = _env_proxy(url)
        with self._lock:
            if proxy not in self._pools:
                self._pools[proxy] = httpcore.ConnectionPool(
                    proxy=httpcore.Proxy(proxy) if proxy else None, network_backend=DeadlineBackend())
            return self._pools[proxy]

    def post(self, url: str, *, content: bytes, headers: Mapping[str, str]) -> SendResult:
        limits = {"connect": self.timeout, "read": self.timeout, "write": self.timeout, "pool": self.timeout}
        body = bytearray()
        try:
            with deadline(self.timeout), self._pool(url).stream(
                    "POST", url, headers=list(headers.items()), content=content,
                    extensions={"timeout": limits}) as response:
                status, answer_headers = response.status, response.headers
                try:
                    for chunk in response.iter_stream():
                        body += chunk
                        if len(body) >= self.max_body_bytes:
                            break  # an answer is a status and a line or two: the rest is not waited for
                except TRANSPORT_ERRORS:
                    pass  # the status has come: the outcome is known, a body cut short changes nothing
        except TRANSPORT_ERRORS as exc:
            return result_from_exception(exc, self.timeout)
        text = bytes(body[: self.max_body_bytes]).decode("utf-8", errors="replace")
        try:
            parsed: Any = json.loads(text)
        except ValueError:
            parsed = text
        return result_from_http(status, parsed, {k.decode("latin-1"): v.decode("latin-1") for k, v in answer_headers})

    def close(self) -> None:
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()


def _env_proxy(url: str) -> str | None:
    """The proxy for `url` from the environment (urllib's reading of *_PROXY and NO_PROXY), or None."""
    parts = urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return proxy
