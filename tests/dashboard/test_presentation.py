"""The dashboard's pure presentation functions against independent computations on raw data."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from driftline.dashboard import presentation, distributions, scores, states
from driftline import vocabulary
from driftline.baseline import NumericProfile
from driftline.vocabulary import DATA_DRIFT, LATENCY


def _buckets(rows):
    columns = ["detector", "feature", "metric", "bucket_ms", "min_value", "max_value", "mean_value", "threshold",
               "windows", "breached", "breached_above", "breached_below", "clean_above", "clean_below"]
    return pd.DataFrame(rows, columns=columns)


def test_bounded_range_rounds_now_up_and_keeps_length():
    start, end = presentation.bounded_range(now_ms=1_000_007_123, seconds=3600, align_seconds=15)
    assert end % 15_000 == 0 and 0 <= end - 1_000_007_123 < 15_000
    assert end - start == 3_600_000
    # Two moments inside one alignment step give the same range: cached queries are reused.
    assert presentation.bounded_range(1_000_007_124, 3600, 15) == (start, end)


@pytest.mark.parametrize("span_h, window_s, expected_windows_per_bucket", [(1, 60, 1), (24, 60, 8), (720, 60, 240)])
def test_bucket_size_keeps_buckets_under_the_limit(span_h, window_s, expected_windows_per_bucket):
    size = presentation.bucket_size_ms(0, span_h * 3_600_000, window_s * 1000, max_buckets=180)
    assert size == expected_windows_per_bucket * window_s * 1000
    assert math.ceil(span_h * 3_600_000 / size) <= 180


def test_worse_direction_is_read_from_the_results_not_the_names():
    frame = _buckets([
        # a made-up metric breached above its threshold: higher is worse
        ("custom", "f", "weirdness", 0, 1, 3, 2, 2.0, 3, 1, 1, 0, 0, 2),
        # a made-up metric breached below its threshold: lower is worse
        ("custom", "f", "goodness", 0, 0.1, 0.9, 0.5, 0.5, 3, 1, 0, 1, 2, 0),
        # no evidence at all: the name decides (p-values are bad when low)
        (DATA_DRIFT, "f", "ks_p_value", 0, None, None, None, None, 1, 0, 0, 0, 0, 0),
        (DATA_DRIFT, "f", "psi", 0, None, None, None, None, 1, 0, 0, 0, 0, 0),
    ])
    directions = scores.worse_direction(frame)
    assert directions[("custom", "weirdness")] == scores.HIGHER
    assert directions[("custom", "goodness")] == scores.LOWER
    assert directions[(DATA_DRIFT, "ks_p_value")] == scores.LOWER
    assert directions[(DATA_DRIFT, "psi")] == scores.HIGHER


def test_relative_score_is_one_at_the_threshold_on_both_sides():
    assert scores.relative_score(0.2, 0.2, scores.HIGHER, "psi") == pytest.approx(1.0)
    assert scores.relative_score(0.4, 0.2, scores.HIGHER, "psi") == pytest.approx(2.0)
    assert scores.relative_score(0.8, 0.8, scores.LOWER, "accuracy") == pytest.approx(1.0)
    assert scores.relative_score(0.4, 0.8, scores.LOWER, "accuracy") == pytest.approx(2.0)
    # p-values on a log scale: alpha -> 1, alpha squared -> 2, 1 -> 0.
    assert scores.relative_score(0.05, 0.05, scores.LOWER, "ks_p_value") == pytest.approx(1.0)
    assert scores.relative_score(0.0025, 0.05, scores.LOWER, "ks_p_value") == pytest.approx(2.0)
    assert scores.relative_score(1.0, 0.05, scores.LOWER, "ks_p_value") == 0.0
    assert scores.relative_score(0.0, 0.05, scores.LOWER, "ks_p_value") == presentation.defaults.DASHBOARD_SCORE_CAP
    assert math.isnan(scores.relative_score(0.3, None, scores.HIGHER, "psi"))
    assert math.isnan(scores.relative_score(float("nan"), 0.2, scores.HIGHER, "psi"))


def test_heatmap_keeps_the_worst_metric_and_caps_cells_without_a_breach():
    scored = scores.scored(_buckets([
        (DATA_DRIFT, "age", "psi", 0, 0.1, 0.5, 0.3, 0.2, 2, 1, 1, 0, 0, 1),
        (DATA_DRIFT, "age", "ks_p_value", 0, 1e-6, 0.2, 0.1, 0.05, 2, 1, 0, 1, 1, 0),
        (DATA_DRIFT, "region", "psi", 0, 0.1, 0.3, 0.2, 0.2, 1, 0, 0, 0, 1, 0),
        (DATA_DRIFT, "region", "chi2_p_value", 0, 0.5, 0.5, 0.5, 0.05, 1, 0, 0, 0, 1, 0),
    ]))
    cells = scores.feature_heatmap(scored).set_index("feature")
    # age: psi 0.5 / 0.2 = 2.5; the p-value 1e-6 at alpha 0.05 gives log(1e-6) / log(0.05) = 4.6, the worst.
    assert cells.loc["age", "metric"] == "ks_p_value"
    assert cells.loc["age", "score"] == pytest.approx(math.log(1e-6) / math.log(0.05))
    # region: psi 0.3 is past its threshold alone, but nothing breached: drawn just under 1.
    assert cells.loc["region", "score"] == scores.NOT_BREACHED_MAX
    # A breach decided by another rule (say the missing rate) is drawn at the threshold at least.
    # (Two clean windows below the threshold tell that PSI is bad when high.)
    low_psi = scores.scored(_buckets([(DATA_DRIFT, "x", "psi", 0, 0.01, 0.02, 0.015, 0.2, 3, 1, 0, 1, 0, 2)]))
    assert scores.feature_heatmap(low_psi)["score"].tolist() == [1.0]
    only_psi = scores.feature_heatmap(scored, "psi").set_index("feature")
    assert only_psi.loc["region", "score"] == pytest.approx(1.5)
    assert scores.feature_order(scores.feature_heatmap(scored)) == ["age", "region"]


def test_histogram_and_ecdf_from_fine_bins_match_the_raw_values():
    rng = np.random.default_rng(3)
    reference = rng.normal(0, 1, 20_000)
    current = rng.normal(0.4, 1.3, 3_000)
    profile = NumericProfile.from_values(reference)
    window_counts = np.bincount(np.searchsorted(profile.edges, current, side="right"), minlength=profile.counts.size)
    low, high = min(reference.min(), current.min()), max(reference.max(), current.max())

    bins = distributions.numeric_histogram(profile.edges, profile.counts, window_counts, low, high, groups=20)
    for source, values in (("baseline", reference), ("window", current)):
        part = bins[bins["source"] == source]
        assert part["share"].sum() == pytest.approx(1.0)
        # Each display bin's share equals the share of raw values inside it.
        inner = part.iloc[1:-1]
        expected = [np.mean((values >= a) & (values < b)) for a, b in zip(inner["left"], inner["right"])]
        assert np.allclose(inner["share"], expected)
        assert np.allclose(part["density"] * (part["right"] - part["left"]), part["share"])

    curves, gap = distributions.numeric_ecdf(profile.edges, profile.counts, window_counts)
    # The largest gap between the binned ECDFs is the KS statistic evaluated at the fine edges.
    exact = max(abs(np.mean(reference < e) - np.mean(current < e)) for e in profile.edges)
    assert gap["gap"] == pytest.approx(exact)
    assert curves["cdf"].between(0, 1).all()


def test_category_shares_mark_unseen_and_fold_the_tail():
    baseline = {"a": 50, "b": 30, "c": 20}
    window = {"a": 10, "b": 10, "new": 20, **{f"t{i}": 1 for i in range(30)}}
    shares = distributions.category_shares(baseline, window, top=4)
    for source in ("baseline", "window"):
        assert shares.loc[shares["source"] == source, "share"].sum() == pytest.approx(1.0)
    assert shares.loc[(shares["category"] == "new"), "unseen"].all()
    assert not shares.loc[(shares["category"] == "a"), "unseen"].any()
    assert "(other)" in set(shares["category"])


def test_headline_picks_latency_and_drift_from_the_newest_window():
    latest = pd.DataFrame([
        ("m", "1", 60_000, LATENCY, "", vocabulary.P99_MS, 150.0, 100.0, True),
        ("m", "1", 60_000, LATENCY, "", "qps", 12.0, None, False),
        ("m", "1", 60_000, LATENCY, "", "error_rate", 0.01, 0.02, False),
        ("m", "1", 60_000, DATA_DRIFT, "age", "psi", 0.4, 0.2, True),
        ("m", "1", 60_000, DATA_DRIFT, "region", "psi", 0.1, 0.2, False),
    ], columns=["model", "version", "window_start_ms", "detector", "feature", "metric", "value", "threshold",
                "breached"])
    head = presentation.headline(latest)
    assert (head.p99, head.p99_threshold, head.p99_breached) == (150.0, 100.0, True)
    assert head.qps == 12.0 and head.error_rate == 0.01
    assert head.drifted_features == ("age",)
    assert presentation.health(0, 0, head, True)[1] == "orange"
    assert presentation.health(2, 0, head, True) == ("2 firing", "red")
    assert presentation.health(0, 0, presentation.Headline(), False)[1] == "gray"


def test_sample_frames_follow_the_baseline_kinds_and_null_bad_types():
    summary = {"features": [{"name": "age", "kind": "numeric"}, {"name": "region", "kind": "categorical"}],
               "sample": [{"features": {"age": 30, "region": "north"}, "prediction": 0.2},
                          {"features": {"age": 40, "region": "south"}, "prediction": 0.7}]}
    window = [{"features": {"age": "forty", "region": "north", "extra": 1}, "prediction": [0.3, 0.7]},
              {"features": {"age": 51.5}, "prediction": 0.1}]
    reference, current, numeric, categorical = states.sample_frames(summary, window)
    assert numeric == ["age", "prediction"] and categorical == ["region"]
    assert list(current.columns) == ["age", "region", "prediction"]
    assert current["age"].isna().tolist() == [True, False]
    assert current["prediction"].tolist() == [0.7, 0.1]
    assert current["region"].tolist() == ["north", None]


def test_merge_states_skips_a_corrupt_partition_and_says_so():
    from driftline.window_state import EventBatch, WindowState

    event = {"event_id": "e1", "ts": 1000, "features": {"x": 1.0}, "prediction": 0.5, "latency_ms": {"total": 3.0}}
    good = WindowState.empty(None).add_batch(EventBatch.from_events([event])).to_bytes()
    state, problems = states.merge_states([good, b"not a state"], None)
    assert state.events == 1
    assert len(problems) == 1 and "partition state 1" in problems[0]
    assert states.merge_states([b"junk"], None)[0] is None


def test_formatting():
    assert presentation.fmt(None) == "—" and presentation.fmt(float("nan")) == "—"
    assert presentation.fmt(1.23e-9) == "1.2e-09"
    assert presentation.fmt(12345.6) == "12,346"
    assert presentation.fmt_ago(pd.Timestamp(0, unit="ms", tz="UTC"), 125_000) == "2 min ago"


def test_progress_line_says_how_far_results_are_complete_and_names_what_holds_them_back():
    now = 1_767_268_800_000  # 2026-01-01 12:00:00 UTC
    judged = {"credit": now - 5 * 60_000, "fraud": now - 55 * 60_000}  # the latest judged window of any model counts
    reading = {"topic": "t", "partition": 0, "state": "reading"}
    assert presentation.progress_line(judged, now - 20_000, [reading], now) == \
        ("Judged up to 11:55 UTC · collectors caught up", False)
    assert presentation.progress_line(judged, now - 185_000, [reading], now) == \
        ("Judged up to 11:55 UTC · collectors 3 min behind", False)
    stalled = [reading, {"topic": "t", "partition": 1, "state": "stalled"},
               {"topic": "t", "partition": 2, "state": "stalled"}, {"topic": "t", "partition": 2, "state": "waiting"}]
    assert presentation.progress_line(judged, now - 600_000, stalled, now) == \
        ("Judged up to 11:55 UTC · collectors 10 min behind · stalled: partitions 1, 2", True)
    # an old group stalled on a partition another group reads holds nothing back
    assert presentation.progress_line(judged, now - 20_000, [reading, {**reading, "state": "stalled"}], now)[1] is False
    waiting = [reading, {"topic": "t", "partition": 3, "state": "waiting"}]
    assert presentation.progress_line({}, None, waiting, now) == \
        ("Nothing judged yet · collectors: a partition has stored no event yet · waiting: partition 3", True)
    # judged on another day: the date too; no collector watermark (windows close on the wall clock)
    assert presentation.progress_line({"credit": now - 86_400_000}, None, [], now) == \
        ("Judged up to 2025-12-31 12:00 UTC · no collector has recorded a watermark", False)
