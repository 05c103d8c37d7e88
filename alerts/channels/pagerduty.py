"""PagerDuty Events API v2: trigger and resolve with the group key as `dedup_key`.

Body of a trigger (https://developer.pagerduty.com/docs/events-api-v2/trigger-events/):

    {"routing_key": "...", "event_action": "trigger", "dedup_key": "<group key>",
     "payload": {"summary": "<= 1024 chars", "source": "driftline:<model>:<version>",
                 "severity": "critical|error|warning|info", "timestamp": "<ISO 8601>",
                 "component": "<model>", "group": "<version>", "class": "<detector group>",
                 "custom_details": {...}},
     "links": [{"href": "<dashboard>", "text": "driftline dashboard"}],
     "client": "driftline", "client_url": "<dashboard>"}

A resolve is {"routing_key", "event_action": "resolve", "dedup_key"}. PagerDuty answers
202 {"status": "success", "dedup_key": ...}, 400 for an invalid event (not retried),
429 when throttled. A repeat (the group still firing after its repeat interval) is
sent as a trigger with the same dedup_key: on an open incident it only adds a log
entry, and when the first trigger never arrived (PagerDuty down past the delivery
budget, the row failed) it opens the incident then. The routing key is added at
send time and never stored in the outbox.
"""
from __future__ import annotations

import json
from typing import Any, ClassVar, Mapping

from driftline import defaults
from driftline.config import secret

from driftline.alerts.channels.checks import require_url
from driftline.alerts.channels.http import HttpPoster, SendResult

PAGERDUTY = "pagerduty"

# PagerDuty Events API v2: payload.summary is truncated by PagerDuty at 1024 characters (PagerDuty's limit).
PAGERDUTY_MAX_SUMMARY_CHARS = 1024
# each alert's event-time windows (driftline.alerts.messages.event_windows): where its evidence began, where it fired
EVENT_WINDOW_KEYS = ("first_window_start_ms", "first_window_start", "fired_window_start_ms", "fired_window_start")
SEVERITY = {"critical": "critical", "error": "error", "warning": "warning", "info": "info"}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_pagerduty(message: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Events API v2 event for a group message, without routing_key (a repeat is a trigger again)."""
    kind = message["kind"]
    if kind == "resolve":
        return {"event_action": "resolve", "dedup_key": message["group_key"]}
    alerts = list(message["alerts"])
    listed = alerts[: defaults.PAGERDUTY_MAX_DETAIL_ALERTS]
    details: dict[str, Any] = {
        "model": message["model"],
        "version": message["version"],
        "group": message["group"],
        "window_start": message["window"]["start"],
        "window_end": message["window"]["end"],
        "alerts": [{**{k: a[k] for k in ("detector", "feature", "metric", "value", "threshold", "severity",
                                         "summary", "fingerprint")},
                    **{k: a.get(k) for k in EVENT_WINDOW_KEYS}} for a in listed],
        "dashboard": message["dashboard_url"],
    }
    if len(alerts) > len(listed):
        details["alerts_not_listed"] = len(alerts) - len(listed)
    if message.get("related_features"):
        details["drifted_features"] = list(message["related_features"])
    return {
        "event_action": "trigger",
        "dedup_key": message["group_key"],
        "payload": {
            "summary": _cut(message["title"], PAGERDUTY_MAX_SUMMARY_CHARS),
            "source": f"driftline:{message['model']}:{message['version']}",
            "severity": SEVERITY.get(message["severity"], "warning"),
            "timestamp": message["created_at"],
            "component": message["model"],
            "group": message["version"],
            "class": message["group"],
            "custom_details": details,
        },
        "links": [{"href": message["dashboard_url"], "text": "driftline dashboard"}],
        "client": "driftline",
        "client_url": message["dashboard_url"],
    }


class PagerDutyChannel:
    name: ClassVar[str] = PAGERDUTY
    title: ClassVar[str] = "PagerDuty"
    settings: ClassVar[tuple[str, ...]] = ("pagerduty_routing_key", "pagerduty_url")
    min_severity: ClassVar[str | None] = "error"  # it pages a person: one page per real problem

    def __init__(self, url: str, routing_key: str, timeout: float = defaults.ALERT_HTTP_TIMEOUT_SECONDS):
        self.url = url
        self.routing_key = routing_key
        self.http = HttpPoster(timeout)

    @classmethod
    def check(cls, settings: Any) -> list[str]:
        require_url(settings, "pagerduty_url")
        return []

    @classmethod
    def from_settings(cls, settings: Any, timeout: float) -> "PagerDutyChannel":
        return cls(settings.pagerduty_url, secret(settings.pagerduty_routing_key) or "", timeout=timeout)

    @staticmethod
    def render(message: Mapping[str, Any], idempotency_key: str) -> dict[str, Any] | None:
        return render_pagerduty(message)

    def close(self) -> None:
        self.http.close()

    def send(self, payload: Mapping[str, Any], idempotency_key: str) -> SendResult:
        body = {"routing_key": self.routing_key, **payload}
        return self.http.post(self.url, content=json.dumps(body).encode(),
                              headers={"Content-Type": "application/json", "Idempotency-Key": idempotency_key,
                                       "User-Agent": "driftline"})
