"""A generic JSON webhook, signed with HMAC-SHA256 over the timestamp and the body.

Request: POST <DRIFTLINE_WEBHOOK_URL>, body = the group message (driftline.alerts.messages,
schema "driftline.alert/v1") plus its `idempotency_key`; headers

    Content-Type: application/json
    X-Driftline-Timestamp: <unix seconds>
    X-Driftline-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>." + body)>
    Idempotency-Key: <the notification's key; the same on every retry>

A receiver recomputes the HMAC over the raw body, compares in constant time, and
rejects timestamps more than a few minutes old (replays). Without a
`webhook_secret` the signature header is left out. After an ambiguous failure (the
receiver answered but we crashed before recording it) the same request can arrive
twice: receivers deduplicate on Idempotency-Key.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any, ClassVar, Mapping

from driftline import defaults
from driftline.config import secret as secret_value

from driftline.alerts.channels.checks import require_url
from driftline.alerts.channels.http import HttpPoster, SendResult

WEBHOOK = "webhook"

TIMESTAMP_HEADER = "X-Driftline-Timestamp"
SIGNATURE_HEADER = "X-Driftline-Signature"


def render_webhook(message: Mapping[str, Any], idempotency_key: str) -> dict[str, Any]:
    return {**message, "idempotency_key": idempotency_key}


def signature(secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def verify(secret: str, timestamp: str, body: bytes, header: str, *, tolerance_s: float = 300.0,
           now: float | None = None) -> bool:
    """For receivers: the signature matches and the timestamp is recent; False for any malformed header."""
    if not isinstance(header, str) or not isinstance(timestamp, str):
        return False
    try:
        age = abs((time.time() if now is None else now) - float(timestamp))
    except ValueError:
        return False
    # as bytes: compare_digest raises TypeError on a str with non-ASCII characters
    expected = signature(secret, timestamp, body).encode()
    return age <= tolerance_s and hmac.compare_digest(expected, header.encode("utf-8", errors="replace"))


def encode(payload: Mapping[str, Any]) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()


class WebhookChannel:
    name: ClassVar[str] = WEBHOOK
    title: ClassVar[str] = "Generic webhook"
    settings: ClassVar[tuple[str, ...]] = ("webhook_url", "webhook_secret")
    min_severity: ClassVar[str | None] = "info"  # a program decides for itself what to do with each alert

    def __init__(self, url: str, secret: str | None, timeout: float = defaults.ALERT_HTTP_TIMEOUT_SECONDS):
        self.url = url
        self.secret = secret
        self.http = HttpPoster(timeout)

    @classmethod
    def check(cls, settings: Any) -> list[str]:
        require_url(settings, "webhook_url")
        if secret_value(settings.webhook_secret):
            return []
        return ["webhook_url is set but webhook_secret is not: webhooks go out unsigned, so a receiver "
                "cannot tell them from forged ones; set DRIFTLINE_WEBHOOK_SECRET"]

    @classmethod
    def from_settings(cls, settings: Any, timeout: float) -> "WebhookChannel":
        return cls(secret_value(settings.webhook_url) or "", secret_value(settings.webhook_secret), timeout=timeout)

    @staticmethod
    def render(message: Mapping[str, Any], idempotency_key: str) -> dict[str, Any]:
        return render_webhook(message, idempotency_key)

    def close(self) -> None:
        self.http.close()

    def headers(self, body: bytes, idempotency_key: str) -> dict[str, str]:
        timestamp = str(int(time.time()))
        headers = {"Content-Type": "application/json", "Idempotency-Key": idempotency_key,
                   "User-Agent": "driftline", TIMESTAMP_HEADER: timestamp}
        if self.secret:
            headers[SIGNATURE_HEADER] = signature(self.secret, timestamp, body)
        return headers

    def send(self, payload: Mapping[str, Any], idempotency_key: str) -> SendResult:
        body = encode(payload)
        return self.http.post(self.url, content=body, headers=self.headers(body, idempotency_key))
