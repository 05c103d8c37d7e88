"""`driftline dashboard`: the Streamlit app, headless, reading the configured store.

On 127.0.0.1 by default; on any other address (`--host`) only with a login (docs/sign-on.md):
the sign-on settings are checked here, before Streamlit starts, and for OpenID Connect the
`[auth]` secrets file is written (driftline.dashboard.auth_secrets) and given to Streamlit.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from driftline import defaults
from driftline.config import ENV_CONFIG, ENV_DASHBOARD_REFRESH, Settings, common_options
from driftline.dashboard.access import OIDC, check_settings
from driftline.dashboard.auth_secrets import redirect_uri, write_auth_secrets
from driftline.errors import UserError
from driftline.store import db as store_db

APP = Path(__file__).resolve().with_name("app.py")
# How the launcher tells the app its refresh interval (read by driftline.dashboard.ui). This module imports no
# Streamlit code: imported outside a Streamlit server, its cached functions log a warning each.
REFRESH_ENV = ENV_DASHBOARD_REFRESH


def streamlit_argv(port: int, address: str = "127.0.0.1", secrets_file: Path | None = None) -> list[str]:
    """The command line that serves the dashboard; `secrets_file`: Streamlit's only secrets file (its `[auth]`)."""
    secrets = ["--secrets.files", str(secrets_file)] if secrets_file is not None else []
    return [sys.executable, "-m", "streamlit", "run", str(APP), *secrets,
            "--server.headless", "true", "--server.address", address, "--server.port", str(port),
            "--browser.gatherUsageStats", "false",
            # The app reads the store, not its own files: no file watcher, no reload on save.
            "--server.fileWatcherType", "none", "--server.runOnSave", "false",
            "--client.toolbarMode", "viewer", "--theme.base", "light"]


def streamlit_env(settings: Settings, refresh_seconds: int) -> dict[str, str]:
    """The environment the app reads its store URL and refresh interval from."""
    config = {ENV_CONFIG: str(settings.config_path.resolve())} if settings.config_path else {}
    return {**os.environ, **config, "DRIFTLINE_DB": settings.db_url, REFRESH_ENV: str(refresh_seconds),
            "DO_NOT_TRACK": os.environ.get("DO_NOT_TRACK", "1"),
            # Streamlit's server (uvicorn) would otherwise take X-Forwarded-For from a loopback peer as the
            # client's address; the proxy mode trusts headers by the connection's real peer, so none is rewritten.
            "FORWARDED_ALLOW_IPS": ""}


def check_store(url: str) -> None:
    """A clear error before starting when the store does not exist or has no tables."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:") \
            and not Path(parsed.database).exists():
        raise UserError(f"no store at {parsed.database}; create it with `driftline db upgrade` "
                        "(or `driftline train` / `driftline up`), or point --db at an existing one")
    store_db.require_migrated(url)


@click.command()
@click.option("--port", type=click.IntRange(1, 65535), default=None,
              help="Port to serve on (default: the dashboard_port setting, 8501).")
@click.option("--host", default=None,
              help="Address to listen on (default: the dashboard_host setting, 127.0.0.1); any address but "
                   "loopback needs a login (dashboard_auth oidc or proxy).")
@click.option("--refresh-seconds", type=click.IntRange(min=0), default=defaults.DASHBOARD_REFRESH_SECONDS,
              show_default=True, help="How often pages redraw themselves; 0 turns auto-refresh off.")
@common_options
def dashboard(port: int | None, host: str | None, refresh_seconds: int, settings: Settings) -> None:
    """Run the Streamlit dashboard (reads the store only)."""
    host = (host or settings.dashboard_host).strip()
    for note in check_settings(settings, host):
        click.echo(f"driftline dashboard: {note}", err=True)
    check_store(settings.db_url)
    port = port or settings.dashboard_port
    secrets_file = write_auth_secrets(settings, port) if settings.dashboard_auth == OIDC else None
    argv = streamlit_argv(port, host, secrets_file)
    shown = f"[{host}]" if ":" in host else host
    login = {"none": "no login", "proxy": "identity from the proxy's headers"}.get(
        settings.dashboard_auth, f"OpenID Connect login, callback {redirect_uri(settings)}")
    click.echo(f"driftline dashboard: http://{shown}:{port} ({login}; store "
               f"{store_db.redacted_url(settings.db_url)})", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    # Replace this process: Ctrl-C and SIGTERM reach Streamlit directly and no parent is left behind.
    os.execve(argv[0], argv, streamlit_env(settings, refresh_seconds))
