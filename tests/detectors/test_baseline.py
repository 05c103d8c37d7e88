"""The training baseline: fine bins, deciles, categories, predictions, labels, sample, JSON round trip."""
from __future__ import annotations

import json

import numpy as np
import orjson
import pandas as pd
import pytest

from driftline.detectors.stats import two_sample
from driftline import defaults
from driftline.baseline import (
    BINARY,
    MULTICLASS,
    REGRESSION,
    Baseline,
    CategoricalProfile,
    LabelSummary,
    NumericProfile,
    category_key,
    compute_baseline,
    prediction_values,
)
from driftline.errors import UserError


@pytest.fixture(scope="module")
def training():
    rng = np.random.default_rng(7)
    n = 20_000
    frame = pd.DataFrame({
        "income": rng.lognormal(10, 0.6, n),
        "age": rng.integers(18, 90, n).astype(float),
        "score": rng.normal(0, 1, n),
        "late": rng.poisson(0.3, n),  # few distinct values: edges merge
        "region": rng.choice(["north", "south", "east"], n, p=[0.5, 0.3, 0.2]),
        "flag": rng.random(n) < 0.2,
    })
    frame.loc[rng.random(n) < 0.05, "score"] = np.nan
    frame["region"] = frame["region"].astype(object)
    frame.loc[frame.index[:100], "region"] = None
    predictions = 1 / (1 + np.exp(-frame["score"].fillna(0).to_numpy()))
    labels = (rng.random(n) < predictions).astype(int)
    return frame, predictions, labels


def test_numeric_profile_bins_are_quantiles_with_exact_counts_and_sums(training):
    frame, predictions, labels = training
    baseline = compute_baseline(frame, predictions=predictions, labels=labels)
    values = frame["income"].to_numpy()
    profile = baseline.profiles["income"]
    assert isinstance(profile, NumericProfile)
    assert profile.edges.size == defaults.BASELINE_FINE_BINS + 1 + 2 * (defaults.BASELINE_TAIL_BINS - 1)
    assert profile.edges[0] == values.min() and profile.edges[-1] == values.max()
    assert np.all(np.diff(profile.edges) > 0)
    index = np.searchsorted(profile.edges, values, side="right")
    assert np.array_equal(profile.counts, np.bincount(index, minlength=profile.edges.size + 1))
    assert np.allclose(profile.sums, np.bincount(index, weights=values, minlength=profile.edges.size + 1))
    # Each fine bin holds about a thousandth of the training data.
    assert profile.counts.max() <= 2 * len(values) / defaults.BASELINE_FINE_BINS
    assert profile.min == values.min() and profile.max == values.max()
    assert profile.mean == pytest.approx(values.mean()) and profile.std == pytest.approx(values.std(ddof=0))
    assert profile.count == len(values) and profile.nulls == 0


def test_deciles_match_the_raw_array_psi_bins_and_are_fine_edges(training):
    frame, _, _ = training
    baseline = compute_baseline(frame)
    for name in ("income", "age", "score", "late"):
        profile = baseline.profiles[name]
        values = frame[name].to_numpy(dtype=float)
        assert np.array_equal(profile.decile_edges, two_sample.decile_edges(values))
        assert np.isin(profile.decile_edges, profile.edges).all()
        # Re-aggregating the fine counts gives the decile counts of the raw data.
        boundaries = np.concatenate(([0], profile.decile_index + 1, [profile.counts.size]))
        reaggregated = np.add.reduceat(profile.counts, boundaries[:-1])
        assert np.array_equal(reaggregated, two_sample.bin_counts(values, profile.decile_edges))


def test_few_distinct_values_merge_edges_and_nulls_are_counted(training):
    frame, _, _ = training
    baseline = compute_baseline(frame)
    late = baseline.profiles["late"]
    assert late.edges.size == np.unique(frame["late"]).size - 1 or late.edges.size < 20
    assert late.counts.sum() == len(frame)
    score = baseline.profiles["score"]
    assert score.nulls == int(frame["score"].isna().sum()) > 0
    assert score.null_rate == pytest.approx(frame["score"].isna().mean())


def test_categorical_profile_and_kinds(training):
    frame, _, _ = training
    baseline = compute_baseline(frame, categorical=["late"])
    assert baseline.kind("region") == "categorical"
    assert baseline.kind("flag") == "categorical"  # booleans are categories
    assert baseline.kind("late") == "categorical"  # because asked
    assert baseline.kind("income") == "numeric"
    region = baseline.profiles["region"]
    assert isinstance(region, CategoricalProfile)
    expected = frame["region"].value_counts().to_dict()
    assert region.counts == expected
    assert region.nulls == 100
    assert region.value_types == {"string": len(frame) - 100}
    assert set(baseline.profiles["flag"].counts) == {"true", "false"}
    assert set(baseline.profiles["late"].counts) <= {str(v) for v in range(20)}
    assert baseline.feature_names == list(frame.columns)
    with pytest.raises(KeyError, match="nope"):
        baseline.kind("nope")


def test_category_keys_unify_number_spellings():
    assert category_key(1) == category_key(1.0) == category_key(np.int64(1)) == "1"
    assert category_key(True) == "true" and category_key("a") == "a" and category_key(2.5) == "2.5"


def test_prediction_values_cover_scores_classes_and_probabilities():
    assert prediction_values(np.array([0.1, 0.9]))[0] == "score"
    source, values = prediction_values([[0.2, 0.8], [0.7, 0.3]])
    assert source == "probability" and values.tolist() == [0.8, 0.3]
    source, values = prediction_values([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]])
    assert source == "probability" and values.tolist() == [0.5, 0.8]
    source, values = prediction_values(["cat", "dog", None])
    assert source == "class" and values.tolist() == ["cat", "dog", None]
    source, values = prediction_values(np.array([[0.4, 0.6], [0.9, 0.1]]))
    assert source == "probability" and values.tolist() == [0.6, 0.1]


