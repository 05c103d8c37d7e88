"""Alert channels: each renders the channel-neutral message (pure) and sends a rendered body.

Rendering happens when a notification is written to the outbox, so the stored
payload is exactly the body that will be sent (secrets excepted: the PagerDuty
routing key, the webhook signature, the retraining token and the SMTP password are
added at send time and never stored). Sending happens in `driftline.alerts.delivery`,
which owns all retries: a channel makes one attempt and reports a `SendResult`.
Which channels exist is driftline.alerts.channels.registry; what one is,
driftline.alerts.channels.protocol.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any, Iterable, Mapping

from driftline import defaults
from driftline.redact import scrub

from driftline.alerts.channels.protocol import Channel
from driftline.alerts.channels.registry import CHANNEL_TYPES, CHANNELS, is_configured

# Attributes of a sender that hold a secret (masked in error text beside the settings' own secrets).
SECRET_ATTRIBUTES = ("url", "routing_key", "secret", "token", "password")


class Channels:
    """The senders the delivery job uses, by channel name (a registered name left out has no endpoint).

    `Channels(slack=SlackChannel(...), webhook=None)`; `channels.slack` is that sender or None.
    """

    def __init__(self, secrets: Iterable[str] = (), **senders: Channel | None):
        unknown = sorted(set(senders) - set(CHANNELS))
        if unknown:
            raise ValueError(f"unknown alert channel(s) {', '.join(unknown)}; expected {', '.join(CHANNELS)}")
        self._senders = {name: senders[name] for name in CHANNELS if senders.get(name) is not None}
        # configured secrets (Settings.secret_values()) to mask in error text, beside the channels' own
        self.secrets = tuple(secrets)

    def __getattr__(self, name: str) -> Channel | None:
        if name in CHANNELS:
            return self._senders.get(name)
        raise AttributeError(name)

    def scrub(self, text: str) -> str:
        """`text` without any secret of these channels or the settings, nor URL credentials or queries."""
        own = [getattr(sender, attr, None) for sender in self._senders.values() for attr in SECRET_ATTRIBUTES]
        return scrub(text, [*self.secrets, *(v for v in own if isinstance(v, str))])

    def get(self, name: str) -> Channel | None:
        return self._senders.get(name)

    def close(self) -> None:
        """Release pooled connections (the scheduler keeps one Channels for its lifetime)."""
        for sender in self._senders.values():
            sender.close()

    def enabled(self) -> list[str]:
        return list(self._senders)

    @classmethod
    def from_settings(cls, settings: Any,
                      timeout: timedelta | float = defaults.ALERT_HTTP_TIMEOUT_SECONDS) -> "Channels":
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
        return cls(secrets=tuple(settings.secret_values()),
                   **{name: channel.from_settings(settings, seconds) for name, channel in CHANNEL_TYPES.items()
                      if is_configured(channel, settings)})


def render(channel: str, message: Mapping[str, Any], idempotency_key: str) -> dict[str, Any] | None:
    """The body `channel` will receive for `message` (None: this channel skips this kind)."""
    if channel not in CHANNEL_TYPES:
        raise ValueError(f"unknown alert channel {channel!r}")
    return CHANNEL_TYPES[channel].render(message, idempotency_key)
