"""The one writer and the one reader of model aliases: `move_alias` and `alias_version`.

`driftline.worker.registry` (train, promote, rollback, retrain) and `driftline baseline` both call
`move_alias`, so each move locks the alias row, updates the versions' stages and appends the same
`AliasEvent` history row, which rollback replays and the dashboard shows. The worker, the rollout
plans and the dashboard read where an alias points through `alias_version`.
"""
from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from driftline.store.models import AliasEvent, ModelAlias, ModelVersion

PRODUCTION = "production"
# the stage of a version that was production and no longer is
ARCHIVED = "archived"


def alias_version(session: Session, model: str, alias: str = PRODUCTION) -> str | None:
    """The version `model`'s `alias` points at, or None when it points nowhere yet (one primary-key read)."""
    row = session.get(ModelAlias, (model, alias))
    return row.version if row is not None else None


def move_alias(session: Session, model: str, version: str, action: str, reason: str | None) -> str | None:
    """Point `model`'s production alias at `version` and record the move; returns the version it pointed at."""
    # the row lock serialises two concurrent moves, so neither loses its history row's previous_version
    alias = session.get(ModelAlias, (model, PRODUCTION), with_for_update=True)
    previous = alias.version if alias is not None else None
    if alias is None:
        session.add(ModelAlias(model=model, alias=PRODUCTION, version=version))
    else:
        alias.version = version
    for row in session.scalars(select(ModelVersion).where(ModelVersion.model == model)):
        row.stage = PRODUCTION if row.version == version else (ARCHIVED if row.stage == PRODUCTION else row.stage)
    session.add(AliasEvent(model=model, alias=PRODUCTION, version=version, previous_version=previous,
                           action=action, reason=reason))
    return previous
