"""`driftline dashboard`: the Streamlit app, headless, on 127.0.0.1, reading the configured store."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from driftline import defaults
from driftline.config import ENV_DASHBOARD_REFRESH, Settings, common_options
from driftline.errors import UserError
from driftline.store import db as store_db

APP = Path(__file__).resolve().with_name("app.py")
# How the launcher tells the app its refresh interval (read by driftline.dashboard.ui). This module imports no
# Streamlit code: imported outside a Streamlit server, its cached functions log a warning each.
REFRESH_ENV = ENV_DASHBOARD_REFRESH


def streamlit_argv(port: int, address: str = "127.0.0.1") -> list[str]:
    """The command line that serves the dashboard (also used by `driftline up`)."""
    return [sys.executable, "-m", "streamlit", "run", str(APP),
            "--server.headless", "true", "--server.address", address, "--server.port", str(port),
            "--browser.gatherUsageStats", "false",
            # The app reads the store, not its own files: no file watcher, no reload on save.
            "--server.fileWatcherType", "none", "--server.runOnSave", "false",
            "--client.toolbarMode", "viewer", "--theme.base", "light"]


def streamlit_env(settings: Settings, refresh_seconds: int) -> dict[str, str]:
    """The environment the app reads its store URL and refresh interval from."""
    return {**os.environ, "DRIFTLINE_DB": settings.db_url, REFRESH_ENV: str(refresh_seconds),
            "DO_NOT_TRACK": os.environ.get("DO_NOT_TRACK", "1")}


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
              help="Port to serve on, on 127.0.0.1 (default: the dashboard_port setting, 8501).")
@click.option("--refresh-seconds", type=click.IntRange(min=0), default=defaults.DASHBOARD_REFRESH_SECONDS,
              show_default=True, help="How often pages redraw themselves; 0 turns auto-refresh off.")
@common_options
def dashboard(port: int | None, refresh_seconds: int, settings: Settings) -> None:
    """Run the Streamlit dashboard (reads the store only)."""
    check_store(settings.db_url)
    port = port or settings.dashboard_port
    argv = streamlit_argv(port)
    click.echo(f"driftline dashboard: http://127.0.0.1:{port} (store {store_db.redacted_url(settings.db_url)})",
               err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    # Replace this process: Ctrl-C and SIGTERM reach Streamlit directly and no parent is left behind.
    os.execve(argv[0], argv, streamlit_env(settings, refresh_seconds))
