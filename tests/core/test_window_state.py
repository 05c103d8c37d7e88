"""WindowState: columns from events, counts against the baseline, merge laws, blobs, latency, sample."""
from __future__ import annotations

import uuid

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from driftline.baseline import compute_baseline
from driftline.events import encode_event, parse_inference, rfc3339
from driftline.window_state import EventBatch, LatencyHistogram, WindowState

T0 = 1_767_225_600_000  # 2026-01-01 in epoch ms
NUMERIC = ("income", "age", "score")


def training_frame(n=5000, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "income": rng.lognormal(10, 0.5, n),
        "age": rng.integers(18, 80, n).astype(float),
        "score": rng.normal(0, 1, n),
        "region": rng.choice(["north", "south", "east"], n).astype(object),
    }), rng.random(n)


@pytest.fixture(scope="module")
def baseline():
    frame, predictions = training_frame()
    return compute_baseline(frame, predictions=predictions)


def make_events(n, seed=1, shift=0.0):
    rng = np.random.default_rng(seed)
    income = rng.lognormal(10, 0.5, n)
    age = rng.integers(18, 80, n)
    score = rng.normal(shift, 1, n)
    region = rng.choice(["north", "south", "east"], n)
    latency = rng.lognormal(3, 0.7, n)
    events = []
    for i in range(n):
        events.append({
            "schema": "driftline.inference/v1", "event_id": uuid.UUID(int=int(rng.integers(1 << 62)) << 64 | i).hex,
            "request_id": f"req-{seed}-{i}", "ts": T0 + 10 * i, "model": "m", "version": "1",
            "features": {"income": float(income[i]), "age": int(age[i]), "score": float(score[i]),
                         "region": str(region[i])},
            "inputs": {"raw_income": float(income[i])},
            "prediction": float(rng.random()),
            "latency_ms": {"total": float(latency[i]), "queue": float(latency[i] / 3), "compute": float(latency[i] / 2)},
            "status": "error" if i % 50 == 0 else "ok",
            "cache_hit": bool(i % 4 == 0), "batch_size": int(1 + i % 3),
        })
        if i % 50 == 0:
            events[-1]["error"] = "model raised"
    return events


def sig(value, digits=9):
    """Round to significant digits: float sums differ in the last bits with the addition order."""
    if isinstance(value, (list, np.ndarray)):
        return [sig(v, digits) for v in value]
    if isinstance(value, dict):
        return {k: sig(v, digits) for k, v in value.items()}
    if isinstance(value, float) and np.isfinite(value) and value != 0:
        return float(f"{value:.{digits}g}")
    return value


def canonical(state: WindowState):
    """A comparable view of every field (float sums rounded: addition order differs)."""
    def feature(w):
        return {"kind": w.kind, "absent": w.absent, "nulls": w.nulls, "types": dict(sorted(w.value_types.items())),
                "count": w.count, "total": sig(w.total), "min": w.min, "max": w.max, "nonfinite": w.nonfinite,
                "below": w.below_min, "above": w.above_max, "unbinned": w.unbinned,
                "counts": None if w.counts is None else w.counts.tolist(),
                "sums": None if w.sums is None else sig(w.sums.tolist()),
                "categories": dict(sorted(w.categories.items()))}
    return {
        "events": state.events, "min": state.min_event_ms, "max": state.max_event_ms,
        "status": dict(sorted(state.status_counts.items())), "cache": (state.cache_hits, state.cache_misses),
        "batch_sizes": dict(sorted(state.batch_sizes.items())),
        "features": {k: feature(v) for k, v in sorted(state.features.items())},
        "prediction": None if state.prediction is None else feature(state.prediction),
        "latency": {k: (h.counts.tolist(), h.count, sig(h.sum), h.max) for k, h in sorted(state.latency.items())},
        "sample": [r["event_id"] for r in state.sample], "sample_keys": state.sample_keys.tolist(),
        "labels": sig(state.labels.to_dict()),
    }


def test_from_events_builds_typed_columns():
    events = make_events(40)
    events[3]["features"]["score"] = None
    batch = EventBatch.from_events(events)
    assert batch.n == 40
    assert batch.features["income"].dtype == np.float64
    assert batch.features["age"].dtype == np.float64  # ints are numbers
    assert batch.features["region"].dtype == object
    assert np.isnan(batch.features["score"][3])
    assert batch.feature_types["score"] == {"number": 39}
    assert batch.feature_types["region"] == {"string": 40}
    assert batch.absent == {}
    assert batch.event_time_ms[0] == T0 and batch.event_time_ms[-1] == T0 + 390
    assert batch.latency_ms["total"].shape == (40,) and set(batch.latency_ms) == {"total", "queue", "compute"}
    assert batch.cache_hit[:4].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert batch.batch_size[:3].tolist() == [1.0, 2.0, 3.0]
    assert batch.prediction_source == "score" and batch.prediction.dtype == np.float64


