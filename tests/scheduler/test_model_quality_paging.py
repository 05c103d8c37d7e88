"""Realized model quality pages on accumulated evidence, not on one noisy window.

A seeded decision tree on noisy labels; its baseline is registered from the rows it was fitted on (in-sample
scores, as `driftline baseline --file train.csv --label y` does) or with a holdout quality reference and its
chunk spreads (as `--quality-file holdout.csv` does). Windows of labelled rows are written as the
collector writes them and judged by the real scheduler and alert rules.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.tree import DecisionTreeClassifier
from sqlalchemy import select

from driftline.baseline import Baseline, LabelSummary, compute_baseline
from driftline.config import load_settings
from driftline.detectors.stats.quality import quality_standard_errors
from driftline.detectors.thresholds.spreads import measure_quality_spreads
from driftline.scheduler.jobs import SchedulerJobs
from driftline.store.aliases import move_alias
from driftline.store.db import session_scope
from driftline.store.models import Alert, BaselineRecord, ModelVersion, WindowStateRecord
from driftline.vocabulary import MODEL_QUALITY
from driftline.window_state import EventBatch, WindowState

WINDOW_MS = 3_600_000  # hourly windows: the paging line of a production service
T0 = 1_796_040_000_000  # a window boundary
ROWS = 1_000
NOISE = 0.1  # share of labels flipped at random, before and after the change
# labelled windows after a 30 % flip of the labels within which model_quality pages (docs/detectors.md)
DOCUMENTED_DELAY = 3


def _rows(rng, n):
    x = pd.DataFrame({f"x{i}": rng.normal(0, 1, n) for i in range(4)})
    y = ((x["x0"] > 0) | (x["x1"] > 1)).to_numpy().astype(int)  # axis-aligned: a tree learns it
    return x, np.where(rng.random(n) < NOISE, 1 - y, y)


def _register_model(rng):
    """The tree and its baseline from the rows it was fitted on (in-sample scores)."""
    x, y = _rows(rng, 20_000)
    model = DecisionTreeClassifier(max_depth=8, min_samples_leaf=20, random_state=0).fit(x, y)
    return model, compute_baseline(x, predictions=model.predict_proba(x)[:, 1], labels=y)


def _register(db_url, rng, holdout=False, spreads=True):
    model, baseline = _register_model(rng)
    baseline.quality_reference = "training rows"
    if holdout:  # as `driftline baseline --quality-file holdout.csv` does
        hx, hy = _rows(rng, 20_000)
        scores = model.predict_proba(hx)[:, 1]
        baseline.quality = LabelSummary().add(scores, hy)
        baseline.quality_reference = "holdout"
        baseline.quality_spreads = measure_quality_spreads(scores, hy) if spreads else None
    with session_scope(db_url) as s:
        s.add(ModelVersion(model="m", version="1"))
        s.add(BaselineRecord(model="m", version="1", rows=baseline.rows, summary=baseline.to_dict()))
        s.flush()
        move_alias(s, "m", "1", "promote", "test")
    return model, baseline


def _window(db_url, model, baseline, rng, w, flipped=0.0):
    start = T0 + w * WINDOW_MS
    x, y = _rows(rng, ROWS)
    y = np.where(rng.random(ROWS) < flipped, 1 - y, y)
    scores = model.predict_proba(x)[:, 1]
    events = [{"event_id": f"m-{w}-{i}", "ts_ms": start + i * (WINDOW_MS // ROWS), "model": "m", "version": "1",
               "features": row, "prediction": float(s), "latency_ms": {"total": 10.0}, "status": "ok"}
              for i, (row, s) in enumerate(zip(x.to_dict(orient="records"), scores))]
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(events))
    state.add_labels([float(s) for s in scores], y.tolist())
    with session_scope(db_url) as s:
        s.add(WindowStateRecord(model="m", version="1", window_start_ms=start, window_end_ms=start + WINDOW_MS,
                                partition=0, events=ROWS, state=state.to_bytes()))


def _fired(db_url):
    with session_scope(db_url) as s:
        alerts = s.scalars(select(Alert).where(Alert.detector == MODEL_QUALITY)).all()
        return sorted(a.fired_window_start_ms for a in alerts if a.fired_window_start_ms is not None)


def _run(db_url, seed, windows, change_at=None, **reference):
    rng = np.random.default_rng(seed)
    model, baseline = _register(db_url, rng, **reference)
    for w in range(windows):
        _window(db_url, model, baseline, rng, w, flipped=0.3 if change_at is not None and w >= change_at else 0.0)
    jobs = SchedulerJobs(load_settings(db=db_url, window_seconds=WINDOW_MS // 1000, allowed_lateness_seconds=2))
    assert jobs.evaluate_due_windows(now_ms=T0 + windows * WINDOW_MS + 5_000) == windows
    return [(t - T0) // WINDOW_MS for t in _fired(db_url)]


@pytest.mark.parametrize("reference", [{}, {"holdout": True}], ids=["in-sample", "holdout"])
def test_no_drift_stream_does_not_page(db_url, reference):
    """30 windows of 1 000 labelled rows, nothing changes: the in-sample log loss (0.31 against 0.35-0.62 live)
    breaches window after window, and a holdout one's binned per-row spread understates its heavy tail."""
    assert _run(db_url, seed=31, windows=30, **reference) == []


@pytest.mark.parametrize("reference", [{}, {"holdout": True}], ids=["in-sample", "holdout"])
def test_a_real_drop_in_accuracy_pages_within_the_documented_delay(db_url, reference):
    change = 15
    fired = _run(db_url, seed=32, windows=change + 8, change_at=change, **reference)
    assert fired and change <= fired[0] < change + DOCUMENTED_DELAY


def test_quality_spreads_widen_a_heavy_tailed_metrics_noise_and_survive_the_store():
    rng = np.random.default_rng(7)
    model, baseline = _register_model(rng)
    x, y = _rows(rng, 20_000)
    scores = model.predict_proba(x)[:, 1]
    spreads = measure_quality_spreads(scores, y)
    assert spreads is not None and 1_000 in spreads.sizes and "log_loss" in spreads.metrics
    # binned per-row loss with the outermost bins' midpoints: the chunks show the real spread is wider
    binned = quality_standard_errors(LabelSummary().add(scores, y), LabelSummary().add(scores[:1_000], y[:1_000]))
    assert spreads.standard_deviation("log_loss", 1_000) > 1.5 * binned["log_loss"]
    assert spreads.standard_deviation("accuracy", 4_000) == pytest.approx(
        spreads.standard_deviation("accuracy", 1_000) / 2, rel=0.3)
    baseline.quality_spreads, baseline.quality_reference = spreads, "holdout"
    stored = Baseline.from_dict(baseline.to_dict())
    assert stored.quality_spreads == spreads and stored.quality_reference == "holdout"
    assert stored.fingerprint == baseline.fingerprint
