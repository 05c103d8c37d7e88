"""The alert channels driftline has: one registration line each.

Everything that names channels reads this one table: the outbox's senders and delivery lanes
(`Channels.from_settings`, driftline.alerts.delivery), routing (`[alerts.channels]`, its defaults and
its errors), the start-up checks (driftline.alerts.channels.validation, `driftline config check`),
`driftline alerts retry --channel`, and the docs (a test holds docs/alerts.md and
docs/configuration.md to it). Adding a channel: one module with a class that follows
`driftline.alerts.channels.protocol.Channel`, its settings in driftline.config.Settings, and a line
below (docs/extending.md, "Adding an alert channel"). The order is the order notifications are
queued in and channels are listed.
"""
from __future__ import annotations

from typing import Any

from driftline.alerts.channels.alertmanager import AlertmanagerChannel
from driftline.alerts.channels.email import EmailChannel
from driftline.alerts.channels.pagerduty import PagerDutyChannel
from driftline.alerts.channels.protocol import Channel
from driftline.alerts.channels.retrain import RetrainChannel
from driftline.alerts.channels.slack import SlackChannel
from driftline.alerts.channels.teams import TeamsChannel
from driftline.alerts.channels.webhook import WebhookChannel

CHANNEL_TYPES: dict[str, type[Channel]] = {channel.name: channel for channel in (
    SlackChannel,
    PagerDutyChannel,
    WebhookChannel,
    AlertmanagerChannel,
    TeamsChannel,
    EmailChannel,
    RetrainChannel,
)}
CHANNELS = tuple(CHANNEL_TYPES)
# Channels that receive alert notifications (the retraining webhook gets retraining requests only).
NOTIFY_CHANNELS = tuple(name for name, channel in CHANNEL_TYPES.items() if channel.min_severity is not None)


def default_routes() -> dict[str, str]:
    """Each notified channel -> the lowest severity it receives when [alerts.channels] does not say."""
    return {name: channel.min_severity for name, channel in CHANNEL_TYPES.items() if channel.min_severity is not None}


def is_configured(channel: type[Channel], settings: Any) -> bool:
    """Whether `settings` switch `channel` on (its first setting is set)."""
    return bool(getattr(settings, channel.settings[0], None))


def configured_channels(settings: Any) -> list[str]:
    """Channels that have an endpoint in the settings; the others are skipped."""
    return [name for name, channel in CHANNEL_TYPES.items() if is_configured(channel, settings)]
