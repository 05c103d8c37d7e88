"""What the receiver asks the store: a version's registered feature names, and a model's production version.

Both are cached: a baseline's names never change for its version (kept once found); a missing baseline
and the production alias are asked for again after `recheck_s`, so a newly registered version is seen.
"""
from __future__ import annotations

import logging
import time
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from driftline.store import db
from driftline.store.aliases import alias_version
from driftline.store.models import BaselineRecord

log = logging.getLogger(__name__)


class StoreLookups:
    def __init__(self, db_url: str, recheck_s: float):
        self.db_url = db_url
        self.recheck_s = recheck_s
        self._names: dict[tuple[str, str], tuple[list[str] | None, float]] = {}
        self._production: dict[str, tuple[str | None, float]] = {}

    def feature_names(self, model: str, version: str) -> list[str] | None:
        """The baseline's feature names in training column order; None when no baseline is registered."""
        now = time.monotonic()
        cached = self._names.get((model, version))
        if cached is not None and (cached[0] is not None or now - cached[1] < self.recheck_s):
            return cached[0]
        ok, summary = self._read(lambda s: s.scalar(select(BaselineRecord.summary).where(
            BaselineRecord.model == model, BaselineRecord.version == version)))
        if not ok:  # a store outage is not "no baseline": not cached, asked again next time
            return None
        features = summary.get("features") if isinstance(summary, dict) else None  # Baseline.to_dict()'s layout
        names = [entry["name"] for entry in features] if isinstance(features, list) else None
        self._names[(model, version)] = (names, now)
        return names

    def production_version(self, model: str) -> str | None:
        now = time.monotonic()
        cached = self._production.get(model)
        if cached is not None and now - cached[1] < self.recheck_s:
            return cached[0]
        ok, version = self._read(lambda s: alias_version(s, model))
        if not ok:
            return None
        self._production[model] = (version, now)
        return version

    def _read(self, query: Any) -> tuple[bool, Any]:
        """(True, the answer), or (False, None) when the store fails: that pair is dead-lettered with the reason."""
        try:
            with db.session_scope(self.db_url) as session:
                return True, query(session)
        except SQLAlchemyError as exc:
            log.warning("cannot read the store (%s)", exc)
            return False, None
