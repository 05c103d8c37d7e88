"""Alert channels: each renders the channel-neutral message (pure) and sends a rendered body (HTTP).

Rendering happens when a notification is written to the outbox, so the stored
payload is exactly the body that will be sent (secrets excepted: the PagerDuty
routing key, the webhook signature and the retraining token are added at send time
and never stored). Sending happens in `driftline.alerts.delivery`, which owns all retries:
a channel makes one HTTP call and reports a `SendResult`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Mapping

from driftline import defaults
from driftline.config import secret
from driftline.redact import scrub

from driftline.alerts.channels.http import Channel
from driftline.alerts.endpoints import ALERTMANAGER, CHANNELS, PAGERDUTY, SLACK, WEBHOOK


@dataclass
class Channels:
    """The senders the delivery job uses; a channel left None has no endpoint."""

    slack: Channel | None = None
    pagerduty: Channel | None = None
    webhook: Channel | None = None
    alertmanager: Channel | None = None
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
        if name in CHANNELS:
            return getattr(self, name)
        return self.extra.get(name)

    def close(self) -> None:
        """Release pooled connections (the scheduler keeps one Channels for its lifetime)."""
        for name in self.enabled():
            http = getattr(self.get(name), "http", None)
            if http is not None:
                http.close()

    def enabled(self) -> list[str]:
        return [n for n in CHANNELS if self.get(n) is not None] + list(self.extra)

    @classmethod
    def from_settings(cls, settings: Any,
                      timeout: timedelta | float = defaults.ALERT_HTTP_TIMEOUT_SECONDS) -> "Channels":
        from driftline.alerts.channels.alertmanager import AlertmanagerChannel
        from driftline.alerts.channels.pagerduty import PagerDutyChannel
        from driftline.alerts.channels.retrain import RetrainChannel
        from driftline.alerts.channels.slack import SlackChannel
        from driftline.alerts.channels.webhook import WebhookChannel

        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
        return cls(
            slack=SlackChannel(secret(settings.slack_webhook_url), timeout=seconds) if settings.slack_webhook_url else None,
            pagerduty=(PagerDutyChannel(settings.pagerduty_url, secret(settings.pagerduty_routing_key), timeout=seconds)
                       if settings.pagerduty_routing_key else None),
            webhook=(WebhookChannel(secret(settings.webhook_url), secret(settings.webhook_secret), timeout=seconds)
                     if settings.webhook_url else None),
            alertmanager=(AlertmanagerChannel(secret(settings.alertmanager_url), timeout=seconds)
                          if settings.alertmanager_url else None),
            retrain=(RetrainChannel(secret(settings.retrain_webhook_url), secret(settings.retrain_webhook_token),
                                    timeout=seconds, allow_http=settings.retrain_webhook_allow_http)
                     if settings.retrain_webhook_url else None),
            secrets=tuple(settings.secret_values()),
        )


def render(channel: str, message: Mapping[str, Any], idempotency_key: str) -> dict[str, Any] | None:
    """The body `channel` will receive for `message` (None: this channel skips this kind)."""
    if channel == SLACK:
        from driftline.alerts.channels.slack import render_slack
        return render_slack(message)
    if channel == PAGERDUTY:
        from driftline.alerts.channels.pagerduty import render_pagerduty
        return render_pagerduty(message)
    if channel == WEBHOOK:
        from driftline.alerts.channels.webhook import render_webhook
        return render_webhook(message, idempotency_key)
    if channel == ALERTMANAGER:
        from driftline.alerts.channels.alertmanager import render_alertmanager
        return render_alertmanager(message)
    raise ValueError(f"unknown alert channel {channel!r}")
