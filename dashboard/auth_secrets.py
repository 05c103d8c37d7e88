"""Streamlit's `[auth]` secrets, written from driftline's settings when `driftline dashboard` starts (mode oidc).

Streamlit's `st.login` reads its OpenID Connect client from a secrets file only. driftline keeps the
client secret in its own settings (a `SecretStr`, never logged) and writes that file, 0600, into a
private folder of the user's (never into the repository or the working directory): XDG_RUNTIME_DIR
when set (memory-backed, removed at logout), else a 0700 folder of the user's in the temporary
directory. Streamlit is pointed at exactly this file (`--secrets.files`), so no other secrets file is read.
"""
from __future__ import annotations

import json
import os
import secrets
import stat
import tempfile
from pathlib import Path

from driftline.config import Settings, secret
from driftline.errors import UserError
from driftline.private_files import open_private, private_dir

SECRETS_NAME = "secrets.toml"
CALLBACK_PATH = "/oauth2callback"  # Streamlit's fixed callback route


def runtime_dir(port: int) -> Path:
    """A folder only this user can read, one per dashboard port (two dashboards do not share a file)."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    root = Path(base) / "driftline" if base and Path(base).is_dir() else \
        Path(tempfile.gettempdir()) / f"driftline-{os.getuid()}"
    folder = private_dir(root / f"dashboard-{port}")
    for path in (root, folder):
        info = path.lstat()
        # a shared temporary directory: someone else may have created the folder first, to read what we write
        if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise UserError(f"{path} is not a private folder of this user (owner {info.st_uid}, mode "
                            f"{stat.S_IMODE(info.st_mode):o}); remove it, or set XDG_RUNTIME_DIR")
    return folder


def redirect_uri(settings: Settings) -> str:
    """The OIDC callback URL: the setting, else the dashboard's URL with Streamlit's callback path."""
    return settings.dashboard_oidc_redirect_uri or settings.dashboard_url.rstrip("/") + CALLBACK_PATH


def auth_toml(settings: Settings) -> str:
    """The `[auth]` section (TOML; strings written as JSON strings, which TOML basic strings accept)."""
    cookie = secret(settings.dashboard_oidc_cookie_secret) or secrets.token_urlsafe(32)
    values = {"redirect_uri": redirect_uri(settings), "cookie_secret": cookie,
              "client_id": settings.dashboard_oidc_client_id or "",
              "client_secret": secret(settings.dashboard_oidc_client_secret) or "",
              "server_metadata_url": settings.dashboard_oidc_metadata_url or ""}
    lines = ["# written by `driftline dashboard` from driftline's settings; rewritten at each start", "[auth]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
    lines += ["", "[auth.client_kwargs]", f"scope = {json.dumps(settings.dashboard_oidc_scopes)}", ""]
    return "\n".join(lines)


def write_auth_secrets(settings: Settings, port: int) -> Path:
    """Write the secrets file for a dashboard on `port`; returns its path."""
    path = runtime_dir(port) / SECRETS_NAME
    with open_private(path, "w", encoding="utf-8") as fh:
        fh.write(auth_toml(settings))
    return path
