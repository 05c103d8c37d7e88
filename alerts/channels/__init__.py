"""Alert channels: each renders the channel-neutral message (pure) and sends a rendered body (HTTP).

Rendering happens when a notification is written to the outbox, so the stored
payload is exactly the body that will be sent (secrets excepted: the PagerDuty
routing key, the webhook signature and the retraining token are added at send time
and never stored). Sending happens in `alerts.delivery`, which owns all retries:
a channel makes one HTTP call and reports a `SendResult`.
"""
from __future__ import annotations

import email.utils
import math
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Mapping, Protocol

from driftline import defaults
from driftline.config import secret
from driftline.redact import scrub

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


def configured_channels(settings: Any) -> list[str]:
    """Channels that have an endpoint in the settings; the others are skipped."""
    names = []
    if settings.slack_webhook_url:
        names.append("slack")
    if settings.pagerduty_routing_key:
        names.append("pagerduty")
    if settings.webhook_url:
        names.append("webhook")
    if settings.retrain_webhook_url:
        names.append("retrain")
    return names


@dataclass
class Channels:
    """The senders the delivery job uses; a channel left None has no endpoint."""

    slack: Channel | None = None
    pagerduty: Channel | None = None
    webhook: Channel | None = None
    retrain: Channel | None = None
    extra: dict[str, Channel] = field(default_factory=dict)
    # Configured secrets (Settings.secret_values()) to mask in error text, beside the channels' own.
    secrets: tuple[str, ...] = ()

    def scrub(self, text: str) -> str:
        """`text` without any secret of these channels or the settings, nor URL credentials or queries."""
        own = [getattr(self.get(name), attr, None) for name in self.enabled()
               for attr in ("url", "routing_key", "secret", "token")]
        return scrub(text, [*self.secrets, *(v for v in own if isinstance(v, str))])

    def get(self, name: str) -> Channel | None:
        if name in ("slack", "pagerduty", "webhook", "retrain"):
            return getattr(self, name)
        return self.extra.get(name)

    def close(self) -> None:
        """Release pooled connections (the scheduler keeps one Channels for its lifetime)."""
        for name in self.enabled():
            http = getattr(self.get(name), "http", None)
            if http is not None:
                http.close()

    def enabled(self) -> list[str]:
        return [n for n in ("slack", "pagerduty", "webhook", "retrain") if self.get(n) is not None] + list(self.extra)

    @classmethod
    def from_settings(cls, settings: Any,
                      timeout: timedelta | float = defaults.ALERT_HTTP_TIMEOUT_SECONDS) -> "Channels":
        from alerts.channels.pagerduty import PagerDutyChannel
        from alerts.channels.retrain import RetrainChannel
        from alerts.channels.slack import SlackChannel
        from alerts.channels.webhook import WebhookChannel

        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
        return cls(
            slack=SlackChannel(secret(settings.slack_webhook_url), timeout=seconds) if settings.slack_webhook_url else None,
            pagerduty=(PagerDutyChannel(settings.pagerduty_url, secret(settings.pagerduty_routing_key), timeout=seconds)
                       if settings.pagerduty_routing_key else None),
            webhook=(WebhookChannel(secret(settings.webhook_url), secret(settings.webhook_secret), timeout=seconds)
                     if settings.webhook_url else None),
            retrain=(RetrainChannel(secret(settings.retrain_webhook_url), secret(settings.retrain_token), timeout=seconds)
                     if settings.retrain_webhook_url else None),
            secrets=tuple(settings.secret_values()),
        )


def render(channel: str, message: Mapping[str, Any], idempotency_key: str) -> dict[str, Any] | None:
    """The body `channel` will receive for `message` (None: this channel skips this kind)."""
    if channel == "slack":
        from alerts.channels.slack import render_slack
        return render_slack(message)
    if channel == "pagerduty":
        from alerts.channels.pagerduty import render_pagerduty
        return render_pagerduty(message)
    if channel == "webhook":
        from alerts.channels.webhook import render_webhook
        return render_webhook(message, idempotency_key)
    raise ValueError(f"unknown alert channel {channel!r}")
