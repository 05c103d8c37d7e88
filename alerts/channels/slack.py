"""Slack: a Block Kit message through an incoming webhook (a JSON POST, api.slack.com/messaging/webhooks).

The message shows model, version, detector(s), severity, window, one line per alert
(feature, metric value against threshold, the event-time windows its evidence began and it
fired in) and a link to the dashboard, within Slack's
limits: at most 50 blocks, section text at most 3000 characters, header at most 150,
a field at most 2000. More alerts than `SLACK_MAX_LISTED_ALERTS`, or than fit, end
in "and N more". Slack answers 200 "ok", or 4xx with a reason such as
`invalid_payload`, or 429 with Retry-After. Every value from data (model, feature, segment,
the title that names them) is escaped, in the blocks and in the top-level `text` (the
notification's preview): `<!channel>` or `<https://evil|Re-authenticate>` in a segment value
reaches Slack as text, never as a mention or a link. The POST goes through the channels' own
HTTP layer (one deadline per call, a bounded answer), not slack_sdk's WebhookClient, whose
urllib timeout bounds each read only.
"""
from __future__ import annotations

import json
from typing import Any, ClassVar, Mapping

from driftline import defaults
from driftline.config import secret

from driftline.alerts.channels.checks import require_url
from driftline.alerts.channels.http import HttpPoster, SendResult
from driftline.alerts.messages import detector_label, event_windows_text, format_number

SLACK = "slack"
_EMOJI = {"trigger": ":rotating_light:", "repeat": ":repeat:", "resolve": ":white_check_mark:"}
# Slack's documented limits for a message's blocks (api.slack.com/reference/block-kit): Slack's, not ours to tune.
SLACK_MAX_BLOCKS = 50
SLACK_MAX_SECTION_CHARS = 3000
SLACK_MAX_HEADER_CHARS = 150
SLACK_MAX_FIELD_CHARS = 2000
# One alert line is cut here, so that a single absurd feature name cannot eat a section.
MAX_LINE_CHARS = 300


