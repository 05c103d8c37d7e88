"""One HTTP call to a receiver and how its answer is classified (retry or give up)."""
from __future__ import annotations

import email.utils
import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping, Protocol

from driftline import defaults

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


class Channel(Protocol):
    name: str

    def send(self, payload: Mapping[str, Any], idempotency_key: str) -> SendResult: ...


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
    """One pooled httpx client per channel (building a client costs ~50 ms: its TLS context)."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self._client: Any = None
        self._lock = threading.Lock()

    def post(self, url: str, *, content: bytes, headers: Mapping[str, str]) -> SendResult:
        import httpx

        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self.timeout)
        try:
            response = self._client.post(url, content=content, headers=dict(headers))
        except httpx.HTTPError as exc:
            return result_from_exception(exc, self.timeout)
        try:
            body: Any = response.json()
        except ValueError:
            body = response.text
        return result_from_http(response.status_code, body, response.headers)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
