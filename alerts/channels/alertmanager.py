"""Prometheus Alertmanager v2 API: one Alertmanager alert per driftline alert of a group message.

Request: POST <base>/api/v2/alerts for each URL of `alertmanager_url` (comma-separated; an HA
pair gets every alert, as Prometheus sends to each), body a JSON list of

    {"labels": {"alertname": "driftline_<detector>", "model", "version", "detector",
                "feature", "segment", "severity"},
     "annotations": {"summary": "<the alert's one line>", "title": "<the group's title>",
                     "dashboard": "<dashboard link>", "first_window_start": "<ISO>",
                     "first_window_start_ms": "<epoch ms>", "fired_window_start": "<ISO>",
                     "fired_window_start_ms": "<epoch ms>"},
     "startsAt": "<fired_at>", "endsAt": "<see below>", "generatorURL": "<dashboard link>"}

`feature` and `segment` are left out when empty (a model-level alert; the whole population),
as Alertmanager treats an empty label as no label; so are the event-time windows (where the
alert's evidence began, where it fired) while unknown. The labels identify an alert as its
fingerprint does, so Alertmanager deduplicates re-posts. A firing alert's endsAt is
ALERTMANAGER_ENDS_AFTER_SECONDS after the send (set when sent, not when queued, so a
retried post does not arrive already expired); the scheduler re-posts firing groups
every ALERTMANAGER_REPOST_INTERVAL_SECONDS (driftline.alerts.reposts). A resolve posts
endsAt = the alert's resolved_at, which ends it in Alertmanager at once. Alertmanager
answers 200 with an empty body, 400 for an invalid alert (not retried).
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar, Mapping

from driftline import defaults
from driftline.config import secret

from driftline.alerts.channels.checks import require_url_list
from driftline.alerts.channels.http import HttpPoster, SendResult
from driftline.alerts.times import iso, iso_from_ms

ALERTMANAGER = "alertmanager"
API_PATH = "/api/v2/alerts"


def alertmanager_urls(setting: str) -> list[str]:
    """The POST URLs of a comma-separated `alertmanager_url`: each base URL + /api/v2/alerts."""
    urls = []
    for part in setting.split(","):
        base = part.strip().rstrip("/")
        if base:
            urls.append(base if base.endswith(API_PATH) else base + API_PATH)
    return urls


def render_alertmanager(message: Mapping[str, Any]) -> dict[str, Any]:
    """The alerts of a group message, without endsAt for firing ones (set at send time)."""
    resolved = message["kind"] == "resolve"
    alerts = []
    for line in message["alerts"]:
        labels = {"alertname": f"driftline_{line['detector']}", "model": message["model"],
                  "version": message["version"], "detector": line["detector"], "severity": line["severity"]}
        if line.get("feature"):
            labels["feature"] = line["feature"]
        if line.get("segment"):
            labels["segment"] = line["segment"]
        annotations = {"summary": line["summary"] or message["title"], "title": message["title"],
                       "dashboard": message["dashboard_url"]}
        # event-time windows are annotations, never labels: labels are the alert's identity, and these change
        # with each episode; Alertmanager takes strings only, and no null
        for name in ("first_window_start", "fired_window_start"):
            if line.get(f"{name}_ms") is not None:
                annotations[name] = line.get(name) or iso_from_ms(line[f"{name}_ms"])
                annotations[f"{name}_ms"] = str(line[f"{name}_ms"])
        alert: dict[str, Any] = {"labels": labels, "annotations": annotations, "generatorURL": message["dashboard_url"]}
        if line.get("fired_at"):
            alert["startsAt"] = line["fired_at"]
        if resolved:
            alert["endsAt"] = line.get("resolved_at") or message["created_at"]
        alerts.append(alert)
    return {"status": "resolved" if resolved else "firing", "alerts": alerts}


def with_ends_at(payload: Mapping[str, Any], now: datetime,
                 ends_after: float = defaults.ALERTMANAGER_ENDS_AFTER_SECONDS) -> list[dict[str, Any]]:
    """The body to send: firing alerts end `ends_after` seconds from `now` unless re-posted."""
    ends = iso(now + timedelta(seconds=ends_after))
    return [alert if "endsAt" in alert else {**alert, "endsAt": ends} for alert in payload["alerts"]]


class AlertmanagerChannel:
    name: ClassVar[str] = ALERTMANAGER
    title: ClassVar[str] = "Prometheus Alertmanager"
    settings: ClassVar[tuple[str, ...]] = ("alertmanager_url",)
    min_severity: ClassVar[str | None] = "info"  # Alertmanager's own routes decide who hears what

    def __init__(self, urls: str, timeout: float = defaults.ALERT_HTTP_TIMEOUT_SECONDS):
        self.url = urls  # the setting as given: scrubbed from error text as a whole and per URL
        self.urls = alertmanager_urls(urls)
        self.http = HttpPoster(timeout)

    @classmethod
    def check(cls, settings: Any) -> list[str]:
        require_url_list(settings, "alertmanager_url", "http://host:9093")
        return []

    @classmethod
    def from_settings(cls, settings: Any, timeout: float) -> "AlertmanagerChannel":
        return cls(secret(settings.alertmanager_url) or "", timeout=timeout)

    @staticmethod
    def render(message: Mapping[str, Any], idempotency_key: str) -> dict[str, Any]:
        return render_alertmanager(message)

    def close(self) -> None:
        self.http.close()

    def send(self, payload: Mapping[str, Any], idempotency_key: str) -> SendResult:
        """POST to every Alertmanager; ok when one took it (they gossip), retried only when none did."""
        body = json.dumps(with_ends_at(payload, datetime.now(timezone.utc))).encode()
        headers = {"Content-Type": "application/json", "User-Agent": "driftline"}
        results = [self.http.post(url, content=body, headers=headers) for url in self.urls]
        ok = [r for r in results if r.ok]
        if ok:
            return ok[0]
        failed = results[0] if results else SendResult(ok=False, error="no Alertmanager URL", retryable=False)
        errors = "; ".join(r.error or "" for r in results)
        return SendResult(ok=False, status=failed.status, error=errors or failed.error,
                          retryable=any(r.retryable for r in results), retry_after=failed.retry_after,
                          response=failed.response)
