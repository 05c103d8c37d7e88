"""Compaction and rollups by the retention job: nothing a judgment or a chart reads is lost.

Windows are written through the collector's fold and flush (tests.support.flushing) and judged by the
scheduler's job; retention then merges each judged window's partial states into one row, rolls window
states past the re-evaluation horizon into hourly then daily rollups, and detector results into hourly
rollups (on PostgreSQL dropping the rolled day's partition).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import func, select

from dashboard import queries
from driftline.baseline import compute_baseline
from driftline.config import load_settings
from driftline.store import partitions
from driftline.store.db import get_engine, session_scope
from driftline.store.queries import status_report
from driftline.store.models import (MERGED_PARTITION, BaselineRecord, DetectorResult, ModelVersion, ResultRollup,
                                    WindowEvaluation, WindowRollup, WindowStateRecord)
from driftline.window_state import WindowState
from driftline.window_state.codec import unpack_document
from driftline.scheduler.evaluation import due_windows
from driftline.scheduler.jobs import SchedulerJobs
from tests.support.drift_store import training_frame
from tests.support.flushing import FlushingCollector, encode

W = 300_000
DAY = 86_400_000
T0 = 1_796_040_000_000 // DAY * DAY  # a day boundary
LATENESS_MS = 2_000
PER_WINDOW = 60


class Stream:
    """One model version's events through the collector (two partitions) and the scheduler's jobs."""

    def __init__(self, db_url: str, seed: int = 3):
        self.rng = np.random.default_rng(seed)
        rows = 600
        self.baseline = compute_baseline(training_frame(self.rng, rows), predictions=self.rng.uniform(size=rows))
        with session_scope(db_url) as s:
            s.add(ModelVersion(model="m", version="1"))
            s.add(BaselineRecord(model="m", version="1", rows=rows, summary=self.baseline.to_dict()))
        self.db_url = db_url
        self.collector = FlushingCollector(db_url, {("m", "1"): self.baseline}, W, LATENESS_MS)
        self.jobs = SchedulerJobs(load_settings(db=db_url, window_seconds=W // 1000,
                                                allowed_lateness_seconds=LATENESS_MS // 1000))
        self.sent = 0

    def send(self, start_ms: int, n: int = PER_WINDOW, now_ms: int | None = None, shift: float = 0.0,
             partitions: tuple[int, ...] = (0, 1)) -> None:
        frame = training_frame(self.rng, n)
        frame["income"] += shift
        self.collector.now_ms = now_ms or start_ms + W
        per: dict[int, list[bytes]] = {p: [] for p in partitions}
        for i, row in enumerate(frame.to_dict(orient="records")):
            self.sent += 1
            per[partitions[i % len(partitions)]].append(
                encode("m", f"e{self.sent}", start_ms + i * (W - 1) // n, row, float(self.rng.uniform())))
        self.collector.consume(per)

    def windows(self, count: int, shift_from: int | None = None) -> None:
        """`count` windows from T0, each judged as the next one's first events close it."""
        for w in range(count + 1):
            start = T0 + w * W
            # the last window's two events come after the allowed lateness: every partition passes the windows
            self.send(start if w < count else start + 2 * LATENESS_MS, n=PER_WINDOW if w < count else 2,
                      shift=40.0 if shift_from is not None and w >= shift_from else 0.0)
            self.jobs.evaluate_due_windows(now_ms=start + LATENESS_MS + 1)

    def results(self, start_ms: int) -> list[tuple]:
        with session_scope(self.db_url) as s:
            return sorted(s.execute(select(DetectorResult.detector, DetectorResult.feature, DetectorResult.metric,
                                           DetectorResult.value, DetectorResult.breached)
                                    .where(DetectorResult.window_start_ms == start_ms)).all(),
                          key=lambda r: r[:3])


def _rows(db_url: str, start_ms: int) -> list[WindowStateRecord]:
    with session_scope(db_url) as s:
        rows = s.scalars(select(WindowStateRecord).where(WindowStateRecord.window_start_ms == start_ms)
                         .order_by(WindowStateRecord.partition)).all()
        s.expunge_all()
        return list(rows)