def test_prediction_profile_and_training_quality(training):
    frame, predictions, labels = training
    baseline = compute_baseline(frame, predictions=predictions, labels=labels)
    assert baseline.prediction_source == "score" and baseline.prediction.kind == "numeric"
    assert baseline.prediction.count == len(frame)
    assert baseline.quality.task == BINARY and baseline.quality.n == len(frame)
    assert baseline.quality.positives.sum() == labels.sum()
    clipped = np.clip(predictions, 1e-15, 1 - 1e-15)
    expected_log_loss = -np.mean(labels * np.log(clipped) + (1 - labels) * np.log(1 - clipped))
    assert baseline.quality.log_loss_sum / baseline.quality.n == pytest.approx(expected_log_loss)

    classes = compute_baseline(frame, predictions=np.where(predictions > 0.5, "yes", "no"))
    assert classes.prediction_source == "class" and classes.prediction.kind == "categorical"
    assert sum(classes.prediction.counts.values()) == len(frame)


def test_label_summary_infers_the_task():
    rng = np.random.default_rng(0)
    assert LabelSummary.infer_task(rng.random(50), rng.integers(0, 2, 50)) == BINARY
    assert LabelSummary.infer_task(rng.normal(size=50) * 10, rng.normal(size=50) * 10) == REGRESSION
    assert LabelSummary.infer_task(["a", "b"], ["a", "a"]) == MULTICLASS
    assert LabelSummary.infer_task([[0.2, 0.3, 0.5]], [2]) == MULTICLASS
    regression = LabelSummary().add(np.array([1.0, 2.0, 4.0]), np.array([1.5, 2.0, 3.0]))
    assert regression.task == REGRESSION
    assert regression.sum_abs_error == pytest.approx(1.5) and regression.sum_sq_error == pytest.approx(1.25)


def test_sample_is_bounded_seeded_and_json_safe(training):
    frame, predictions, labels = training
    first = compute_baseline(frame, predictions=predictions, labels=labels, sample_size=300, seed=3)
    again = compute_baseline(frame, predictions=predictions, labels=labels, sample_size=300, seed=3)
    other = compute_baseline(frame, predictions=predictions, labels=labels, sample_size=300, seed=4)
    assert len(first.sample) == 300
    assert first.sample == again.sample and first.sample != other.sample
    row = first.sample[0]
    assert set(row) == {"features", "prediction", "label"}
    assert set(row["features"]) == set(frame.columns)
    json.dumps(first.sample, allow_nan=False)  # NaN became None, numpy became Python
    small = compute_baseline(frame.head(10), sample_size=300)
    assert len(small.sample) == 10


def test_round_trip_through_json(training):
    frame, predictions, labels = training
    baseline = compute_baseline(frame, predictions=predictions, labels=labels, sample_size=50)
    text = json.dumps(baseline.to_dict(), allow_nan=False)
    restored = Baseline.from_dict(orjson.loads(text))
    assert restored.fingerprint == baseline.fingerprint
    assert restored.feature_names == baseline.feature_names
    for name in baseline.feature_names:
        a, b = baseline.profiles[name], restored.profiles[name]
        assert a.kind == b.kind
        if isinstance(a, NumericProfile):
            assert np.array_equal(a.edges, b.edges) and np.array_equal(a.counts, b.counts)
            assert np.array_equal(a.sums, b.sums) and np.array_equal(a.decile_edges, b.decile_edges)
            assert (a.min, a.max, a.mean, a.std, a.nulls) == (b.min, b.max, b.mean, b.std, b.nulls)
        else:
            assert a.counts == b.counts and a.nulls == b.nulls
    assert np.array_equal(restored.quality.positives, baseline.quality.positives)
    assert restored.sample == baseline.sample


def test_fingerprint_changes_with_the_bins(training):
    frame, _, _ = training
    a = compute_baseline(frame)
    b = compute_baseline(frame.assign(income=frame["income"] * 2))
    assert a.fingerprint != b.fingerprint
    assert a.fingerprint == compute_baseline(frame, seed=9).fingerprint


def test_all_null_numeric_column_is_json_safe():
    frame = pd.DataFrame({"x": [np.nan, np.nan], "y": [1.0, 2.0]})
    baseline = compute_baseline(frame)
    profile = baseline.profiles["x"]
    assert profile.count == 0 and profile.nulls == 2 and profile.edges.size == 0
    json.dumps(baseline.to_dict(), allow_nan=False)


@pytest.mark.parametrize("call, message", [
    (lambda f: compute_baseline(f.iloc[:0]), "0 rows"),
    (lambda f: compute_baseline(f, categorical=["missing"]), "missing"),
    (lambda f: compute_baseline(f, predictions=np.zeros(3)), "3 predictions"),
    (lambda f: compute_baseline(f, predictions=np.zeros(len(f)), labels=np.zeros(2)), "2 labels"),
    (lambda f: compute_baseline(f, labels=np.zeros(len(f))), "need the training predictions"),
    (lambda f: compute_baseline(f.to_dict()), "DataFrame"),
])
def test_bad_input_is_a_user_error(training, call, message):
    frame, _, _ = training
    with pytest.raises(UserError, match=message):
        call(frame.head(200))


def test_from_dict_rejects_other_documents():
    with pytest.raises(UserError, match="not a driftline baseline"):
        Baseline.from_dict({"format": 99})
    with pytest.raises(UserError, match="not a driftline baseline"):
        Baseline.from_dict(["nope"])
