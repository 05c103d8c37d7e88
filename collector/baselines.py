"""Look-ups the folding needs from the store: baselines (cached) and stored watermarks."""
from __future__ import annotations

import logging
import time

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from driftline.collector import store
from driftline.baseline import Baseline

log = logging.getLogger(__name__)


class BaselineLookup:
    """Baselines per model version. A found baseline is kept (they are immutable per version);
    a missing one is asked for again after `recheck_s`, so drift starts once it is registered."""

    def __init__(self, engine: Engine, recheck_s: float):
        self.engine = engine
        self.recheck_s = recheck_s
        self._cached: dict[tuple[str, str], tuple[Baseline | None, float]] = {}

    def get(self, model: str, version: str) -> Baseline | None:
        now = time.monotonic()
        cached = self._cached.get((model, version))
        if cached is not None and (cached[0] is not None or now - cached[1] < self.recheck_s):
            return cached[0]
        try:
            baseline = store.load_baseline(self.engine, model, version)
        except (SQLAlchemyError, ValueError, KeyError, TypeError) as exc:
            # Counting goes on without it (numeric values stay unbinned); looked up again later.
            log.warning("cannot read the baseline of %s v%s (%s)", model, version, exc)
            baseline = None
        self._cached[(model, version)] = (baseline, now)
        return baseline


def stored_watermark_or_none(engine: Engine, model: str, version: str, partition: int) -> int | None:
    """`store.stored_watermark`, or None (judged from this partition's events only) when the store fails."""
    try:
        return store.stored_watermark(engine, model, version, partition)
    except (SQLAlchemyError, ValueError) as exc:
        log.warning("cannot read the stored windows of %s v%s (%s)", model, version, exc)
        return None
