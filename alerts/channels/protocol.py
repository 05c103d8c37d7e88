"""The `Channel` protocol: what an alert channel is to the rest of driftline.

A channel is one class in one module under driftline.alerts.channels, registered by one line in
driftline.alerts.channels.registry. The class says what it needs configured (`settings`, the first of
which switches it on, and `check`, run when the scheduler and `driftline config check` start), how it
renders the channel-neutral group message (`render`, pure: the stored outbox payload is that body)
and how it sends a rendered body (`send`: one attempt within `timeout` seconds in all, never raising
for what the receiver or the network does, and never retrying: retries are the outbox's job).
Secrets it holds as `url`, `routing_key`, `secret`, `token` or `password` are masked in error text.
"""
from __future__ import annotations

from typing import Any, ClassVar, Mapping, Protocol

from driftline.alerts.channels.http import SendResult


class Channel(Protocol):
    # the name in [alerts.channels], in outbox rows and in `driftline alerts retry --channel`
    name: ClassVar[str]
    # for people: docs and the scheduler's start-up line
    title: ClassVar[str]
    # every setting the channel reads; the first one switches it on (a channel whose first setting is unset is off)
    settings: ClassVar[tuple[str, ...]]
    # the lowest severity it receives unless [alerts.channels] says otherwise; None: it gets no alert
    # notifications at all (the retraining webhook gets retraining requests only)
    min_severity: ClassVar[str | None]

    @classmethod
    def check(cls, settings: Any) -> list[str]:
        """Raise UserError naming the first bad setting (never its value); return warnings for the operator."""
        ...

    @classmethod
    def from_settings(cls, settings: Any, timeout: float) -> "Channel":
        """The sender configured by `settings`, each call bounded by `timeout` seconds in all."""
        ...

    @staticmethod
    def render(message: Mapping[str, Any], idempotency_key: str) -> dict[str, Any] | None:
        """The body this channel receives for a group message (pure; None: it skips this message)."""
        ...

    def send(self, payload: Mapping[str, Any], idempotency_key: str) -> SendResult:
        """One attempt to deliver a rendered body; the result says whether a retry may help."""
        ...

    def close(self) -> None:
        """Release pooled connections."""
        ...
