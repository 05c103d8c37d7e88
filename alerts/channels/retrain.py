"""The retraining webhook: POST the request document with a bearer token and an idempotency key.

Headers: `Authorization: Bearer <settings.retrain_token>`, `Idempotency-Key: <key>`,
`Content-Type: application/json`. The body is built by driftline.alerts.retraining (schema
"driftline.retrain/v1"). The worker's `POST /admin/retrain` answers 202 with
{"request_id", "idempotency_key", "status", "duplicate"}; any 2xx counts as accepted.
"""
from __future__ import annotations

from typing import Any, Mapping

from driftline import defaults

from driftline.alerts.channels.http import HttpPoster, SendResult
from driftline.alerts.channels.webhook import encode
from driftline.alerts.endpoints import RETRAIN


class RetrainChannel:
    name = RETRAIN

    def __init__(self, url: str, token: str | None, timeout: float = defaults.ALERT_HTTP_TIMEOUT_SECONDS):
        self.url = url
        self.token = token
        self.http = HttpPoster(timeout)

    def send(self, payload: Mapping[str, Any], idempotency_key: str) -> SendResult:
        headers = {"Content-Type": "application/json", "Idempotency-Key": idempotency_key,
                   "User-Agent": "driftline"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return self.http.post(self.url, content=encode(payload), headers=headers)
