"""Where a model version's detector results are rolled up to (scheduler/rollups.py folds whole days, oldest first).

Before `rolled_up_to` a version's results are read from `result_rollups`, from it on from `detector_results`
(rows of rolled days may still sit in a day partition until it is dropped: `unrolled` leaves them out).
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import and_, func, literal, select

from driftline.store.models import DetectorResult, ResultRollup

_NEVER = -(2 ** 62)


def rolled_up_to() -> Any:
    """A subquery of (model, version, upto): the end of each version's rolled-up results."""
    rollups = ResultRollup.__table__
    return (select(rollups.c.model, rollups.c.version, func.max(rollups.c.end_ms).label("upto"))
            .group_by(rollups.c.model, rollups.c.version).subquery())


def unrolled(query: Any, results: Any = DetectorResult.__table__) -> Any:
    """`query` (over `results`) kept to the rows at or past their version's rolled-up span."""
    upto = rolled_up_to()
    return query.outerjoin(upto, and_(upto.c.model == results.c.model, upto.c.version == results.c.version)).where(
        results.c.window_start_ms >= func.coalesce(upto.c.upto, literal(_NEVER)))
