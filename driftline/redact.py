"""Remove secrets from text before it is logged, stored or shown (pure).

`scrub(text, secrets)` replaces every configured secret (`Settings.secret_values()`:
webhook URLs, routing keys, tokens, passwords), also in its URL-quoted form, by
``***``, then, in every URL left in the text, the userinfo (``user:password@``) and
the query string and fragment (tokens travel there: ``?token=...``). A scheme-less
URL (``hooks.slack.com/services/...``) is a configured secret, so the first step
catches it. Used for every error text of the alert channels and the outbox, and for
what `driftline alerts list` prints.
"""
from __future__ import annotations

import re
from typing import Iterable
from urllib.parse import quote, quote_plus

MASK = "***"
# Shorter secrets are not masked: replacing every "ab" in a message would destroy it,
# and a two-character secret protects nothing anyway.
MIN_SECRET_CHARS = 4
# scheme://[userinfo@]rest, up to whitespace or a quote/bracket that ends a URL in prose or repr().
_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?:[^\s/@'\"<>]*@)?(?P<rest>[^\s'\"<>)\]]*)")

_AFTER_MASK = re.compile(re.escape(MASK) + r"[?#][^\s'\"<>)\]]*")


def _variants(secret: str) -> set[str]:
    return {secret, quote(secret, safe=""), quote_plus(secret), quote(secret, safe="/:")}


def _url_without_credentials(match: re.Match[str]) -> str:
    rest = match.group("rest")
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=-1)
    if cut >= 0:
        rest = rest[:cut] + (f"?{MASK}" if rest[cut] == "?" else f"#{MASK}")
    return match.group("scheme") + rest


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with `secrets`, URL userinfo and URL query strings masked."""
    if not text:
        return text
    variants = {v for s in secrets if s and len(s) >= MIN_SECRET_CHARS for v in _variants(s)}
    for value in sorted(variants, key=len, reverse=True):  # longest first: a URL before its own path
        text = text.replace(value, MASK)
    text = _URL.sub(_url_without_credentials, text)
    return _AFTER_MASK.sub(MASK, text)  # the query of a URL that was itself a secret
