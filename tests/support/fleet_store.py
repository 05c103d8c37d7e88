"""A fleet-sized store in seconds: `clone_fleet(db_url, 1000)` copies one evaluated model to a thousand.

The template is a model the real scheduler evaluated (tests.support.drift_store): its registration, production
alias, window states, window evaluations and detector results are copied row by row, in bulk, to models
`fleet-0000`, `fleet-0001`, ..., optionally moved in time (`start_ms`), so every copy has the shape the detectors
write. Copies differ in what needs attention: every `drift_every`-th model keeps the template's drift (the others
are cleared), every `firing_every`-th has a firing alert, and each has an estimated roc_auc that falls with its
number, below its threshold for the last tenth. The scheduler's /metrics tests, the dashboard's fleet tests and
bench/scheduler_metrics.py and bench/dashboard.py build their fleets here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, insert, select

import numpy as np

from driftline import vocabulary
from driftline.store.db import session_scope
from driftline.store.models import (Alert, BaselineRecord, DetectorResult, ModelAlias, ModelVersion, WindowEvaluation,
                                    WindowStateRecord)

COPIED = (ModelVersion, BaselineRecord, ModelAlias, WindowEvaluation, WindowStateRecord, DetectorResult)
THRESHOLD = 0.75  # the estimated roc_auc's alarm threshold in every copy
# the families whose breaches only every `drift_every`-th copy keeps
CLEARED = (vocabulary.DATA_DRIFT, vocabulary.DATASET_DRIFT, vocabulary.PREDICTION_DRIFT)


@dataclass(frozen=True)
class Fleet:
    models: list[str]
    drifting: list[str]  # the copies that keep the template's drift
    firing: list[str]  # the copies with a firing alert
    below: list[str]  # the copies whose estimated roc_auc is below THRESHOLD


def model_name(i: int) -> str:
    return f"fleet-{i:04d}"


def estimated_auc(i: int, models: int) -> float:
    """Model i's estimated roc_auc: 0.9 for the first, falling to 0.7 for the last (below THRESHOLD past 75 %)."""
    return 0.9 - 0.2 * i / max(models - 1, 1)


def clone_fleet(db_url: str, models: int, template: str = "credit", start_ms: int | None = None,
                drift_every: int = 7, firing_every: int = 50, full: bool = False, chunk: int = 20_000) -> Fleet:
    """Copy `template`'s rows to `models` models (see the module's docstring); `start_ms` moves the template's
    first window there (the dashboard reads recent windows). Without `full` the baselines are not copied and the
    window states are empty: /metrics and the overview never read them, and copying them is most of the time."""
    with session_scope(db_url) as session:
        rows = {model: _rows(session, model.__table__, template) for model in COPIED
                if full or model is not BaselineRecord}
    if not full:
        rows[WindowStateRecord] = [{**r, "state": b""} for r in rows[WindowStateRecord]]
    first = min(r["window_start_ms"] for r in rows[WindowEvaluation])
    shift = 0 if start_ms is None else start_ms - first
    last_start = max(r["window_start_ms"] for r in rows[WindowEvaluation])
    # the estimate's row is one of the latest window's, with the estimate's values
    latest = next(r for r in rows[DetectorResult] if r["window_start_ms"] == last_start and not r["segment"])
    version = str(latest["version"])
    drifting = [model_name(i) for i in range(0, models, drift_every)]
    firing = [model_name(i) for i in range(0, models, firing_every)]
    below = [model_name(i) for i in range(models) if estimated_auc(i, models) < THRESHOLD]
    pending: dict[Table, list[dict[str, Any]]] = {}
    with session_scope(db_url) as session:
        for i in range(models):
            name, keeps_drift = model_name(i), i % drift_every == 0
            for model, found in rows.items():
                table = model.__table__
                for row in found:
                    copy = _moved({**row, "model": name}, shift)
                    if model is DetectorResult and not keeps_drift and copy["detector"] in CLEARED:
                        copy["breached"] = False
                    if model is WindowEvaluation:  # the evaluation's own list of what breached, kept in step
                        copy["summary"] = _summary(row["summary"], keeps_drift, row["window_start_ms"] == last_start
                                                   and estimated_auc(i, models) < THRESHOLD)
                    pending.setdefault(table, []).append(copy)
            auc = estimated_auc(i, models)
            pending[DetectorResult.__table__].append(_moved({
                **latest, "model": name, "detector": vocabulary.ESTIMATED_QUALITY, "feature": "", "segment": "",
                "metric": "roc_auc", "value": auc, "threshold": THRESHOLD, "breached": auc < THRESHOLD,
                "details": {"lower": auc - 0.03, "upper": auc + 0.03, "training": 0.9}}, shift))
            if name in firing:
                pending.setdefault(Alert.__table__, []).append({
                    "fingerprint": f"fleet-{i}", "model": name, "version": version, "detector": vocabulary.DATA_DRIFT,
                    "feature": "income", "segment": "", "severity": "warning", "state": "firing",
                    "summary": f"{name}: income drifted", "details": {}})
            if sum(len(v) for v in pending.values()) >= chunk:
                _flush(session, pending)
        _flush(session, pending)
    return Fleet([model_name(i) for i in range(models)], drifting, firing, below)


def evaluate_template(db_url: str, model: str = "template", features: int = 30, windows: int = 2,
                      start_ms: int | None = None) -> None:
    """Register `model` with `features` features and have the real scheduler judge `windows` closed windows of 300
    events, the last with a third of the features shifted: a template for `clone_fleet` of a realistic shape."""
    from tests.support.drift_store import T0, WINDOW_MS, jobs_for, register, write_window

    rng = np.random.default_rng(1)
    first = T0 if start_ms is None else start_ms
    baseline = register(db_url, model, "1", rng, features=features, rows=2000)
    shifted = {f"f{i}": 3.0 for i in range(3, 3 + features // 3)} | {"income": 25.0}
    for w in range(windows):
        write_window(db_url, model, "1", baseline, first + w * WINDOW_MS, rng, n=300, features=features,
                     shifts=shifted if w == windows - 1 else None)
    jobs_for(db_url).evaluate_due_windows(now_ms=first + (windows + 1) * WINDOW_MS)


def _rows(session, table: Table, model: str) -> list[dict[str, Any]]:
    columns = [c for c in table.columns if c.name != "id" or not c.primary_key]
    return [dict(r._mapping) for r in session.execute(select(*columns).where(table.c.model == model))]


def _summary(summary: dict[str, Any] | None, keeps_drift: bool, estimate_breached: bool) -> dict[str, Any]:
    breached = [b for b in (summary or {}).get("breached", []) if keeps_drift or b.split(":")[0] not in CLEARED]
    return {**(summary or {}), "breached": sorted(breached + [vocabulary.ESTIMATED_QUALITY] * estimate_breached)}


def _moved(row: dict[str, Any], shift: int) -> dict[str, Any]:
    for key in ("window_start_ms", "window_end_ms"):
        if row.get(key) is not None:
            row[key] += shift
    return row


def _flush(session, pending: dict[Table, list[dict[str, Any]]]) -> None:
    for table in (t.__table__ for t in (ModelVersion, BaselineRecord, ModelAlias, WindowEvaluation,
                                        WindowStateRecord, DetectorResult, Alert)):
        if pending.get(table):
            session.execute(insert(table), pending.pop(table))
    session.flush()
