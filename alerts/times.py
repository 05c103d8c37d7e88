"""Time helpers shared by the alert modules: UTC normalisation and durations such as "2h"."""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from driftline.errors import UserError
from driftline.store.models import utcnow

__all__ = ["as_utc", "iso", "iso_from_ms", "parse_duration", "utcnow"]

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def as_utc(value: datetime | None) -> datetime | None:
    """An aware UTC datetime. SQLite gives back naive datetimes; everything we store is UTC."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def parse_duration(value: str | int | float, where: str = "duration") -> timedelta:
    """"90s", "30m", "2h", "1d", "1h30m", or a number of seconds; a UserError otherwise."""
    if isinstance(value, bool):
        raise UserError(f"{where}: expected a duration such as 30m or 2h, got {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise UserError(f"{where}: a duration cannot be negative ({value})")
        return timedelta(seconds=float(value))
    text = str(value).strip().lower()
    if not text or _DURATION_PART.sub("", text) != "":
        raise UserError(f"{where}: cannot read {value!r} as a duration; use e.g. 90s, 30m, 2h, 1d or 1h30m")
    return timedelta(seconds=sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(text)))


def iso_from_ms(epoch_ms: int | None) -> str | None:
    if epoch_ms is None:
        return None
    return datetime.fromtimestamp(epoch_ms / 1000, timezone.utc).isoformat().replace("+00:00", "Z")


def iso(value: datetime | None) -> str | None:
    value = as_utc(value)
    return None if value is None else value.isoformat().replace("+00:00", "Z")
