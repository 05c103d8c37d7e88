"""Channel names and which of them a deployment has an endpoint for.

Its own module so that the rules (routing by severity) and the channels (sending)
both read it without importing each other.
"""
from __future__ import annotations

from typing import Any

SLACK = "slack"
PAGERDUTY = "pagerduty"
WEBHOOK = "webhook"
ALERTMANAGER = "alertmanager"
RETRAIN = "retrain"
# Channels that receive alert notifications (the retraining webhook gets retrain requests only).
NOTIFY_CHANNELS = (SLACK, PAGERDUTY, WEBHOOK, ALERTMANAGER)
CHANNELS = (*NOTIFY_CHANNELS, RETRAIN)
# The setting that gives each channel its endpoint; a channel whose setting is unset is off.
ENDPOINT_SETTINGS = {SLACK: "slack_webhook_url", PAGERDUTY: "pagerduty_routing_key", WEBHOOK: "webhook_url",
                     ALERTMANAGER: "alertmanager_url", RETRAIN: "retrain_webhook_url"}


def configured_channels(settings: Any) -> list[str]:
    """Channels that have an endpoint in the settings; the others are skipped."""
    return [name for name in CHANNELS if getattr(settings, ENDPOINT_SETTINGS[name])]
