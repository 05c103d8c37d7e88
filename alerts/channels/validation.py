"""Check the channel settings when the scheduler starts (pure: no I/O).

An endpoint that is not an http(s) URL fails every delivery, and its error text
would carry the URL into the outbox; it is refused at start instead, with an error
that names the setting and never its value (the value is a secret).
"""
from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from driftline.config import secret
from driftline.errors import UserError

# Settings holding an endpoint URL, and the setting that switches that channel on.
URL_SETTINGS = (("slack_webhook_url", "slack_webhook_url"), ("pagerduty_url", "pagerduty_routing_key"),
                ("webhook_url", "webhook_url"), ("retrain_webhook_url", "retrain_webhook_url"))
# Settings holding several comma-separated endpoint URLs, each checked like the above.
URL_LIST_SETTINGS = ("alertmanager_url",)


def url_problem(value: str) -> str | None:
    """Why `value` is not an absolute http(s) URL with a host, or None."""
    try:
        parts = urlsplit(value.strip())
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return "is not a valid URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "is not an http(s) URL"
    return None


def check_channel_settings(settings: Any) -> list[str]:
    """Raise UserError naming the first bad channel URL setting; return warnings for the operator."""
    for name, switch in URL_SETTINGS:
        if not getattr(settings, switch, None):
            continue
        value = secret(getattr(settings, name))
        problem = url_problem(value or "")
        if problem:
            raise UserError(f"{name} {problem} (expected https://host/path; the value is not shown, it is a secret)")
    for name in URL_LIST_SETTINGS:
        value = secret(getattr(settings, name, None)) or ""
        if not getattr(settings, name, None):
            continue
        parts = [part.strip() for part in value.split(",") if part.strip()]
        problem = "names no URL" if not parts else next(filter(None, map(url_problem, parts)), None)
        if problem:
            raise UserError(f"{name} {problem} (expected http://host:9093, comma-separated; "
                            "the value is not shown, it may hold credentials)")
    warnings = []
    if settings.webhook_url and not secret(settings.webhook_secret):
        warnings.append("webhook_url is set but webhook_secret is not: webhooks go out unsigned, so a receiver "
                        "cannot tell them from forged ones; set DRIFTLINE_WEBHOOK_SECRET")
    return warnings
