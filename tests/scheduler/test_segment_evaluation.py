"""The scheduled evaluation with [segments]: each segment judged against its own training segment, stored under
"column=value", alerted on apart from the whole population, which is judged exactly as without segments."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import delete, select

from driftline.baseline import compute_baseline
from driftline.config import load_settings
from driftline.scheduler.jobs import SchedulerJobs
from driftline.segments import SegmentSpec
from driftline.store.db import session_scope
from driftline.store.models import (Alert, BaselineRecord, DetectorResult, ModelVersion, WindowEvaluation,
                                    WindowStateRecord)
from driftline.vocabulary import ACCURACY, DATA_DRIFT, LATENCY, MODEL_QUALITY
from driftline.window_state import EventBatch, WindowState

WINDOW_MS = 10_000
T0 = 1_796_040_000_000
SPEC = SegmentSpec(columns=("region", "shop"))


def frame(rng, n, north_shift=0.0):
    out = pd.DataFrame({"income": rng.normal(50, 10, n), "age": rng.normal(40, 8, n),
                        "region": rng.choice(["north", "south", "east"], n, p=[0.3, 0.35, 0.35])})
    out.loc[out["region"] == "north", "income"] += north_shift
    return out


def events(rng, n, start_ms, north_shift=0.0):
    return [{"event_id": f"e{start_ms}-{i}", "ts_ms": start_ms + int(i * WINDOW_MS / n), "model": "m",
             "version": "1", "features": row, "prediction": float(rng.uniform()),
             "latency_ms": {"total": float(rng.uniform(5, 20))}, "status": "ok", "tags": {"shop": f"s{i % 3}"}}
            for i, row in enumerate(frame(rng, n, north_shift).to_dict(orient="records"))]


@pytest.fixture
def seeded(db_url):
    rng = np.random.default_rng(5)
    baseline = compute_baseline(frame(rng, 6000), predictions=rng.uniform(size=6000))
    assert set(baseline.segments) == {"region"}  # categorical features get segment references
    with session_scope(db_url) as s:
        s.add(ModelVersion(model="m", version="1"))
        s.add(BaselineRecord(model="m", version="1", rows=6000, summary=baseline.to_dict()))
    return db_url, baseline


def write(db_url, baseline, start, partition, batch_events):
    state = WindowState.empty(baseline, segments=SPEC).add_batch(EventBatch.from_events(batch_events))
    with session_scope(db_url) as s:
        s.add(WindowStateRecord(model="m", version="1", window_start_ms=start, window_end_ms=start + WINDOW_MS,
                                partition=partition, events=len(batch_events), state=state.to_bytes()))


def jobs(db_url, tmp_path, segments: bool):
    path = tmp_path / ("segments.toml" if segments else "plain.toml")
    path.write_text('[segments]\ncolumns = ["region", "shop"]\n' if segments else "")
    return SchedulerJobs(load_settings(path, db=db_url, window_seconds=10, allowed_lateness_seconds=2))


def results(db_url, start):
    with session_scope(db_url) as s:
        return [(r.segment, r.detector, r.feature, r.metric, r.value, r.breached, r.details)
                for r in s.scalars(select(DetectorResult).where(DetectorResult.window_start_ms == start)
                                   .order_by(DetectorResult.id))]


def test_segments_are_judged_stored_and_alerted_apart_from_an_unchanged_whole_population(seeded, tmp_path):
    db_url, baseline = seeded
    rng = np.random.default_rng(9)
    for w in range(3):
        start = T0 + w * WINDOW_MS
        batch = events(rng, 1200, start, north_shift=12.0)
        write(db_url, baseline, start, 0, batch[:500])
        write(db_url, baseline, start, 1, batch[500:])  # two collectors' partial states merge
    plain = jobs(db_url, tmp_path, segments=False)
    assert plain.evaluate_due_windows(now_ms=T0 + WINDOW_MS + 3_000) == 1
    whole_only = results(db_url, T0)
    with session_scope(db_url) as s:  # evaluated again, now with segments
        s.execute(delete(WindowEvaluation))
    segmented = jobs(db_url, tmp_path, segments=True)
    for w in range(3):
        segmented.evaluate_due_windows(now_ms=T0 + (w + 1) * WINDOW_MS + 3_000)
    rows = results(db_url, T0)
    assert [r for r in rows if r[0] == ""] == whole_only  # the whole population's results are the same
    segments = {r[0] for r in rows}
    assert {"region=north", "region=south", "region=east", "shop=s0", "shop=s1", "shop=s2"} <= segments
    north = {(r[1], r[2]): r for r in rows if r[0] == "region=north"}
    assert north[(DATA_DRIFT, "income")][5], north[(DATA_DRIFT, "income")]
    assert (DATA_DRIFT, "region") not in north  # the segment column is left out of its own segments
    assert not any(r[5] for r in rows if r[0] in ("region=south", "region=east") and r[1] == DATA_DRIFT)
    shop = [r for r in rows if r[0] == "shop=s0"]
    assert not [r for r in shop if r[1] == DATA_DRIFT]  # a tag has no training segments: drift not judged
    assert [r for r in shop if r[1] == LATENCY] and "a tag" in shop[0][6]["drift_not_judged"]
    assert sum(r[6]["segment_events"] for r in rows if r[0].startswith("region=") and r[1] == LATENCY
               and r[3] == "p50_ms") == 1200
    with session_scope(db_url) as s:
        fired = {(a.detector, a.feature, a.segment) for a in s.scalars(select(Alert).where(Alert.state == "firing"))}
    assert (DATA_DRIFT, "income", "region=north") in fired, fired
    assert not [a for a in fired if a[2] == "region=south"]


def test_a_baseline_without_segment_references_judges_no_segment_drift(db_url, tmp_path):
    rng = np.random.default_rng(2)
    baseline = compute_baseline(frame(rng, 3000), predictions=rng.uniform(size=3000))
    baseline.segments = {}  # computed before segments existed
    with session_scope(db_url) as s:
        s.add(ModelVersion(model="m", version="1"))
        s.add(BaselineRecord(model="m", version="1", rows=3000, summary=baseline.to_dict()))
    write(db_url, baseline, T0, 0, events(rng, 600, T0, north_shift=12.0))
    jobs(db_url, tmp_path, segments=True).evaluate_due_windows(now_ms=T0 + WINDOW_MS + 3_000)
    north = [r for r in results(db_url, T0) if r[0] == "region=north"]
    assert north and not [r for r in north if r[1] == DATA_DRIFT]
    assert "computed before" in north[0][6]["drift_not_judged"]


def test_model_quality_is_judged_per_segment_from_labels_joined_with_the_predictions_segments(db_url, tmp_path):
    rng = np.random.default_rng(11)
    train = frame(rng, 6000)
    scores = rng.uniform(size=6000)
    baseline = compute_baseline(train, predictions=scores, labels=(rng.uniform(size=6000) < scores).astype(int))
    assert baseline.segment_baseline("region", "north").quality.n > 0  # each segment's training labels
    with session_scope(db_url) as s:
        s.add(ModelVersion(model="m", version="1"))
        s.add(BaselineRecord(model="m", version="1", rows=6000, summary=baseline.to_dict()))
    batch = events(rng, 3000, T0)
    write(db_url, baseline, T0, 0, batch)
    # the labels, as the collector's label row holds them: calibrated, except the north's (inverted)
    labels = [int((rng.uniform() < e["prediction"]) != (e["features"]["region"] == "north")) for e in batch]
    kept = [{"region": e["features"]["region"], "shop": e["tags"]["shop"]} for e in batch]
    kept[0] = None  # a prediction stored before [segments]: counted for the whole window only
    state = WindowState.empty(baseline, segments=SPEC).add_labels([e["prediction"] for e in batch], labels, kept)
    with session_scope(db_url) as s:
        s.add(WindowStateRecord(model="m", version="1", window_start_ms=T0, window_end_ms=T0 + WINDOW_MS,
                                partition=-1, events=0, state=state.to_bytes()))
    jobs(db_url, tmp_path, segments=True).evaluate_due_windows(now_ms=T0 + WINDOW_MS + 3_000)
    quality = {(r[0], r[3]): r for r in results(db_url, T0) if r[1] == MODEL_QUALITY}
    assert quality[("", ACCURACY)][6]["labels"] == 3000
    assert quality[("region=north", ACCURACY)][5], quality[("region=north", ACCURACY)]
    assert not quality[("region=south", ACCURACY)][5] and not quality[("region=east", ACCURACY)][5]
    assert sum(quality[(f"region={r}", ACCURACY)][6]["labels"] for r in ("north", "south", "east")) == 2999
    assert quality[("shop=s1", ACCURACY)][6]["labels"] == 1000  # a tag: judged against the whole baseline
