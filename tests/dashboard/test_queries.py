"""The dashboard's store queries: bounded by time, bucketed in SQL, the same on SQLite and PostgreSQL."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from sqlalchemy import func, insert, select

from driftline.dashboard import queries, scores
from driftline.store.db import session_scope
from driftline.store.models import (Alert, AliasEvent, DetectorResult, ModelAlias, ModelVersion, Notification,
                                    WindowEvaluation)
from driftline.vocabulary import DATA_DRIFT, LATENCY, SKEW

MINUTE = 60_000


def _results(url: str, start_ms: int, windows: int, seed: int = 0) -> np.ndarray:
    """PSI for one feature over `windows` one-minute windows; breached when >= 0.2. Returns the values."""
    rng = np.random.default_rng(seed)
    values = rng.uniform(0.0, 0.4, windows)
    rows = [{"model": "m", "version": "1", "window_start_ms": start_ms + i * MINUTE,
             "window_end_ms": start_ms + (i + 1) * MINUTE, "detector": DATA_DRIFT, "feature": "age",
             "metric": "psi", "value": float(v), "threshold": 0.2, "breached": bool(v >= 0.2), "details": {}}
            for i, v in enumerate(values)]
    with session_scope(url) as session:
        session.execute(insert(DetectorResult), rows)
        session.add_all(WindowEvaluation(model="m", version="1", window_start_ms=start_ms + i * MINUTE,
                                         window_end_ms=start_ms + (i + 1) * MINUTE, events=10, status="ok")
                        for i in range(windows))
    return values


def test_detector_buckets_fold_windows_in_sql(db_url):
    start = 1_700_000_000_000 // (5 * MINUTE) * (5 * MINUTE)
    values = _results(db_url, start, 30)
    # Buckets of five windows, aligned to the epoch; the range starts two windows into the
    # first bucket (which is read whole) and ends two windows into the bucket in progress.
    frame = queries.detector_buckets(db_url, queries.BucketQuery("m", "1", start + 2 * MINUTE, start + 27 * MINUTE,
                                                                  5 * MINUTE))
    frame = frame.sort_values("bucket_ms")
    assert frame["bucket_ms"].tolist() == [start + b * 5 * MINUTE for b in range(6)]
    assert frame["windows"].tolist() == [5, 5, 5, 5, 5, 2]
    for bucket, row in zip(range(6), frame.itertuples()):
        part = values[5 * bucket: min(5 * bucket + 5, 27)]
        assert row.max_value == pytest.approx(part.max())
        assert row.min_value == pytest.approx(part.min())
        assert row.mean_value == pytest.approx(part.mean())
        assert row.breached == int((part >= 0.2).sum())
        assert row.breached_above == int((part > 0.2).sum())
        assert row.clean_below == int((part < 0.2).sum())
    # Evidence from the rows says PSI is bad when high.
    assert scores.worse_direction(frame)[(DATA_DRIFT, "psi")] == scores.HIGHER
    assert queries.first_window_ms(db_url, "m", "1", start + 2 * MINUTE, start + 27 * MINUTE) == start + 2 * MINUTE
    # One window per bucket: every window on its own.
    single = queries.detector_buckets(db_url, queries.BucketQuery("m", "1", start, start + 30 * MINUTE, MINUTE))
    single = single.sort_values("bucket_ms")
    assert single["max_value"].tolist() == pytest.approx(values.tolist())


def test_latest_results_and_activity_use_the_newest_window_in_range(db_url):
    start = 1_700_000_000_000 // MINUTE * MINUTE
    values = _results(db_url, start, 10, seed=1)
    latest = queries.latest_results(db_url, start, start + 6 * MINUTE)
    assert latest["window_start_ms"].unique().tolist() == [start + 5 * MINUTE]
    assert latest["value"].tolist() == pytest.approx([values[5]])
    assert queries.windows(db_url, "m", "1", start, start + 6 * MINUTE)["window_start_ms"].tolist() == \
        [start + i * MINUTE for i in range(5, -1, -1)]
    assert queries.window_length_ms(db_url, "m") == MINUTE


def test_alerts_notifications_and_versions_are_bounded_by_time(db_url):
    now = datetime.now(timezone.utc)
    old = now - timedelta(days=3)
    since_ms = int((now - timedelta(hours=1)).timestamp() * 1000)
    with session_scope(db_url) as session:
        session.add_all([
            Alert(fingerprint="a-firing-old", model="m", version="1", detector=LATENCY, state="firing",
                  started_at=old, fired_at=old),
            Alert(fingerprint="a-resolved-old", model="m", version="1", detector=SKEW, state="resolved",
                  started_at=old, resolved_at=old),
            Alert(fingerprint="a-resolved-new", model="m", version="1", detector=DATA_DRIFT, feature="age",
                  state="resolved", started_at=old, resolved_at=now),
            Notification(idempotency_key="n-old-sent", alert_fingerprint="a-resolved-old", channel="slack",
                         kind="trigger", payload={}, status="sent", created_at=old),
            Notification(idempotency_key="n-old-pending", alert_fingerprint=None, channel="webhook",
                         kind="trigger", payload={}, status="pending", created_at=old),
            ModelVersion(model="m", version="1"), ModelVersion(model="m", version="2"),
            ModelAlias(model="m", alias="production", version="2"),
            AliasEvent(model="m", alias="production", version="2", previous_version="1", action="promote", at=now),
        ])
    alerts = queries.alerts(db_url, since_ms)
    # Still firing (however old) and resolved inside the range; not the old resolved one.
    assert set(alerts["fingerprint"]) == {"a-firing-old", "a-resolved-new"}
    assert str(alerts["resolved_at"].dt.tz) == "UTC"
    notes = queries.notifications(db_url, since_ms, ())
    assert set(notes["status"]) == {"pending"}  # undelivered stays visible however old
    assert len(queries.notifications(db_url, since_ms, ("a-resolved-old",))) == 2
    versions = queries.model_versions(db_url, since_ms, since_ms + 3_600_000)
    assert versions[["version", "production"]].values.tolist() == [["1", False], ["2", True]]
    assert queries.alias_events(db_url, "m")["action"].tolist() == ["promote"]


def test_alerts_carry_their_event_time_windows_in_utc(db_url):
    now = datetime.now(timezone.utc)
    first, fired = 1_767_614_580_000, 1_767_614_700_000  # 2026-01-05 12:03 and 12:05 UTC
    with session_scope(db_url) as session:
        session.add_all([
            Alert(fingerprint="a-dated", model="m", version="1", detector=LATENCY, state="firing", started_at=now,
                  fired_at=now, first_window_start_ms=first, fired_window_start_ms=fired),
            Alert(fingerprint="a-pending", model="m", version="1", detector=SKEW, state="pending", started_at=now,
                  first_window_start_ms=first),
        ])
    alerts = queries.alerts(db_url, int(now.timestamp() * 1000) - MINUTE).set_index("fingerprint")
    assert str(alerts["first_window_start"].dt.tz) == "UTC" and str(alerts["fired_window_start"].dt.tz) == "UTC"
    assert alerts.loc["a-dated", "first_window_start"] == datetime(2026, 1, 5, 12, 3, tzinfo=timezone.utc)
    assert alerts.loc["a-dated", "fired_window_start"] == datetime(2026, 1, 5, 12, 5, tzinfo=timezone.utc)
    assert alerts.loc["a-dated", "fired_window_start_ms"] == fired
    assert alerts.loc["a-pending", "fired_window_start"] is pd.NaT  # not fired yet


def test_judging_progress_reads_each_models_latest_judged_window_and_the_collectors_watermark(db_url):
    from driftline.config import TOPIC_INFERENCE
    from driftline.store.models import PartitionWatermark

    now = 1_767_268_800_000
    at = lambda ms: datetime.fromtimestamp(ms / 1000, tz=timezone.utc)  # noqa: E731
    assert queries.judging_progress(db_url, now, 30_000) == {"judged": {}, "watermark_ms": None, "watermarks": []}
    with session_scope(db_url) as session:
        for model, version, end in (("m", "1", now - 5 * MINUTE), ("m", "2", now - 2 * MINUTE), ("n", "1", now - 9 * MINUTE)):
            session.add(WindowEvaluation(model=model, version=version, window_start_ms=end - MINUTE, window_end_ms=end,
                                         events=1, status="ok"))
        session.add(PartitionWatermark(group_id="g", topic=TOPIC_INFERENCE, partition=0, event_time_ms=now - 70_000,
                                       updated_at=at(now - 50_000)))
    st.cache_data.clear()
    found = queries.judging_progress(db_url, now, 30_000)
    assert found["judged"] == {"m": now - 2 * MINUTE, "n": now - 9 * MINUTE}  # over a model's versions, the latest
    assert found["watermark_ms"] == now - 70_000
    assert [(w["partition"], w["state"], w["lag_seconds"]) for w in found["watermarks"]] == [(0, "stalled", 70.0)]


def test_the_seeded_store_has_what_the_pages_show(seeded):
    url, summary = seeded
    start, end = summary.first_window_ms, summary.last_window_ms + summary.window_seconds * 1000
    activity = queries.version_activity(url, start, end).set_index(["model", "version"])
    for key, starts in summary.windows.items():
        assert activity.loc[key, "windows"] == len(starts) == activity.loc[key, "evaluated_windows"]
    with session_scope(url) as session:
        drift_rows = session.scalar(select(func.count()).select_from(DetectorResult).where(
            DetectorResult.detector == DATA_DRIFT, DetectorResult.breached))
    assert drift_rows > 0  # the scenario really drifts
    firing = queries.alerts(url, start)
    assert sorted(firing.loc[firing["state"] == "firing", "detector"]) == sorted(a["detector"] for a in summary.firing)
    blobs = queries.window_state_blobs(url, "credit-default", "2", summary.windows[("credit-default", "2")][-1])
    assert len(blobs) == 2  # two collector partitions, merged by the pages
    sampled = queries.sampled_state_blobs(url, "credit-default", "2", start, end, 10)
    assert len({s for s, _, _ in sampled}) == 10


def test_queries_never_write(seeded):
    """Reading every query leaves the store's rows exactly as they were."""
    url, summary = seeded

    def fingerprint():
        with session_scope(url) as session:
            return [session.scalar(select(func.count()).select_from(t)) for t in
                    (DetectorResult, WindowEvaluation, Alert, Notification)] + [
                session.scalar(select(func.sum(DetectorResult.value)))]

    before = fingerprint()
    start, end = summary.first_window_ms, summary.last_window_ms + 60_000
    queries.model_versions(url, start, end)
    queries.detector_buckets(url, queries.BucketQuery(None, None, start, end, 10 * MINUTE))
    queries.latest_results(url, start, end)
    queries.alerts(url, start)
    queries.retrain_requests(url, start)
    assert before[0] > 0 and fingerprint() == before