def test_from_events_reads_parsed_inference_events_and_rfc3339_times():
    events = make_events(10)
    for e in events:
        e["ts"] = rfc3339(e["ts"])
    parsed = [parse_inference(encode_event(e)) for e in events]
    from_parsed = EventBatch.from_events(parsed)
    from_dicts = EventBatch.from_events(events)
    assert from_parsed.event_time_ms.tolist() == from_dicts.event_time_ms.tolist() == [T0 + 10 * i for i in range(10)]
    assert np.array_equal(from_parsed.features["income"], from_dicts.features["income"])
    assert from_parsed.cache_hit.tolist() == from_dicts.cache_hit.tolist()
    record = from_parsed.sample_record(2)
    assert record["inputs"] == events[2]["inputs"] and record["request_id"] == events[2]["request_id"]
    assert record["features"] == events[2]["features"] and record["ts_ms"] == T0 + 20


def test_irregular_events_type_changes_absent_and_new_features(baseline):
    events = make_events(30)
    events[0]["features"]["income"] = "12000"  # a string where a number belongs
    events[1]["features"]["age"] = True
    del events[2]["features"]["score"]  # key missing
    events[3]["features"]["brand_new"] = 1.5  # unknown to the baseline
    events[4]["features"]["region"] = 7  # a number in a categorical feature
    batch = EventBatch.from_events(events)
    assert batch.absent == {"score": 1, "brand_new": 29}
    assert batch.features["income"].dtype == object
    assert batch.feature_types["income"] == {"string": 1, "number": 29}
    state = WindowState.empty(baseline).add_batch(batch)
    income = state.features["income"]
    assert income.value_types == {"string": 1, "number": 29} and income.count == 29
    assert state.features["age"].value_types == {"boolean": 1, "number": 29}
    assert state.features["score"].absent == 1 and state.features["score"].nulls == 1
    assert state.features["brand_new"].absent == 29 and state.features["brand_new"].count == 1
    region = state.features["region"]
    assert region.categories["7"] == 1 and region.value_types == {"string": 29, "number": 1}


def test_counts_match_brute_force_on_the_baseline_bins(baseline):
    events = make_events(3000, shift=2.5)
    events[10]["features"]["income"] = 1e12  # far above the training max
    events[11]["features"]["income"] = -5.0  # below the training min
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(events))
    assert state.events == 3000
    for name in NUMERIC:
        values = np.array([e["features"][name] for e in events], dtype=float)
        profile = baseline.profiles[name]
        window = state.features[name]
        index = np.searchsorted(profile.edges, values, side="right")
        assert np.array_equal(window.counts, np.bincount(index, minlength=profile.edges.size + 1))
        assert np.allclose(window.sums, np.bincount(index, weights=values, minlength=profile.edges.size + 1))
        assert window.below_min == int((values < profile.min).sum())
        assert window.above_max == int((values > profile.max).sum())
        assert window.mean == pytest.approx(values.mean()) and window.std == pytest.approx(values.std())
    assert state.features["income"].below_min == 1 and state.features["income"].above_max >= 1
    assert state.features["score"].above_max > 100  # shifted by 2.5 sd
    regions = pd.Series([e["features"]["region"] for e in events]).value_counts().to_dict()
    assert state.features["region"].categories == regions
    assert state.status_counts == {"error": 60, "ok": 2940}
    assert (state.cache_hits, state.cache_misses) == (750, 2250)
    assert state.batch_sizes == {1: 1000, 2: 1000, 3: 1000}
    assert (state.min_event_ms, state.max_event_ms) == (T0, T0 + 29_990)
    assert state.prediction.count == 3000 and state.prediction.counts.sum() == 3000


def test_missing_baseline_feature_counts_as_absent(baseline):
    events = make_events(20)
    for e in events:
        del e["features"]["age"]
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(events))
    assert state.features["age"].absent == 20 and state.features["age"].nulls == 20


