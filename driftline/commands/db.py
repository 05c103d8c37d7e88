"""`driftline db upgrade`: run the store's Alembic migrations."""
from __future__ import annotations

import click

from driftline.config import common_options
from driftline.store import db as store_db


@click.group()
def db() -> None:
    """Database maintenance."""


@db.command()
@click.option("--revision", default="head", show_default=True, help="Target revision.")
@common_options
def upgrade(revision: str, settings) -> None:  # noqa: ANN001
    """Create or migrate the store's tables (idempotent)."""
    store_db.upgrade(settings.db_url, revision)
    click.echo(f"store at {store_db.redacted_url(settings.db_url)} is at revision {revision}")
