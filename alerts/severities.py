"""Alert severities, lowest first, and their order (pure).

Its own module so that the rules (routing), the messages (a group's severity) and the channels (each
one's lowest severity) read it without importing each other.
"""
from __future__ import annotations

from driftline import defaults

SEVERITIES = tuple(defaults.ALERT_SEVERITIES)


def severity_rank(severity: str) -> int:
    """Position in info < warning < error < critical (unknown severities rank as warning)."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else SEVERITIES.index("warning")
