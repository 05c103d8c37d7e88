"""Microsoft Teams: an Adaptive Card posted to a Workflows webhook ("When a Teams webhook request is received").

Request: POST <teams_webhook_url> (the URL holds the workflow's signature in its query: a secret),
`Content-Type: application/json`, body

    {"type": "message",
     "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": null,
                      "content": {"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                                  "type": "AdaptiveCard", "version": "1.2", "msteams": {"width": "Full"},
                                  "body": [...], "actions": [{"type": "Action.OpenUrl", ...}]}}]}

The card: the title (red for a trigger or repeat, green for a resolve), a FactSet (model, version,
detector, severity, window, status), "Drifted features (N): ..." for dataset drift, one TextBlock per
alert (feature, metric value against threshold, the event-time windows), "…and N more" when the
rest would not fit Teams' message size limit, and a button to the dashboard. The workflow answers
202 Accepted with an empty body as soon as it has the request; what the card does afterwards happens
inside the flow, out of the sender's sight, so a card is kept within Teams' limits here, not after.
429 (throttled, with Retry-After) and 5xx are retried, other 4xx (a revoked signature: 401) are not.
Teams has no deduplication: after a crash between its 202 and the row being marked sent, one card
can arrive twice. Card text is Markdown: every value from data (model, feature, segment, the title
that names them) has its Markdown characters escaped with a backslash and "<" made inert
(driftline.markup), so `[Re-authenticate](https://evil)` or `<at>` in a segment value arrives as
text, never as a link or a mention.
"""
from __future__ import annotations

import json
import re
from typing import Any, ClassVar, Mapping

from driftline import defaults
from driftline.config import secret
from driftline.markup import inert

from driftline.alerts.channels.checks import require_url
from driftline.alerts.channels.http import HttpPoster, SendResult
from driftline.alerts.messages import detector_label, event_windows_text, format_number

TEAMS = "teams"
ADAPTIVE_CARD = "application/vnd.microsoft.card.adaptive"
CARD_SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"
# the card uses nothing newer than 1.2, which every Teams client renders (mobile ones included)
CARD_VERSION = "1.2"
# Teams' message size limit (28 KB, learn.microsoft.com "Limits and specifications for Microsoft Teams"):
# Teams', not ours to tune. The card is kept a little under it, for the envelope the flow adds.
TEAMS_MAX_MESSAGE_BYTES = 28 * 1024
TEAMS_CARD_BUDGET_BYTES = TEAMS_MAX_MESSAGE_BYTES - 2 * 1024
# One alert line and the title are cut here, so that a single absurd feature name cannot eat the card.
MAX_LINE_CHARS = 300
MAX_TITLE_CHARS = 500
# Markdown that Adaptive Cards' TextBlock and FactSet honour (emphasis, code, links) anywhere in a text, and
# what starts a list or a heading at its start: each escaped with a backslash.
_INLINE = re.compile(r"([\\`*_\[\]()~])")
_LINE_START = re.compile(r"^(\s*)(?:([-+#>])|(\d+)\.)")
_COLOUR = {"trigger": "Attention", "repeat": "Attention", "resolve": "Good"}


def escape(text: str) -> str:
    """`text` as Markdown that shows it as typed: no emphasis, link, list or mention can start in it."""
    flat = " ".join(str(text).splitlines())  # a line break in a value could start a list item
    escaped = _INLINE.sub(r"\\\1", inert(flat))
    return _LINE_START.sub(lambda m: m.group(1) + (f"\\{m.group(2)}" if m.group(2) else f"{m.group(3)}\\."), escaped)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _text(text: str, **style: Any) -> dict[str, Any]:
    return {"type": "TextBlock", "text": text, "wrap": True, **style}


