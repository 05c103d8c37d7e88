"""Check every configured channel's settings when the scheduler starts (pure: no I/O).

Each channel of the registry whose switching setting is set runs its own `check`
(driftline.alerts.channels.protocol); the first bad setting stops the start with an error
that names it, never its value. `driftline config check` runs the same.
"""
from __future__ import annotations

from typing import Any

from driftline.alerts.channels.registry import CHANNEL_TYPES, is_configured


def check_channel_settings(settings: Any) -> list[str]:
    """Raise UserError naming the first bad channel setting; return warnings for the operator."""
    warnings: list[str] = []
    for channel in CHANNEL_TYPES.values():
        if is_configured(channel, settings):
            warnings += channel.check(settings)
    return warnings
