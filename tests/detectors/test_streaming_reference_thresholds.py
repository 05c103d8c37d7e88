"""Reference-derived thresholds in the streaming service: from the chunk spreads the baseline keeps."""
from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest

from driftline import defaults
from driftline.baseline import Baseline, ThresholdSpreads, compute_baseline
from driftline.detectors.batch.engine import ColumnRoles, Judging, detect
from driftline.detectors.thresholds.decision import DriftThresholds
from driftline.detectors.thresholds.spreads import NO_SPREADS, measure_spreads, spread_sizes
from driftline.detectors.families.window import evaluate_window
from driftline.errors import UserError
from driftline.vocabulary import (DATASET_DRIFT, DATA_DRIFT, JENSENSHANNON, PREDICTION_DRIFT, PSI,
                                  THRESHOLD_NOTE_KEY, THRESHOLD_SOURCE_KEY, WASSERSTEIN)
from driftline.window_state import EventBatch, WindowState

if TYPE_CHECKING:  # the annotation only; the tests import the scheduler where they use it
    from driftline.scheduler.jobs import SchedulerJobs

T0 = 1_767_225_600_000
REFERENCE = DriftThresholds(threshold_source="reference")
DERIVED = (PSI, WASSERSTEIN, JENSENSHANNON)


def _training(rng: np.random.Generator, rows: int, block: int = 500) -> pd.DataFrame:
    """`stable` is one distribution throughout; `wandering`'s level moves from block to block (a season)."""
    levels = np.repeat(rng.normal(0.0, 0.6, rows // block + 1), block)[:rows]
    return pd.DataFrame({"stable": rng.normal(0.0, 1.0, rows), "wandering": levels + rng.normal(0.0, 1.0, rows),
                         "shop": rng.choice(["a", "b", "c"], rows).astype(object)})


def _kinds(baseline: Baseline) -> dict[str, str]:
    return {name: baseline.kind(name) for name in baseline.feature_names}


@pytest.fixture(scope="module")
def training() -> pd.DataFrame:
    return _training(np.random.default_rng(1), 20_000)


@pytest.fixture(scope="module")
def scores(training) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-training["stable"].to_numpy()))


@pytest.fixture(scope="module")
def baseline(training, scores) -> Baseline:
    found = compute_baseline(training, categorical=["shop"], predictions=scores)
    found.threshold_spreads = measure_spreads(training, _kinds(found), scores)
    return Baseline.from_dict(found.to_dict())  # as the scheduler reads it from the store


def _state(baseline: Baseline, frame: pd.DataFrame, scores: np.ndarray, seed: int) -> WindowState:
    events = [{"event_id": uuid.UUID(int=(seed << 64) | i).hex, "ts": T0 + i, "features": record,
               "prediction": float(score), "latency_ms": {"total": 10.0}, "status": "ok"}
              for i, (record, score) in enumerate(zip(frame.to_dict(orient="records"), scores))]
    return WindowState.empty(baseline).add_batch(EventBatch.from_events(events))


def _drift(results) -> dict[str, object]:
    return {r.feature or r.detector: r for r in results if r.detector in (DATA_DRIFT, PREDICTION_DRIFT, DATASET_DRIFT)}


def _window(baseline: Baseline, rows: int, seed: int, thresholds: DriftThresholds = REFERENCE) -> dict[str, object]:
    frame = _training(np.random.default_rng(seed), rows)
    state = _state(baseline, frame, 1.0 / (1.0 + np.exp(-frame["stable"].to_numpy())), seed)
    return _drift(evaluate_window(baseline, state, thresholds=thresholds,
                                  families=[DATA_DRIFT, PREDICTION_DRIFT]).results)


def test_a_feature_with_a_naturally_wide_spread_gets_a_higher_bar(baseline):
    found = _window(baseline, 1_000, seed=2)
    stable, wandering = found["stable"], found["wandering"]
    assert wandering.threshold > 2 * stable.threshold  # the PSI floor
    assert wandering.details["tests"][WASSERSTEIN]["threshold"] > stable.details["tests"][WASSERSTEIN]["threshold"]
    assert stable.threshold < defaults.PSI_THRESHOLD  # a steady feature's bar is lower than the fixed one
    for result in found.values():
        assert result.details[THRESHOLD_SOURCE_KEY] == "reference"
        assert THRESHOLD_NOTE_KEY not in result.details
    assert found["prediction"].details["tests"][PSI]["threshold"] != defaults.PSI_THRESHOLD
    # the significance level is not derived
    assert stable.details["tests"]["ks"]["threshold"] == defaults.DRIFT_ALPHA


