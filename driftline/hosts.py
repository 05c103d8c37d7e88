"""Host names: which addresses are loopback, and whether a request's `Host` header names an allowed host.

A server on loopback is still reachable from a browser on the same machine: a page on
`evil.example` that re-binds its DNS name to 127.0.0.1 reaches it with `Host: evil.example`.
Answering only the Host names the operator listed (and the loopback names, which such a
page cannot send) closes that door (the worker's `worker_allowed_hosts`).
"""
from __future__ import annotations

import ipaddress
from typing import Iterable
from urllib.parse import urlsplit

# The names a client on this machine uses for it; always allowed.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
# An allow-list entry that turns the Host check off (behind a proxy that checks names itself).
ANY_HOST = "*"


def is_loopback(host: str) -> bool:
    """True for localhost and the loopback addresses (127.0.0.0/8, ::1); any other name may be reachable."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str | None:
    """The name of a `Host` header value without its port, lower-cased ("[::1]:8000" -> "::1"); None if malformed."""
    try:
        parsed = urlsplit(f"//{header.strip()}")
        parsed.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        return None
    if parsed.username is not None or parsed.path or parsed.query or parsed.fragment or not parsed.hostname:
        return None
    return parsed.hostname.lower()


def parse_allowed_hosts(value: str | Iterable[str] | None) -> frozenset[str]:
    """The allow-list: the loopback names plus the given ones (comma-separated text or a list), ports dropped."""
    items = value.split(",") if isinstance(value, str) else list(value or ())
    names = set(LOOPBACK_NAMES)
    for item in (i.strip() for i in items):
        if not item:
            continue
        if item == ANY_HOST:
            names.add(ANY_HOST)
            continue
        name = host_name(item)
        if name is None:
            raise ValueError(f"{item!r} is not a host name (expected a name or address, optionally with :PORT)")
        names.add(name)
    return frozenset(names)


def host_allowed(header: str | None, allowed: frozenset[str]) -> bool:
    """Whether a request with this `Host` header (None: no header) may be answered under `allowed`."""
    if ANY_HOST in allowed:
        return True
    name = host_name(header) if header else None
    return name is not None and name in allowed