def escape(text: str) -> str:
    """Slack mrkdwn control characters (api.slack.com/reference/surfaces/formatting#escaping)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _escaped_cut(text: str, limit: int) -> str:
    """`text` escaped, then cut to `limit` characters, never inside an entity ("&am…")."""
    text = escape(text)
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    amp = cut.rfind("&")
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return cut + "…"


def _line(alert: Mapping[str, Any], resolved: bool, show_detector: bool, reference_ms: int | None = None) -> str:
    name = alert["feature"] or detector_label(alert["detector"])
    metric = alert.get("metric") or "value"
    if alert["value"] is None and alert["threshold"] is None and alert.get("summary"):
        # no figures to show (a rollout's verdict): its summary says what happened
        text = f"• *{escape(name)}* — {escape(alert['summary'])}"
    else:
        text = (f"• *{escape(name)}* — {escape(str(metric))} `{format_number(alert['value'])}` "
                f"vs threshold `{format_number(alert['threshold'])}`")
    if alert["feature"] and show_detector:
        text += f" ({escape(detector_label(alert['detector']))})"
    # in event time: in a backfill the wall-clock times are all the same minute
    if windows := event_windows_text(alert, reference_ms):
        text += f" — {windows}"
    if resolved:
        text += " — resolved"
    return _cut(text, MAX_LINE_CHARS)


def _sections(lines: list[str], max_sections: int) -> tuple[list[dict[str, Any]], int]:
    """Pack lines into sections of at most SLACK_MAX_SECTION_CHARS; returns (blocks, lines left out)."""
    blocks: list[dict[str, Any]] = []
    current: list[str] = []
    size = 0
    placed = 0
    for line in lines:
        extra = len(line) + (1 if current else 0)
        if current and size + extra > SLACK_MAX_SECTION_CHARS:
            if len(blocks) + 1 >= max_sections:
                break
            blocks.append(_section("\n".join(current)))
            current, size = [], 0
            extra = len(line)
        current.append(line)
        size += extra
        placed += 1
    if current:
        blocks.append(_section("\n".join(current)))
    return blocks, len(lines) - placed


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _name_list(names: list[str], limit_chars: int) -> str:
    """Comma-separated names that fit `limit_chars`, then "and N more"."""
    room = limit_chars - len(f" and {len(names)} more")
    shown: list[str] = []
    size = 0
    for i, name in enumerate(names):
        piece = f"`{escape(_cut(name, 200))}`"
        if size + len(piece) + 2 > room:
            return ", ".join(shown) + f" and {len(names) - i} more"
        shown.append(piece)
        size += len(piece) + 2
    return ", ".join(shown)


def render_slack(message: Mapping[str, Any]) -> dict[str, Any]:
    """The incoming-webhook body for a group message (see driftline.alerts.messages)."""
    kind = message["kind"]
    resolved = kind == "resolve"
    alerts = list(message["alerts"])
    detectors = sorted({a["detector"] for a in alerts})
    header = _cut(f"{_EMOJI.get(kind, '')} {message['title']}".strip(), SLACK_MAX_HEADER_CHARS)
    window = message["window"]
    fields = [
        ("Model", f"`{escape(message['model'])}`"),
        ("Version", f"`{escape(message['version'])}`"),
        ("Detector", escape(", ".join(detector_label(d) for d in detectors)) or "n/a"),
        ("Severity", message["severity"]),
        ("Window", f"{window['start']} → {window['end']}"),
        ("Status", message["status"]),
    ]
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": header, "emoji": True}},
        {"type": "section", "fields": [{"type": "mrkdwn",
                                        "text": _cut(f"*{k}*\n{v}", SLACK_MAX_FIELD_CHARS)}
                                       for k, v in fields]},
    ]
    related = list(message.get("related_features") or [])
    if related:
        prefix = f"*Drifted features ({len(related)}):* "
        blocks.append(_section(prefix + _name_list(related, SLACK_MAX_SECTION_CHARS - len(prefix))))
    listed = alerts[: defaults.SLACK_MAX_LISTED_ALERTS]
    # Blocks left for alert lines: keep two for "and N more" and the dashboard link.
    budget = SLACK_MAX_BLOCKS - len(blocks) - 2
    line_blocks, left_out = _sections([_line(a, resolved, len(detectors) > 1, window.get("start_ms"))
                                       for a in listed], budget)
    blocks.extend(line_blocks)
    more = left_out + len(alerts) - len(listed)
    link = escape(message["dashboard_url"])  # Slack reads "&" in a link as the start of an entity
    if more:
        blocks.append({"type": "context", "elements": [
            {"type": "mrkdwn", "text": f"…and {more} more; <{link}|see them all on the dashboard>"}]})
    blocks.append({"type": "context", "elements": [
        {"type": "mrkdwn", "text": f"<{link}|Open the driftline dashboard> · group `{message['group_key'][:12]}`"}]})
    # `text` is mrkdwn too (the notification preview): escaped like the blocks
    return {"text": _escaped_cut(message["title"], SLACK_MAX_SECTION_CHARS), "blocks": blocks}


class SlackChannel:
    """Posts rendered messages to one incoming webhook; retries are the outbox's job."""

    name: ClassVar[str] = SLACK
    title: ClassVar[str] = "Slack"
    settings: ClassVar[tuple[str, ...]] = ("slack_webhook_url",)
    min_severity: ClassVar[str | None] = "info"  # chat sees everything

    def __init__(self, url: str, timeout: float = defaults.ALERT_HTTP_TIMEOUT_SECONDS):
        self.url = url
        self.timeout = timeout
        self.http = HttpPoster(timeout)

    @classmethod
    def check(cls, settings: Any) -> list[str]:
        require_url(settings, "slack_webhook_url")
        return []

    @classmethod
    def from_settings(cls, settings: Any, timeout: float) -> "SlackChannel":
        return cls(secret(settings.slack_webhook_url) or "", timeout=timeout)

    @staticmethod
    def render(message: Mapping[str, Any], idempotency_key: str) -> dict[str, Any]:
        return render_slack(message)

    def close(self) -> None:
        self.http.close()

    def send(self, payload: Mapping[str, Any], idempotency_key: str) -> SendResult:
        body = json.dumps(dict(payload)).encode()
        return self.http.post(self.url, content=body,
                              headers={"Content-Type": "application/json; charset=utf-8",
                                       "Idempotency-Key": idempotency_key, "User-Agent": "driftline"})