def test_larger_windows_get_lower_bars(baseline):
    small, large = _window(baseline, 300, seed=3), _window(baseline, 3_000, seed=3)
    for name in ("stable", "wandering", "shop"):
        assert large[name].threshold < small[name].threshold


def _detect_thresholds(training: pd.DataFrame, rows: int) -> dict[str, dict[str, float]]:
    current = _training(np.random.default_rng(4), rows)
    window = detect(training, current, columns=ColumnRoles(categorical=["shop"]),
                    judging=Judging(thresholds=REFERENCE, multivariate=False))["windows"][0]
    return {f["name"]: {name: test["threshold"] for name, test in f["tests"].items() if name in DERIVED}
            for f in window["features"]}


def _service_thresholds(baseline: Baseline, rows: int) -> dict[str, dict[str, float]]:
    return {name: {statistic: result.details["tests"][statistic]["threshold"]
                   for statistic in result.details["tests"] if statistic in DERIVED}
            for name, result in _window(baseline, rows, seed=4).items() if name in ("stable", "wandering", "shop")}


@pytest.mark.parametrize("rows", [200, 1_000, 2_000])
def test_on_a_measured_size_the_service_derives_what_detect_derives(training, baseline, rows):
    assert rows in baseline.threshold_spreads.sizes
    expected, found = _detect_thresholds(training, rows), _service_thresholds(baseline, rows)
    assert found.keys() == expected.keys()
    for name, statistics in expected.items():
        assert found[name] == pytest.approx(statistics, rel=1e-9), name


@pytest.mark.parametrize("rows, below, above", [(700, 500, 1_000), (1_500, 1_000, 2_000)])
def test_between_measured_sizes_the_service_lies_between_detects_thresholds(training, baseline, rows, below, above):
    low, high = _detect_thresholds(training, below), _detect_thresholds(training, above)
    for name, statistics in _service_thresholds(baseline, rows).items():
        for statistic, value in statistics.items():
            bounds = sorted((low[name][statistic], high[name][statistic]))
            assert bounds[0] * (1 - 1e-9) <= value <= bounds[1] * (1 + 1e-9), (name, statistic, value, bounds)


def test_fixed_thresholds_stay_the_default_in_the_service(baseline):
    found = _window(baseline, 1_000, seed=5, thresholds=DriftThresholds())
    assert found["stable"].threshold == defaults.PSI_THRESHOLD
    assert {r.details[THRESHOLD_SOURCE_KEY] for r in found.values()} == {"fixed"}


def test_a_feature_override_wins_over_the_derived_threshold(baseline):
    thresholds = DriftThresholds.from_mapping({"thresholds": "reference", "features": {"stable": {"psi": 0.7}}})
    found = _window(baseline, 1_000, seed=6, thresholds=thresholds)
    assert found["stable"].threshold == 0.7
    assert found["wandering"].threshold != defaults.PSI_THRESHOLD


def test_an_old_baseline_without_spreads_falls_back_to_fixed_and_says_so(baseline):
    old = Baseline.from_dict({**baseline.to_dict(), "threshold_spreads": None})
    found = _window(old, 1_000, seed=7)
    assert found["stable"].threshold == defaults.PSI_THRESHOLD
    for result in found.values():
        assert result.details[THRESHOLD_SOURCE_KEY] == "fixed"
        assert result.details[THRESHOLD_NOTE_KEY] == NO_SPREADS


def test_a_window_larger_than_the_spreads_reach_falls_back_to_fixed(baseline):
    largest = baseline.threshold_spreads.sizes[-1]
    assert largest == 20_000 // defaults.REFERENCE_THRESHOLD_MIN_CHUNKS
    found = _window(baseline, largest + 500, seed=8)
    assert found["stable"].threshold == defaults.PSI_THRESHOLD
    assert f"up to {largest} rows" in found["stable"].details[THRESHOLD_NOTE_KEY]