def test_split_batches_merge_to_the_whole(baseline):
    events = make_events(2400)
    whole = WindowState.empty(baseline).add_batch(EventBatch.from_events(events))
    whole.add_labels(np.linspace(0, 1, 100), np.arange(100) % 2)
    parts = []
    for chunk in (events[:700], events[700:1900], events[1900:]):
        parts.append(WindowState.empty(baseline).add_batch(EventBatch.from_events(chunk)))
    parts[1].add_labels(np.linspace(0, 1, 100)[:40], (np.arange(100) % 2)[:40])
    parts[2].add_labels(np.linspace(0, 1, 100)[40:], (np.arange(100) % 2)[40:])
    a, b, c = parts
    left = a.merge(b).merge(c)
    right = a.merge(b.merge(c))
    shuffled = c.merge(a).merge(b)
    expected = canonical(whole)
    assert canonical(left) == expected
    assert canonical(right) == expected
    assert canonical(shuffled) == expected
    # Several batches into one state are the same as one batch.
    incremental = WindowState.empty(baseline)
    for chunk in (events[:1000], events[1000:]):
        incremental.add_batch(EventBatch.from_events(chunk))
    incremental.add_labels(np.linspace(0, 1, 100), np.arange(100) % 2)
    assert canonical(incremental) == expected


def test_blob_round_trip_and_size(baseline):
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(make_events(3000)))
    state.add_labels(np.random.default_rng(0).random(500), np.arange(500) % 2)
    blob = state.to_bytes()
    restored = WindowState.from_bytes(blob, baseline)
    got, expected = canonical(restored), canonical(state)
    # per-bin sums travel as float32 offsets from the mean: equal to ~1e-7 of the spread
    for name in NUMERIC:
        assert np.allclose(got["features"][name].pop("sums"), expected["features"][name].pop("sums"),
                           rtol=1e-6, atol=1e-6 * state.features[name].std * 10)
    got["prediction"].pop("sums"), expected["prediction"].pop("sums")
    assert got == expected
    assert restored.sample == state.sample
    assert len(blob) < 200_000
    # Adding after a round trip keeps counting on the same bins.
    restored.add_batch(EventBatch.from_events(make_events(10, seed=5)))
    assert restored.events == 3010


def test_corrupt_or_foreign_blobs_are_rejected(baseline):
    blob = WindowState.empty(baseline).add_batch(EventBatch.from_events(make_events(10))).to_bytes()
    for bad in (b"", b"hello world", blob[:20], blob[:4] + b"\x00" * 40):
        with pytest.raises(ValueError):
            WindowState.from_bytes(bad)
    other_frame, _ = training_frame(seed=3)
    other = compute_baseline(other_frame)
    with pytest.raises(ValueError, match="binned on baseline"):
        WindowState.from_bytes(blob, other)
    state = WindowState.from_bytes(blob)  # no baseline given: readable, but cannot add events
    with pytest.raises(ValueError, match="attach"):
        state.add_batch(EventBatch.from_events(make_events(3)))


def test_states_on_different_baselines_do_not_merge(baseline):
    other_frame, _ = training_frame(seed=3)
    other = compute_baseline(other_frame)
    a = WindowState.empty(baseline).add_batch(EventBatch.from_events(make_events(5)))
    b = WindowState.empty(other).add_batch(EventBatch.from_events(make_events(5)))
    with pytest.raises(ValueError, match="different baselines"):
        a.merge(b)


def test_without_a_baseline_everything_but_bins_is_counted(baseline):
    events = make_events(500)
    events[0]["features"]["region"] = None
    state = WindowState.empty(None).add_batch(EventBatch.from_events(events))
    assert state.events == 500 and state.errors == 10
    income = state.features["income"]
    assert income.kind == "numeric" and income.counts is None and income.unbinned == 500
    assert state.features["region"].kind == "categorical" and state.features["region"].nulls == 1
    assert state.latency["total"].count == 500 and len(state.sample) == 200
    # Merged with a state that has the baseline: bins come from that side.
    later = WindowState.empty(baseline).add_batch(EventBatch.from_events(make_events(300, seed=2)))
    merged = WindowState.merge_all([state, later])
    assert merged.baseline_fingerprint == baseline.fingerprint
    assert merged.features["income"].counts.sum() == 300 and merged.features["income"].unbinned == 500
    assert merged.events == 800
    # A stored unbinned state takes a baseline on reading and bins what comes next.
    revived = WindowState.from_bytes(state.to_bytes(), baseline)
    revived.add_batch(EventBatch.from_events(make_events(50, seed=3)))
    assert revived.features["income"].counts.sum() == 50 and revived.features["income"].unbinned == 500


