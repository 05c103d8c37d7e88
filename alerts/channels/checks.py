"""Checks a channel runs on its own settings when the scheduler starts (pure: no I/O).

An endpoint that is not an http(s) URL fails every delivery, and its error text would carry the
URL into the outbox; it is refused at start instead, with an error that names the setting and
never its value (the value is a secret).
"""
from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from driftline.config import secret
from driftline.errors import UserError


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


def require_url(settings: Any, name: str) -> None:
    """Raise UserError when setting `name` is not an http(s) URL, naming the setting only."""
    problem = url_problem(secret(getattr(settings, name)) or "")
    if problem:
        raise UserError(f"{name} {problem} (expected https://host/path; the value is not shown, it is a secret)")


def require_url_list(settings: Any, name: str, expected: str) -> list[str]:
    """The comma-separated http(s) URLs of setting `name`; UserError when one is not, or there is none."""
    value = secret(getattr(settings, name, None)) or ""
    parts = [part.strip() for part in value.split(",") if part.strip()]
    problem = "names no URL" if not parts else next(filter(None, map(url_problem, parts)), None)
    if problem:
        raise UserError(f"{name} {problem} (expected {expected}, comma-separated; "
                        "the value is not shown, it may hold credentials)")
    return parts