def _line(alert: Mapping[str, Any], resolved: bool, show_detector: bool, reference_ms: int | None) -> str:
    name = _cut(alert["feature"] or detector_label(alert["detector"]), MAX_LINE_CHARS)
    if alert["value"] is None and alert["threshold"] is None and alert.get("summary"):
        text = f"**{escape(name)}** — {escape(_cut(alert['summary'], MAX_LINE_CHARS))}"
    else:
        metric = alert.get("metric") or "value"
        text = (f"**{escape(name)}** — {escape(str(metric))} {format_number(alert['value'])} "
                f"vs threshold {format_number(alert['threshold'])}")
    if alert["feature"] and show_detector:
        text += f" ({escape(detector_label(alert['detector']))})"
    if windows := event_windows_text(alert, reference_ms):
        text += f" — {windows}"
    return text + (" — resolved" if resolved else "")


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())


def render_teams(message: Mapping[str, Any]) -> dict[str, Any]:
    """The Workflows webhook body for a group message (see driftline.alerts.messages)."""
    kind = message["kind"]
    alerts = list(message["alerts"])
    detectors = sorted({a["detector"] for a in alerts})
    window = message["window"]
    facts = [("Model", escape(message["model"])), ("Version", escape(message["version"])),
             ("Detector", escape(", ".join(detector_label(d) for d in detectors)) or "n/a"),
             ("Severity", escape(message["severity"])), ("Window", f"{window['start']} → {window['end']}"),
             ("Status", escape(message["status"]))]
    body: list[dict[str, Any]] = [
        _text(escape(_cut(message["title"], MAX_TITLE_CHARS)), weight="Bolder", size="Medium",
              color=_COLOUR.get(kind, "Default")),
        {"type": "FactSet", "facts": [{"title": title, "value": value} for title, value in facts]},
    ]
    related = list(message.get("related_features") or [])
    if related:
        names = ", ".join(escape(_cut(name, 200)) for name in related)
        body.append(_text(f"**Drifted features ({len(related)}):** {_cut(names, 4 * MAX_LINE_CHARS)}"))
    card = {"$schema": CARD_SCHEMA, "type": "AdaptiveCard", "version": CARD_VERSION, "msteams": {"width": "Full"},
            "body": body,
            "actions": [{"type": "Action.OpenUrl", "title": "Open the driftline dashboard",
                         "url": message["dashboard_url"]}]}
    # room for the "and N more" line, then as many alert lines as fit Teams' size limit
    room = TEAMS_CARD_BUDGET_BYTES - _size(card) - 200
    listed = 0
    for alert in alerts:
        block = _text(_line(alert, kind == "resolve", len(detectors) > 1, window.get("start_ms")), spacing="Small")
        room -= _size(block) + 2
        if room < 0:
            break
        body.append(block)
        listed += 1
    if listed < len(alerts):
        body.append(_text(f"…and {len(alerts) - listed} more: see them all on the dashboard", isSubtle=True))
    return {"type": "message",
            "attachments": [{"contentType": ADAPTIVE_CARD, "contentUrl": None, "content": card}]}


class TeamsChannel:
    """Posts rendered cards to one Workflows webhook; retries are the outbox's job."""

    name: ClassVar[str] = TEAMS
    title: ClassVar[str] = "Microsoft Teams"
    settings: ClassVar[tuple[str, ...]] = ("teams_webhook_url",)
    min_severity: ClassVar[str | None] = "info"  # chat sees everything, as Slack does

    def __init__(self, url: str, timeout: float = defaults.ALERT_HTTP_TIMEOUT_SECONDS):
        self.url = url
        self.http = HttpPoster(timeout)

    @classmethod
    def check(cls, settings: Any) -> list[str]:
        require_url(settings, "teams_webhook_url")
        return []

    @classmethod
    def from_settings(cls, settings: Any, timeout: float) -> "TeamsChannel":
        return cls(secret(settings.teams_webhook_url) or "", timeout=timeout)

    @staticmethod
    def render(message: Mapping[str, Any], idempotency_key: str) -> dict[str, Any]:
        return render_teams(message)

    def send(self, payload: Mapping[str, Any], idempotency_key: str) -> SendResult:
        body = json.dumps(dict(payload), ensure_ascii=False).encode()
        return self.http.post(self.url, content=body, headers={"Content-Type": "application/json; charset=utf-8",
                                                               "User-Agent": "driftline"})

    def close(self) -> None:
        self.http.close()