def test_latency_quantiles_within_one_percent():
    rng = np.random.default_rng(11)
    for values in (rng.lognormal(3, 1.0, 50_000), rng.exponential(20, 7_000), rng.uniform(0.5, 2, 999)):
        histogram = LatencyHistogram()
        for chunk in np.array_split(values, 5):
            histogram.add(chunk)
        for q in (0.5, 0.95, 0.99):
            exact = np.quantile(values, q, method="lower")
            assert abs(histogram.quantile(q) - exact) <= 0.01 * exact
        assert histogram.quantile(1.0) == values.max() and histogram.quantile(0.0) == values.min()
    empty = LatencyHistogram()
    assert empty.quantile(0.5) is None


def test_state_quantile_addresses_latency_and_features(baseline):
    events = make_events(4000)
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(events))
    total = np.array([e["latency_ms"]["total"] for e in events])
    queue = np.array([e["latency_ms"]["queue"] for e in events])
    assert state.quantile("latency", 0.99) == pytest.approx(np.quantile(total, 0.99, method="lower"), rel=0.01)
    assert state.quantile("latency.queue", 0.5) == pytest.approx(np.quantile(queue, 0.5, method="lower"), rel=0.01)
    assert state.quantile("compute", 0.95) is not None
    score = np.array([e["features"]["score"] for e in events])
    assert state.quantile("score", 0.5) == pytest.approx(np.median(score), abs=0.02)
    assert state.quantile("prediction", 0.5) == pytest.approx(0.5, abs=0.05)
    assert state.quantile("unknown", 0.5) is None


def test_sample_is_bounded_and_the_bottom_k_of_the_union(baseline):
    events = make_events(5000)
    parts = [WindowState.empty(baseline, sample_size=400).add_batch(EventBatch.from_events(events[i::4]))
             for i in range(4)]
    merged = WindowState.merge_all(parts)
    whole = WindowState.empty(baseline, sample_size=400).add_batch(EventBatch.from_events(events))
    assert len(merged.sample) == 400
    assert [r["event_id"] for r in merged.sample] == [r["event_id"] for r in whole.sample]
    record = merged.sample[0]
    assert set(record) >= {"event_id", "request_id", "features", "inputs", "prediction", "ts_ms"}


def test_sample_is_uniform_over_the_stream(baseline):
    events = make_events(20_000, seed=9)
    state = WindowState.empty(baseline, sample_size=1000)
    for start in range(0, len(events), 1000):  # many batches: earlier events must not be favoured
        state.add_batch(EventBatch.from_events(events[start:start + 1000]))
    positions = np.array([int(r["request_id"].rsplit("-", 1)[1]) for r in state.sample])
    assert len(set(positions.tolist())) == 1000
    assert scipy_stats.kstest(positions / 20_000, "uniform").pvalue > 0.001
    scores = np.array([r["features"]["score"] for r in state.sample])
    assert abs(scores.mean()) < 4 / np.sqrt(1000)


def _shadow_of(events, seed=2):
    """The candidate's answers to the same requests: its own event ids, the production event's request id."""
    rng = np.random.default_rng(seed)
    return [{**event, "event_id": uuid.UUID(int=int(rng.integers(1 << 62))).hex, "version": "2",
             "ts": event["ts"] + 3, "prediction": float(rng.random())} for event in events]


def test_samples_of_the_same_requests_are_the_same_requests(baseline):
    """Coordinated bottom-k: keyed by request id, a shadow's window samples exactly production's requests,
    however each side's events are split into batches and partial states."""
    production = make_events(5000, seed=3)
    shadow = _shadow_of(production)
    whole = WindowState.empty(baseline).add_batch(EventBatch.from_events(production))
    parts = WindowState.merge_all(WindowState.empty(None).add_batch(EventBatch.from_events(shadow[i::3]))
                                  for i in range(3))
    sampled = [r["request_id"] for r in whole.sample]
    assert len(sampled) == 200 and sampled == [r["request_id"] for r in parts.sample]
    assert {r["event_id"] for r in whole.sample}.isdisjoint(r["event_id"] for r in parts.sample)
    # a shadow of a quarter of the requests: every shadowed request in production's sample is in the
    # shadow's sample too (the shadow's k-th key is at least production's), so each of them pairs
    quarter = WindowState.empty(None).add_batch(EventBatch.from_events(shadow[::4]))
    shadowed = {e["request_id"] for e in shadow[::4]}
    both = set(sampled) & shadowed
    assert 25 <= len(both) <= 80 and both <= {r["request_id"] for r in quarter.sample}