def test_estimated_quality_reads_the_band_and_realized_of_the_newest_windows(db_url, monkeypatch):
    from driftline import defaults
    from driftline.vocabulary import ESTIMATED_QUALITY, ROC_AUC

    monkeypatch.setattr(defaults, "DASHBOARD_MAX_TIME_BUCKETS", 4)
    start = 1_700_000_000_000
    rows = [{"model": "m", "version": "1", "window_start_ms": start + i * MINUTE,
             "window_end_ms": start + (i + 1) * MINUTE, "detector": ESTIMATED_QUALITY, "feature": "",
             "metric": ROC_AUC, "value": 0.8 - i / 100, "threshold": 0.75, "breached": False,
             "details": {"lower": 0.7 - i / 100, "upper": 0.9 - i / 100, **({"realized": 0.79} if i % 2 else {})}}
            for i in range(6)]
    with session_scope(db_url) as session:
        session.execute(insert(DetectorResult), rows)
    frame = queries.estimated_quality(db_url, "m", "1", start, start + 10 * MINUTE)
    assert frame["window_start_ms"].tolist() == [start + i * MINUTE for i in range(2, 6)]  # the newest four
    assert frame["lower"].tolist() == pytest.approx([0.7 - i / 100 for i in range(2, 6)])
    assert frame["upper"].tolist() == pytest.approx([0.9 - i / 100 for i in range(2, 6)])
    assert frame["realized"].isna().tolist() == [True, False, True, False]