def test_spread_sizes_follow_the_grid_up_to_a_fifth_of_the_rows():
    assert spread_sizes(3_000) == [50, 100, 200, 500, 600]
    assert spread_sizes(1_000) == [50, 100, 200]
    assert spread_sizes(100) == [20]
    assert spread_sizes(4) == []


def test_malformed_spreads_are_a_clear_error(baseline):
    stored = baseline.threshold_spreads.to_dict()
    with pytest.raises(UserError, match="threshold spreads"):
        ThresholdSpreads.from_dict({**stored, "sizes": [100, 50]})
    with pytest.raises(UserError, match="threshold spreads"):
        ThresholdSpreads.from_dict({**stored, "chunks": "x"})
    with pytest.raises(UserError, match="threshold spreads"):
        ThresholdSpreads.from_dict({**stored, "features": {"stable": {PSI: {"mean": [0.1], "std": [0.1]}}}})
    spreads = ThresholdSpreads.from_dict({**stored, "features": {"stable": {PSI: {
        "mean": [float("nan")] * len(stored["sizes"]), "std": [0.0] * len(stored["sizes"])}}}})
    assert spreads.thresholds(1_000, 3.0)[0]["stable"] == {}  # a NaN level derives nothing: the fixed one stays


def _store_windows(db_url: str, baseline: Baseline, windows: int, toml) -> "SchedulerJobs":
    """Version m/1 with `baseline`, `windows` closed windows of 400 events, and the scheduler's jobs."""
    from driftline.config import load_settings
    from driftline.scheduler.jobs import SchedulerJobs
    from driftline.store.db import session_scope
    from driftline.store.models import BaselineRecord, ModelVersion, WindowStateRecord

    with session_scope(db_url) as s:
        s.add(ModelVersion(model="m", version="1"))
        s.add(BaselineRecord(model="m", version="1", rows=baseline.rows, summary=baseline.to_dict()))
        for w in range(windows):
            frame = _training(np.random.default_rng(20 + w), 400)
            state = _state(baseline, frame, np.full(400, 0.5), seed=20 + w)
            s.add(WindowStateRecord(model="m", version="1", window_start_ms=T0 + w * 10_000,
                                    window_end_ms=T0 + (w + 1) * 10_000, partition=0, events=400,
                                    state=state.to_bytes()))
    toml.write_text('[drift]\nthresholds = "reference"\n')
    return SchedulerJobs(load_settings(toml, db=db_url, window_seconds=10, allowed_lateness_seconds=2))


def _stored_drift(db_url: str) -> list:
    from sqlalchemy import select

    from driftline.store.db import session_scope
    from driftline.store.models import DetectorResult

    with session_scope(db_url) as s:
        return [(r.feature, r.metric, r.threshold, dict(r.details)) for r in s.scalars(
            select(DetectorResult).where(DetectorResult.detector == DATA_DRIFT))]


def test_the_scheduler_uses_the_stored_spreads(baseline, sqlite_url, tmp_path):
    jobs = _store_windows(sqlite_url, baseline, 1, tmp_path / "driftline.toml")
    assert jobs.evaluate_due_windows(now_ms=T0 + 60_000) == 1
    stored = {feature: (threshold, details) for feature, _, threshold, details in _stored_drift(sqlite_url)}
    assert stored["wandering"][0] > 2 * stored["stable"][0]
    assert {details[THRESHOLD_SOURCE_KEY] for _, details in stored.values()} == {"reference"}


def test_the_scheduler_falls_back_for_an_old_baseline_and_logs_it_once(baseline, sqlite_url, tmp_path, caplog):
    old = Baseline.from_dict({**baseline.to_dict(), "threshold_spreads": None})
    jobs = _store_windows(sqlite_url, old, 3, tmp_path / "driftline.toml")
    with caplog.at_level(logging.WARNING):
        assert jobs.evaluate_due_windows(now_ms=T0 + 60_000) == 3
    assert sum(NO_SPREADS in r.getMessage() for r in caplog.records) == 1
    stored = _stored_drift(sqlite_url)
    assert len(stored) == 3 * 3
    for _, _, threshold, details in stored:
        assert threshold == defaults.PSI_THRESHOLD
        assert details[THRESHOLD_SOURCE_KEY] == "fixed" and details[THRESHOLD_NOTE_KEY] == NO_SPREADS
