"""Event-time windows and lateness (pure computation, no broker, no store)."""
from __future__ import annotations

import numpy as np
import pytest

from driftline.collector.labels import label_row_partition
from driftline.collector.windows import PartitionWindows, late_mask, window_starts
from driftline.windows import WindowKey
from driftline.events import parse_inference
from driftline.window_state import EventBatch


def _late_one_by_one(ts: list[int], window_ms: int, lateness_ms: int, watermark: int | None) -> list[bool]:
    out = []
    for t in ts:
        start = t - t % window_ms
        out.append(watermark is not None and start + window_ms + lateness_ms <= watermark)
        watermark = t if watermark is None else max(watermark, t)
    return out


def test_window_starts_floor_to_multiples_including_negative_times():
    ts = np.array([0, 59_999, 60_000, 125_000, -1], dtype=np.int64)
    assert window_starts(ts, 60_000).tolist() == [0, 0, 60_000, 120_000, -60_000]


@pytest.mark.parametrize("watermark", [None, 0, 250_000])
def test_late_mask_matches_judging_events_one_by_one(watermark):
    rng = np.random.default_rng(7)
    ts = rng.integers(0, 400_000, 2_000).astype(np.int64)
    expected = _late_one_by_one(ts.tolist(), 60_000, 30_000, watermark)
    got = late_mask(ts, 60_000, 30_000, watermark)
    assert got.tolist() == expected
    assert 0 < got.sum() < ts.size  # the draw has both kinds, so the check means something


def test_an_event_exactly_at_end_plus_lateness_closes_the_window():
    # window [0, 60 s) closes once an event at 90 s (end + 30 s lateness) has been seen
    ts = np.array([1_000, 89_999, 5_000, 90_000, 5_000], dtype=np.int64)
    assert late_mask(ts, 60_000, 30_000, None).tolist() == [False, False, False, False, True]


BASE = 1_800_000_000_000  # a window boundary; event times must be after 2000


def _key(start: int) -> WindowKey:
    return WindowKey.starting("m", "1", start, 60_000)


def _events(model: str, times: list[int]) -> list:
    """Valid events at BASE + each time, with feature x = their position."""
    return [parse_inference(
        b'{"schema":"driftline.inference/v1","event_id":"e%d","ts":%d,"model":"%s","version":"1",'
        b'"features":{"x":%d},"prediction":0.5,"latency_ms":{"total":2.0}}' % (i, t, model.encode(), i))
        for i, t in enumerate(BASE + t for t in times)]


def test_fold_splits_a_batch_by_window_and_counts_late_events():
    windows = PartitionWindows(window_ms=60_000, lateness_ms=30_000)
    times = [10_000, 70_000, 20_000, 200_000, 30_000, 75_000]  # the 30 s event arrives after 200 s: late
    result = windows.fold("m", "1", EventBatch.from_events(_events("m", times)), baseline=None, watermark_ms=None)
    assert (result.events, result.late_events, result.watermark_ms) == (6, 2, BASE + 200_000)
    counts = {key: (w.events, w.late_events, w.state.events) for key, w in windows.windows.items()}
    assert counts == {_key(BASE): (3, 1, 3), _key(BASE + 60_000): (2, 1, 2), _key(BASE + 180_000): (1, 0, 1)}
    # numeric sums land in the right windows
    assert windows.windows[_key(BASE)].state.features["x"].total == 0 + 2 + 4
    assert windows.windows[_key(BASE + 60_000)].state.features["x"].total == 1 + 5


def test_fold_takes_the_watermark_from_before_the_batch():
    windows = PartitionWindows(window_ms=60_000, lateness_ms=0)
    result = windows.fold("m", "1", EventBatch.from_events(_events("m", [5_000, 6_000])), baseline=None, watermark_ms=BASE + 120_000)
    assert result.late_events == 2 and result.watermark_ms == BASE + 120_000
    (key,) = windows.windows
    assert key == WindowKey("m", "1", BASE, BASE + 60_000)


def test_label_rows_use_a_partition_space_disjoint_from_inference_partitions():
    assert [label_row_partition(q) for q in range(4)] == [-1, -2, -3, -4]


def test_prediction_rows_in_bulk_are_what_one_by_one_would_be():
    from driftline.collector.labels import PredictionRow, prediction_values

    ids = ["a", None, "c", "d", "e", "f"]
    times = [60_001, 5, 120_000, 7, 59_999, 3]
    for predictions in ([0.1, 0.2, None, True, 1e-7, 3],  # numbers, booleans, nulls: split from one array
                        ["x,y", 0.5, None, {"p": [1, 2]}, [0.25, 0.75], "z"]):  # commas inside: one by one
        rows = prediction_values("m", "1", ids, times, predictions, 60_000)
        expected = [PredictionRow(rid, "m", "1", ts, ts - ts % 60_000, p).values()
                    for rid, ts, p in zip(ids, times, predictions) if rid is not None and p is not None]
        assert rows == expected
        assert [PredictionRow.from_values(r).prediction for r in rows] == [
            p for rid, p in zip(ids, predictions) if rid is not None and p is not None]
    assert prediction_values("m", "1", [], [], [], 60_000) == []
