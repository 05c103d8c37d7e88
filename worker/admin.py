"""Who may open the worker's admin API (/admin/*): the bind address decides what token is acceptable.

The default token (config.DEFAULT_RETRAIN_TOKEN) is published in docs/configuration.md, so it is
only good where nobody else can connect: a loopback bind. On any other address the
worker refuses to start with it (and with an empty token), naming the setting to change,
rather than generating a token nobody knows about.
"""
from __future__ import annotations

from driftline.config import DEFAULT_RETRAIN_TOKEN
from driftline.hosts import is_loopback

__all__ = ["TOKEN_SETTING", "admin_token_problem", "is_loopback"]

TOKEN_SETTING = "DRIFTLINE_RETRAIN_TOKEN"


def admin_token_problem(host: str, token: str | None) -> str | None:
    """Why the worker must not listen on `host` with this admin token, in words; None when it may."""
    if is_loopback(host):
        return None
    if not token:
        return (f"the admin token is empty; set {TOKEN_SETTING} (settings.retrain_token) to a secret of your own "
                f"before listening on {host}")
    if token == DEFAULT_RETRAIN_TOKEN:
        return (f"the admin token is the published default; set {TOKEN_SETTING} (settings.retrain_token) to a "
                f"secret of your own before listening on {host} (the default is accepted on 127.0.0.1 only)")
    return None
