"""The retraining webhook: POST the request document with a bearer token and an idempotency key.

Headers: `Authorization: Bearer <settings.retrain_webhook_token>` (a token of its own: the
worker's admin token is not sent to whatever the URL names), `Idempotency-Key: <key>`,
`Content-Type: application/json`. The body is built by driftline.alerts.retraining (schema
"driftline.retrain/v1"). The worker's `POST /admin/retrain` answers 202 with
{"request_id", "idempotency_key", "status", "duplicate"}; any 2xx counts as accepted.
Off loopback the URL must be https, so that the token is never sent in the clear, unless
settings.retrain_webhook_allow_http says otherwise.
"""
from __future__ import annotations

from typing import Any, ClassVar, Mapping
from urllib.parse import urlsplit

from driftline import defaults
from driftline.config import secret
from driftline.errors import UserError
from driftline.hosts import is_loopback

from driftline.alerts.channels.checks import require_url
from driftline.alerts.channels.http import HttpPoster, SendResult
from driftline.alerts.channels.webhook import encode

RETRAIN = "retrain"


class RetrainChannel:
    name: ClassVar[str] = RETRAIN
    title: ClassVar[str] = "Retraining webhook"
    settings: ClassVar[tuple[str, ...]] = ("retrain_webhook_url", "retrain_webhook_token", "retrain_webhook_allow_http")
    min_severity: ClassVar[str | None] = None  # it gets retraining requests (driftline.alerts.retraining), no alerts

    def __init__(self, url: str, token: str | None, timeout: float = defaults.ALERT_HTTP_TIMEOUT_SECONDS,
                 allow_http: bool = False):
        if (problem := plain_http_problem(url, allow_http)) is not None:
            raise UserError(problem)
        self.url = url
        self.token = token
        self.http = HttpPoster(timeout)

    @classmethod
    def check(cls, settings: Any) -> list[str]:
        require_url(settings, "retrain_webhook_url")
        return []

    @classmethod
    def from_settings(cls, settings: Any, timeout: float) -> "RetrainChannel":
        return cls(secret(settings.retrain_webhook_url) or "", secret(settings.retrain_webhook_token), timeout=timeout,
                   allow_http=settings.retrain_webhook_allow_http)

    @staticmethod
    def render(message: Mapping[str, Any], idempotency_key: str) -> None:
        return None  # an alert message is not a retraining request

    def close(self) -> None:
        self.http.close()

    def send(self, payload: Mapping[str, Any], idempotency_key: str) -> SendResult:
        headers = {"Content-Type": "application/json", "Idempotency-Key": idempotency_key,
                   "User-Agent": "driftline"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return self.http.post(self.url, content=encode(payload), headers=headers)


def plain_http_problem(url: str, allow_http: bool) -> str | None:
    """Why the retraining webhook must not be `url` (plain http to another machine), in words; None when it may."""
    parts = urlsplit(url)
    if allow_http or parts.scheme.lower() != "http" or is_loopback(parts.hostname or ""):
        return None
    return (f"the retraining webhook on {parts.hostname} is plain http, which would send its bearer token "
            "unencrypted: use an https URL, or set DRIFTLINE_RETRAIN_WEBHOOK_ALLOW_HTTP=true "
            "(settings.retrain_webhook_allow_http) on a network you trust")
