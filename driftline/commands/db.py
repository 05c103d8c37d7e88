"""`driftline db upgrade` (run the store's Alembic migrations) and `driftline db prune` (apply retention)."""
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


@db.command()
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@common_options
def prune(dry_run: bool, settings) -> None:  # noqa: ANN001
    """Delete rows past the [retention] ages, and rows timestamped too far in the future."""
    from driftline.scheduler.retention import RetentionPolicy
    from driftline.scheduler.retention import prune as prune_store

    policy = RetentionPolicy.from_settings(settings)
    store_db.require_migrated(settings.db_url)
    counts = prune_store(settings.db_url, policy, dry_run=dry_run)
    verb = "would delete" if dry_run else "deleted"
    width = max(len(table) for table in counts)
    for table, count in counts.items():
        click.echo(f"{table:<{width}}  {verb} {count}")
    click.echo(f"{'total':<{width}}  {verb} {sum(counts.values())}")
