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

from typing import Any, Mapping
from urllib.parse import urlsplit

from driftline import defaults
from driftline.errors import UserError
from driftline.hosts import is_loopback

from driftline.alerts.channels.http import HttpPoster, SendResult
from driftline.alerts.channels.webhook import encode
from driftline.alerts.endpoints import RETRAIN


class RetrainChannel:
    name = RETRAIN

    def __init__(self, url: str, token: str | None, timeout: float = defaults.ALERT_HTTP_TIMEOUT_SECONDS,
                 allow_http: bool = False):
        if (problem := plain_http_problem(url, allow_http)) is not None:
            raise UserError(problem)
        self.url = url
        self.token = token
        self.http = HttpPoster(timeout)

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
