"""What the receiver asks the store: a version's registered features, raw inputs and transform, and a
model's production version.

Both are cached, in bounded maps (least recently used out first): a baseline's names never change
for its version (kept once found); a missing baseline and the production alias are asked for again
after `recheck_s`, so a newly registered version is seen. Thread-safe: the receiver calls it from
several request threads at once, outside its own locks; the maps have their own short lock and the
store is read outside it (two threads missing the same entry may both read it: the same answer).
"""
from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Hashable

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from driftline import defaults
from driftline.store import db
from driftline.store.aliases import alias_version
from driftline.store.models import BaselineRecord, ModelVersion
from driftline.transform import Transform, load_transform

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VersionSchema:
    """How a version's requests become features: its baseline's names (None: no baseline registered), its
    raw inputs when a registered transform makes the features from them, and that transform."""
    features: list[str] | None = None
    inputs: list[str] | None = None
    transform: Transform | None = None


class StoreLookups:
    def __init__(self, db_url: str, recheck_s: float, max_entries: int = defaults.RECEIVER_LOOKUP_CACHE_ENTRIES):
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.db_url = db_url
        self.recheck_s = recheck_s
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._schemas: OrderedDict[Hashable, tuple[VersionSchema, float]] = OrderedDict()
        self._production: OrderedDict[Hashable, tuple[str | None, float]] = OrderedDict()

    def feature_names(self, model: str, version: str) -> list[str] | None:
        """The baseline's feature names in training column order; None when no baseline is registered."""
        return self.schema(model, version).features

    def schema(self, model: str, version: str) -> VersionSchema:
        now = time.monotonic()
        cached = self._get(self._schemas, (model, version))
        if cached is not None and (cached[0].features is not None or now - cached[1] < self.recheck_s):
            return cached[0]
        ok, found = self._read(lambda s: (
            s.scalar(select(BaselineRecord.summary).where(BaselineRecord.model == model,
                                                          BaselineRecord.version == version)),
            s.execute(select(ModelVersion.feature_schema, ModelVersion.transform).where(
                ModelVersion.model == model, ModelVersion.version == version)).first()))
        if not ok:  # a store outage is not "no baseline": not cached, asked again next time
            return VersionSchema()
        summary, row = found
        features = summary.get("features") if isinstance(summary, dict) else None  # Baseline.to_dict()'s layout
        names = [entry["name"] for entry in features] if isinstance(features, list) else None
        schema = VersionSchema(names, *self._inputs_and_transform(model, version, names, row))
        self._put(self._schemas, (model, version), (schema, now))
        return schema

    def production_version(self, model: str) -> str | None:
        now = time.monotonic()
        cached = self._get(self._production, model)
        if cached is not None and now - cached[1] < self.recheck_s:
            return cached[0]
        ok, version = self._read(lambda s: alias_version(s, model))
        if not ok:
            return None
        self._put(self._production, model, (version, now))
        return version

    def cached(self) -> int:
        """Entries held in both maps (each at most `max_entries`)."""
        with self._lock:
            return len(self._schemas) + len(self._production)

    @staticmethod
    def _inputs_and_transform(model: str, version: str, names: list[str] | None,
                              row: Any) -> tuple[list[str] | None, Transform | None]:
        if row is None or not row.transform:
            return None, None
        try:
            transform = load_transform(row.transform)
        except Exception as exc:  # noqa: BLE001 - a refused or broken transform: its requests are read as features
            log.error("%s version %s: its feature transform cannot be used, so requests of raw inputs are not "
                      "transformed: %s", model, version, exc)
            return None, None
        schema = row.feature_schema if isinstance(row.feature_schema, list) else []
        inputs = [entry["name"] for entry in schema if isinstance(entry, dict) and isinstance(entry.get("name"), str)]
        return (inputs if inputs and inputs != names else None), transform

    def _get(self, cache: OrderedDict, key: Hashable) -> Any:
        with self._lock:
            found = cache.get(key)
            if found is not None:
                cache.move_to_end(key)
            return found

    def _put(self, cache: OrderedDict, key: Hashable, value: Any) -> None:
        with self._lock:
            cache[key] = value
            cache.move_to_end(key)
            while len(cache) > self.max_entries:
                cache.popitem(last=False)

    def _read(self, query: Any) -> tuple[bool, Any]:
        """(True, the answer), or (False, None) when the store fails: that pair is dead-lettered with the reason."""
        try:
            with db.session_scope(self.db_url) as session:
                return True, query(session)
        except SQLAlchemyError as exc:
            log.warning("cannot read the store (%s)", exc)
            return False, None