def test_sample_keys_fall_back_to_the_event_id_then_to_random(baseline):
    events = make_events(600, seed=4)
    without = [{k: v for k, v in e.items() if k != "request_id"} for e in events]
    batch = EventBatch.from_events(without)
    assert batch.request_ids is None and list(batch.sample_ids()) == [e["event_id"] for e in events]
    mixed = EventBatch.from_events(events[:300] + without[300:])
    assert list(mixed.sample_ids()) == [e["request_id"] for e in events[:300]] + [e["event_id"] for e in events[300:]]
    assert list(mixed.take(np.arange(295, 305)).sample_ids()) == list(mixed.sample_ids()[295:305])
    # keyed by event id the sample is the same bottom-k however the events are split
    parts = WindowState.merge_all(WindowState.empty(baseline).add_batch(EventBatch.from_events(without[i::2]))
                                  for i in range(2))
    whole = WindowState.empty(baseline).add_batch(batch)
    assert [r["event_id"] for r in parts.sample] == [r["event_id"] for r in whole.sample]
    # an event without either id is still sampled (a random key), and the state encodes
    anonymous = [{k: v for k, v in e.items() if k not in ("request_id", "event_id")} for e in events[:50]]
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(anonymous + events[50:100]))
    assert len(state.sample) == 100
    assert WindowState.from_bytes(state.to_bytes(), baseline).sample == state.sample


def test_labels_binary_and_regression(baseline):
    state = WindowState.empty(baseline)
    state.add_labels(np.array([0.9, 0.2, 0.6, 0.4]), np.array([1, 0, 0, 1]))
    assert state.labels.task == "binary" and state.labels.n == 4
    assert state.labels.positives[500:].sum() == 1 and state.labels.negatives[500:].sum() == 1
    other = WindowState.empty(baseline).add_labels(np.array([0.7]), np.array([1]))
    merged = state.merge(other)
    assert merged.labels.n == 5 and merged.labels.positives.sum() == 3
    regression = WindowState.empty(None).add_labels(np.array([1.5, 2.5, 10.0]), np.array([1.0, 3.0, 7.25]))
    assert regression.labels.task == "regression"
    assert regression.labels.sum_abs_error == pytest.approx(3.75)
    with pytest.raises(ValueError, match="labels"):
        WindowState.empty(None).add_labels(np.array([1.0, 2.0]), np.array([1.0]))


def test_take_splits_a_batch_like_separate_batches(baseline):
    events = make_events(600)
    events[5]["features"]["income"] = "oops"
    del events[7]["features"]["score"]
    batch = EventBatch.from_events(events)
    even = np.arange(0, 600, 2)
    odd = np.arange(1, 600, 2)
    from_take = WindowState.empty(baseline).add_batch(batch.take(even)).merge(
        WindowState.empty(baseline).add_batch(batch.take(odd)))
    whole = WindowState.empty(baseline).add_batch(batch)
    assert canonical(from_take) == canonical(whole)
    part = batch.take(odd)
    assert part.absent == {"score": 1} and part.feature_types["income"] == {"string": 1, "number": 299}
    assert batch.take(even).absent == {}


def test_label_summaries_of_different_guessed_tasks_merge_without_failing():
    a = WindowState.empty(None).add_labels(np.array([0.2, 0.9, 0.4]), np.array([0, 1, 1]))  # binary
    b = WindowState.empty(None).add_labels(np.array([3.5]), np.array([7.25]))  # regression
    merged = a.merge(b)
    assert merged.labels.task == "binary" and merged.labels.n == 3 and merged.labels.dropped == 1
    assert b.merge(a).labels.dropped == 1


def test_from_events_on_sparse_or_bad_input():
    sparse = [{"event_id": "a", "ts": T0, "features": None, "latency_ms": None},
              {"event_id": "b", "ts": T0 + 1, "features": {"x": 1.0}, "prediction": [0.3, 0.7],
               "latency_ms": {"total": 3.0, "gpu": 1.0}}]
    batch = EventBatch.from_events(sparse)
    assert batch.absent == {"x": 1} and np.isnan(batch.features["x"][0])
    assert np.isnan(batch.latency_ms["total"][0]) and batch.latency_ms["gpu"][1] == 1.0
    assert batch.prediction_source == "probability" and batch.prediction[1] == pytest.approx(0.7)
    state = WindowState.empty(None).add_batch(batch)
    assert state.latency["total"].count == 1 and state.latency["gpu"].count == 1
    assert EventBatch.from_events([]).n == 0 and WindowState.empty(None).add_batch(EventBatch.from_events([])).events == 0
    with pytest.raises(ValueError, match="epoch milliseconds or RFC 3339"):
        EventBatch.from_events([{"event_id": "c", "ts": "yesterday", "features": {}, "latency_ms": {"total": 1.0}}])
    with pytest.raises(ValueError, match="1-D"):
        batch.take(np.zeros((1, 1), dtype=int))