def _same_document(a, b, where: str = "") -> None:
    """Two state documents equal, floats (sums merged in another order) to their rounding."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            _same_document(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same_document(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=where)  # float32 sums, added in another order
    elif isinstance(a, float):
        assert b == pytest.approx(a, rel=1e-9, abs=1e-9), where
    else:
        assert a == b, where


def test_a_judged_windows_rows_are_merged_into_one_row_holding_the_identical_state(sqlite_url):
    stream = Stream(sqlite_url)
    stream.windows(3)
    starts = [T0 + w * W for w in range(3)]
    expected = {}
    for start in starts:
        rows = _rows(sqlite_url, start)
        assert len(rows) == 2
        expected[start] = (WindowState.merge_all([WindowState.from_bytes(r.state) for r in rows]).to_bytes(),
                           sum(r.events for r in rows), max(r.updated_at for r in rows))

    counts = stream.jobs.apply_retention(now_ms=T0 + 4 * W)

    assert counts["window_states:merged"] == 6
    for start in starts:
        (row,) = _rows(sqlite_url, start)
        assert row.partition == MERGED_PARTITION
        assert bytes(row.state) == expected[start][0]  # the very state the detectors judged
        assert (row.events, row.updated_at) == expected[start][1:]
    with session_scope(sqlite_url) as s:  # merged, not changed: no window is judged again
        assert due_windows(s, T0 + 4 * W, LATENESS_MS) == []
    assert len(_rows(sqlite_url, T0 + 3 * W)) == 2  # the open window is left to its collectors


def test_late_events_after_the_merge_judge_the_window_again_as_if_it_had_never_been_merged(sqlite_url, store_like):
    merged, plain = Stream(sqlite_url), Stream(store_like(sqlite_url))
    for stream in (merged, plain):
        stream.windows(3)
    merged.jobs.apply_retention(now_ms=T0 + 4 * W)
    assert len(_rows(merged.db_url, T0)) == 1
    for stream in (merged, plain):  # window 0's late events, on partition 1, long after it was judged
        stream.send(T0, n=40, now_ms=T0 + 4 * W, shift=60.0, partitions=(1,))
        assert stream.jobs.evaluate_due_windows(now_ms=T0 + 4 * W) == 1

    assert len(_rows(merged.db_url, T0)) == 2  # the merged row and the late events' own
    assert merged.results(T0) == pytest.approx(plain.results(T0))
    assert any(breached for *_, breached in merged.results(T0))  # the late events changed the judgment
    with session_scope(merged.db_url) as s:
        late = s.scalar(select(WindowEvaluation.late_events).where(WindowEvaluation.window_start_ms == T0))
    assert late == 40
    merged.jobs.apply_retention(now_ms=T0 + 4 * W)
    assert [r.partition for r in _rows(merged.db_url, T0)] == [MERGED_PARTITION]


def test_rollups_merge_their_windows_exactly_and_windows_inside_the_horizon_stay_judgeable(sqlite_url):
    stream = Stream(sqlite_url)
    stream.windows(14)  # 12 windows in the first hour, 2 in the second
    end = T0 + 14 * W
    stream.jobs.apply_retention(now_ms=end + 3 * DAY)
    assert all(len(_rows(sqlite_url, T0 + w * W)) == 1 for w in range(14))  # merged, not rolled up: judgeable
    stream.send(T0 + W, n=10, now_ms=end + 3 * DAY, partitions=(0,))  # inside the horizon: judged again
    assert stream.jobs.evaluate_due_windows(now_ms=end + 3 * DAY) == 1
    stream.jobs.apply_retention(now_ms=end + 3 * DAY)
    # each window's state (the last one, never closed, in its two partial rows)
    states = {T0 + w * W: WindowState.merge_all([WindowState.from_bytes(r.state) for r in _rows(sqlite_url, T0 + w * W)])
              for w in range(15)}

    stream.jobs.apply_retention(now_ms=end + 8 * DAY)

    with session_scope(sqlite_url) as s:
        assert s.scalar(select(func.count()).select_from(WindowStateRecord)) == 0
        hours = s.execute(select(WindowRollup.grain, WindowRollup.start_ms, WindowRollup.windows,
                                 WindowRollup.events, WindowRollup.state).order_by(WindowRollup.start_ms)).all()
    assert [(g, s, n) for g, s, n, _, _ in hours] == [("hour", T0, 12), ("hour", T0 + 3_600_000, 3)]
    for (_, start, _, events, blob), members in zip(hours, (range(12), range(12, 15))):
        expected = WindowState.merge_all([states[T0 + w * W] for w in members])
        assert events == expected.events
        _same_document(unpack_document(expected.to_bytes()), unpack_document(bytes(blob)))

    stream.jobs.apply_retention(now_ms=end + 15 * DAY)

    with session_scope(sqlite_url) as s:
        (day,) = s.execute(select(WindowRollup.grain, WindowRollup.start_ms, WindowRollup.windows,
                                  WindowRollup.state)).all()
    assert day[:3] == ("day", T0, 15)
    expected = WindowState.merge_all([states[T0 + w * W] for w in range(15)])
    _same_document(unpack_document(expected.to_bytes()), unpack_document(bytes(day[3])))
    with session_scope(sqlite_url) as s:  # `driftline status` counts the rolled-up windows and their events
        (version,) = status_report(s, now_ms=end + 15 * DAY)["models"]
    assert (version["events"], version["windows"]) == (stream.sent, 15)


def _buckets(db_url: str) -> pd.DataFrame:
    frame = queries._buckets(db_url, queries.BucketQuery(None, None, T0, T0 + DAY, 3_600_000))
    return frame.sort_values(["detector", "feature", "metric", "bucket_ms"], ignore_index=True)


def test_results_rolled_up_by_hour_give_the_dashboard_the_same_buckets(sqlite_url):
    stream = Stream(sqlite_url)
    stream.windows(14, shift_from=10)
    before = _buckets(sqlite_url)
    assert before["breached"].sum() > 0 and before["windows"].max() == 12

    counts = stream.jobs.apply_retention(now_ms=T0 + 9 * DAY)

    assert counts["detector_results:rolled_up"] > 0
    with session_scope(sqlite_url) as s:
        assert s.scalar(select(func.count()).select_from(DetectorResult)) == 0
        assert s.scalar(select(func.count()).select_from(ResultRollup)) > 0
        assert s.scalar(select(func.count()).select_from(WindowEvaluation)) == 14  # the window list stays
    pd.testing.assert_frame_equal(before, _buckets(sqlite_url), check_exact=False, rtol=1e-9)


def test_postgres_results_land_in_day_partitions_that_retention_drops_once_rolled_up(postgres_url):
    engine = get_engine(postgres_url)
    stream = Stream(postgres_url)
    stream.jobs.apply_retention(now_ms=T0)  # the days around now, made ahead of the data
    with engine.connect() as conn:
        assert sorted(partitions.day_partitions(conn, "detector_results")) == [T0 - DAY, T0, T0 + DAY, T0 + 2 * DAY]

    stream.windows(14, shift_from=10)
    with engine.connect() as conn:
        held = set(conn.exec_driver_sql("SELECT DISTINCT tableoid::regclass::text FROM detector_results").scalars())
    assert held == {f"{partitions.SCHEMA}.{partitions.day_name('detector_results', T0)}"}
    before = _buckets(postgres_url)

    stream.jobs.apply_retention(now_ms=T0 + 9 * DAY)

    with engine.connect() as conn:
        days = partitions.day_partitions(conn, "detector_results")
        assert T0 not in days and T0 + 9 * DAY + 2 * DAY in days  # the rolled day dropped, days ahead made
        assert conn.exec_driver_sql("SELECT count(*) FROM detector_results").scalar() == 0
        assert conn.exec_driver_sql("SELECT count(*) FROM result_rollups").scalar() > 0
    pd.testing.assert_frame_equal(before, _buckets(postgres_url), check_exact=False, rtol=1e-9)
