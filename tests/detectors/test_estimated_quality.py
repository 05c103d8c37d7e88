"""Estimated quality before labels (CBPE): inside its band on a calibrated model, a flagged gap under concept drift.

The synthetic model: scores whose logit is normal, labels drawn with P(label = 1 | score) =
score (calibrated by construction). A covariate shift moves the logits (the score mix),
which moves the true metrics too; a concept drift changes P(label | score).
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, logit

from driftline.cli import main
from driftline.detectors.batch.engine import ColumnRoles, Windowing, detect
from driftline.detectors.families.estimated_quality import judge_estimates
from driftline.detectors.estimation.cbpe import fine_bin_score_counts, score_counts
from driftline.detectors.estimation.cbpe_multiclass import estimate_multiclass, realized_multiclass
from driftline.detectors.stats.quality import quality_metrics, training_calibration
from driftline.detectors.thresholds.levels import WindowThresholds
from driftline.detectors.families.window import evaluate_window
from driftline import defaults
from driftline.baseline import BINARY, LabelSummary, compute_baseline
from driftline.errors import UserError
from driftline.vocabulary import (ACCURACY, ESTIMATED_METRICS, ESTIMATED_QUALITY, ESTIMATION_INVALID, ROC_AUC,
                                  details_of)
from driftline.window_state import EventBatch, WindowState

LOGIT_MEAN, LOGIT_SD = -0.5, 1.5
T0 = 1_767_225_600_000


def draw_scores(rng, n, shift=0.0, sd=LOGIT_SD):
    return expit(rng.normal(LOGIT_MEAN + shift, sd, n))


def calibrated_labels(rng, scores):
    return (rng.random(scores.size) < scores).astype(int)


def drifted_labels(rng, scores):
    """A new relation: the score explains much less (slope 0.3), a hidden factor the rest."""
    return (rng.random(scores.size) < expit(0.3 * logit(scores) + rng.normal(0.0, 1.0, scores.size))).astype(int)


@pytest.fixture(scope="module")
def reference():
    rng = np.random.default_rng(11)
    scores = draw_scores(rng, 20_000)
    summary = LabelSummary(task=BINARY).add(scores, calibrated_labels(rng, scores))
    return summary, training_calibration(summary)


def judged(reference, scores, labels=None, thresholds=None):
    summary, calibration = reference
    labelled = None if labels is None else LabelSummary(task=BINARY).add(scores, labels)
    results = judge_estimates(summary, calibration, score_counts(scores, summary.bins),
                              thresholds or WindowThresholds(), labelled)
    return {r.metric: r for r in results}


@pytest.mark.parametrize("shift", [0.0, 0.8])
def test_realized_lies_within_the_band_most_of_the_time(reference, shift):
    rng = np.random.default_rng(5)
    inside = {metric: [] for metric in ESTIMATED_METRICS}
    errors = []
    for _ in range(80):
        scores = draw_scores(rng, 500, shift)
        labels = calibrated_labels(rng, scores)
        realized = quality_metrics(LabelSummary(task=BINARY).add(scores, labels))
        for metric, r in judged(reference, scores).items():
            assert not r.insufficient_data, r.details
            inside[metric].append(r.details["lower"] <= realized[metric] <= r.details["upper"])
            if metric == ACCURACY:
                errors.append(realized[metric] - r.value)
    # A 3-standard-error band: nominally 99.7 %; most of the time with room for 80 windows' luck.
    for metric, flags in inside.items():
        assert np.mean(flags) >= 0.95, (metric, np.mean(flags))
    # Unbiased: the mean error is a fraction of one window's standard error (~0.02 at 500 rows).
    assert abs(np.mean(errors)) < 0.006


def test_covariate_shift_moves_the_estimate_with_the_truth(reference):
    rng = np.random.default_rng(6)
    scores = draw_scores(rng, 20_000, shift=0.0, sd=0.4)  # scores bunched near 0.4: a harder population
    labels = calibrated_labels(rng, scores)
    realized = quality_metrics(LabelSummary(task=BINARY).add(scores, labels))
    results = judged(reference, scores)
    training = quality_metrics(reference[0])
    for metric in (ACCURACY, ROC_AUC):
        r = results[metric]
        assert r.value < training[metric] - 0.1  # the population is harder ...
        assert abs(r.value - realized[metric]) < 0.02  # ... and the estimate knows it without labels
        assert r.breached and r.details["upper"] < r.threshold == pytest.approx(
            training[metric] - defaults.ESTIMATED_QUALITY_MAX_DROP)


def test_no_alert_on_windows_like_training(reference):
    rng = np.random.default_rng(8)
    alerts = [r.metric for _ in range(40) for r in judged(reference, draw_scores(rng, 1000)).values() if r.breached]
    assert alerts == []


def test_concept_drift_opens_a_flagged_gap(reference):
    rng = np.random.default_rng(9)
    scores = draw_scores(rng, 5000)
    calm = judged(reference, scores, calibrated_labels(rng, scores))
    drifted = judged(reference, scores, drifted_labels(rng, scores))
    assert drifted[ROC_AUC].details["concept_drift"] is True
    assert drifted[ROC_AUC].details["gap"] < -3 * drifted[ROC_AUC].details["gap_standard_error"]
    assert calm[ROC_AUC].details["concept_drift"] is False
    # Realized is reported beside the estimate, which does not move (same scores).
    assert drifted[ROC_AUC].value == calm[ROC_AUC].value
    assert drifted[ROC_AUC].details["realized"] < calm[ROC_AUC].details["realized"] - 0.1


def test_gap_stays_quiet_without_concept_drift(reference):
    rng = np.random.default_rng(10)
    flags = []
    for _ in range(60):
        scores = draw_scores(rng, 1000, shift=0.5)
        flags += [bool(r.details["concept_drift"]) for r in judged(reference, scores, calibrated_labels(rng, scores)).values()]
    assert np.mean(flags) <= 0.02


def test_scores_outside_the_calibrated_range_are_untrusted():
    rng = np.random.default_rng(12)
    scores = rng.uniform(0.2, 0.8, 10_000)
    summary = LabelSummary(task=BINARY).add(scores, calibrated_labels(rng, scores))
    window = rng.uniform(0.5, 0.99, 1000)
    results = judge_estimates(summary, training_calibration(summary), score_counts(window, summary.bins),
                              WindowThresholds())
    for r in results:
        assert r.insufficient_data and not r.breached
        assert "outside the calibrated range" in r.details["reason"]
        assert r.details["outside_calibrated_share"] > 0.3


def test_too_few_rows_are_insufficient(reference):
    rng = np.random.default_rng(13)
    results = judged(reference, draw_scores(rng, defaults.ESTIMATED_QUALITY_MIN_ROWS - 1, sd=0.3))
    assert all(r.insufficient_data and not r.breached and "scored rows" in r.details["reason"]
               for r in results.values())


def test_fine_bins_of_a_window_give_the_exact_estimate(reference):
    """The streaming path (prediction counted on the baseline's quantile bins) matches the raw scores'."""
    rng = np.random.default_rng(14)
    train = draw_scores(rng, 20_000)
    baseline = compute_baseline(pd.DataFrame({"x": rng.normal(size=train.size)}), predictions=train,
                                labels=calibrated_labels(rng, train))
    scores = draw_scores(rng, 3000, shift=0.6)
    events = [{"event_id": f"e{i}", "ts": T0 + i, "features": {"x": 0.0}, "prediction": float(s)}
              for i, s in enumerate(scores)]
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(events))
    state.add_labels(scores, calibrated_labels(rng, scores))
    streamed = {r.metric: r for r in evaluate_window(baseline, state, families=(ESTIMATED_QUALITY,)).results}
    assert set(streamed) == {*ESTIMATED_METRICS, ESTIMATION_INVALID}  # the estimates, and the check of them
    calibration = training_calibration(baseline.quality)
    direct = judge_estimates(baseline.quality, calibration, score_counts(scores, baseline.quality.bins),
                             WindowThresholds())
    window = state.prediction
    assert fine_bin_score_counts(window.counts, window.sums, baseline.quality.bins).sum() == 3000
    for r in direct:
        assert streamed[r.metric].value == pytest.approx(r.value, abs=0.003)
        typed = details_of(ESTIMATED_QUALITY, streamed[r.metric].to_dict()["details"])
        assert set(streamed[r.metric].details) <= type(typed).keys()
        assert typed.realized is not None and typed.labels == 3000


# --- detect --label ------------------------------------------------------------------

def _frames(rng, n_ref=5000, n_cur=4000, concept=False):
    def frame(n, shift):
        x = rng.normal(shift, 1.0, n)
        score = expit(1.5 * x - 0.5)
        return pd.DataFrame({"x": x, "score": score, "y": calibrated_labels(rng, score)})
    reference, current = frame(n_ref, 0.0), frame(n_cur, 0.5)
    if concept:
        current["y"] = drifted_labels(rng, current["score"].to_numpy())
    return reference, current


def test_detect_reports_estimated_and_realized_per_window():
    reference, current = _frames(np.random.default_rng(1))
    result = detect(reference, current, columns=ColumnRoles(prediction="score", label="y"),
                    windowing=Windowing(chunk_size=2000))
    assert len(result["windows"]) == 2
    for window in result["windows"]:
        assert "y" not in {f["name"] for f in window["features"]}  # the label is not a feature
        estimated, realized = window["performance"]["estimated"], window["performance"]["realized"]
        assert list(estimated) == list(ESTIMATED_METRICS) and set(realized) == set(ESTIMATED_METRICS)
        for metric, entry in estimated.items():
            assert {"value", "lower", "upper", "alert"} <= set(entry)
            assert entry["lower"] <= entry["value"] <= entry["upper"]
            assert entry["lower"] - 0.02 <= realized[metric]["value"] <= entry["upper"] + 0.02
            assert realized[metric]["labels"] == 2000 and realized[metric]["concept_drift"] is False
    # Without the label in the current data: estimated only.
    result = detect(reference, current.drop(columns="y"), columns=ColumnRoles(prediction="score", label="y"))
    assert set(result["windows"][0]["performance"]) == {"estimated"}
    json.dumps(result, allow_nan=False)


def test_detect_flags_the_gap_under_concept_drift():
    reference, current = _frames(np.random.default_rng(2), n_cur=5000, concept=True)
    realized = detect(reference, current,
                      columns=ColumnRoles(prediction="score", label="y"))["windows"][0]["performance"]["realized"]
    assert realized[ROC_AUC]["concept_drift"] is True and realized[ROC_AUC]["gap"] < -0.1


@pytest.mark.parametrize("change, message", [
    (dict(prediction=None), "needs --prediction"),
    (dict(label="nope"), "the reference has no such column"),
    (dict(label="grade"), r"not 0/1\. .* and regression models \(a numeric label"),
    (dict(label="grade", prediction="score,x"), "names 2 probability columns but --label grade has 3 classes"),
    (dict(label=None, prediction="score,x"), "need --label"),
    (dict(prediction="grade"), "must hold the model's scores"),
])
def test_detect_label_errors_are_clear(change, message):
    reference, current = _frames(np.random.default_rng(3), 500, 500)
    reference["grade"] = current["grade"] = np.resize(["a", "b", "c"], 500)
    options = dict(prediction="score", label="y") | change
    with pytest.raises(UserError, match=message):
        detect(reference, current, columns=ColumnRoles(**options))


def test_detect_label_on_the_command_line(tmp_path, capfd):
    reference, current = _frames(np.random.default_rng(4), 3000, 1000)
    reference.to_csv(tmp_path / "ref.csv", index=False)
    current.to_csv(tmp_path / "cur.csv", index=False)
    args = ["detect", "--reference", str(tmp_path / "ref.csv"), "--current", str(tmp_path / "cur.csv"), "--label", "y"]
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code != 0 and "needs --prediction" in capfd.readouterr().err
    try:
        main([*args, "--prediction", "score"])
    except SystemExit as exc:
        assert not exc.code
    window = json.loads(capfd.readouterr().out)["windows"][0]
    assert window["performance"]["estimated"][ROC_AUC]["alert"] is False
    assert window["performance"]["realized"][ROC_AUC]["value"] > 0.7


# --- multiclass (detect --label with one probability column per class) ---------------------

def _multiclass_frame(rng, n, shift=0.0, concept=False):
    x = rng.normal(shift, 1.0, (n, 2))
    logits = np.column_stack([1.5 * x[:, 0], 1.5 * x[:, 1], np.full(n, -0.3)])
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    truth = np.roll(p, 1, axis=1) * 0.7 + p * 0.3 if concept else p  # concept drift: the classes' meaning moves
    y = (rng.random(n)[:, None] > truth.cumsum(axis=1)).sum(axis=1).clip(0, 2)
    return pd.DataFrame({"x1": x[:, 0], "x2": x[:, 1], "p_a": p[:, 0], "p_b": p[:, 1], "p_c": p[:, 2],
                         "y": np.array(["a", "b", "c"])[y]})


def test_multiclass_accuracy_and_macro_f1_within_their_band():
    rng = np.random.default_rng(21)
    reference, current = _multiclass_frame(rng, 20_000), _multiclass_frame(rng, 40_000, shift=0.5)
    result = detect(reference, current, columns=ColumnRoles(prediction="p_a,p_b,p_c", label="y"),
                    windowing=Windowing(chunk_size=1000))
    inside = {"accuracy": [], "macro_f1": []}
    for window in result["windows"]:
        assert window["prediction"] is None and {f["name"] for f in window["features"]} == {"x1", "x2"}
        estimated, realized = window["performance"]["estimated"], window["performance"]["realized"]
        assert set(estimated) == set(inside)
        for metric, flags in inside.items():
            flags.append(estimated[metric]["lower"] <= realized[metric]["value"] <= estimated[metric]["upper"])
            assert realized[metric]["concept_drift"] is not None
    assert len(inside["accuracy"]) == 40
    for metric, flags in inside.items():
        assert np.mean(flags) >= 0.9, (metric, np.mean(flags))


def test_multiclass_macro_f1_standard_error_is_the_spread_of_labels_drawn_from_the_probabilities():
    # a row's label counts for one class and against the others: the classes' F1 move together (summing their
    # variances alone gave 0.0104 here against a drawn spread of 0.0141)
    rng = np.random.default_rng(23)
    p = np.exp(rng.normal(0.0, 1.5, (1000, 3)))
    p /= p.sum(axis=1, keepdims=True)
    predicted = p.argmax(axis=1)
    drawn = [realized_multiclass((rng.random(1000)[:, None] > p.cumsum(axis=1)).sum(axis=1).clip(0, 2),
                                 predicted, 3)["macro_f1"] for _ in range(600)]
    standard_error = estimate_multiclass(p, predicted, 3.0)["macro_f1"].standard_error
    assert standard_error == pytest.approx(np.std(drawn), rel=0.1)


def test_multiclass_concept_drift_opens_a_flagged_gap():
    rng = np.random.default_rng(22)
    reference, current = _multiclass_frame(rng, 20_000), _multiclass_frame(rng, 3000, concept=True)
    realized = detect(reference, current,
                      columns=ColumnRoles(prediction="p_a,p_b,p_c", label="y"))["windows"][0]["performance"]["realized"]
    assert realized["accuracy"]["concept_drift"] is True and realized["accuracy"]["gap"] < -0.1


def test_thresholds_from_the_estimated_quality_section(tmp_path, capfd):
    thresholds = WindowThresholds.from_mapping({"estimated_quality": {"estimated_quality_z": 2.0},
                                                "models": {"m": {"estimated_quality": {"estimated_quality_z": 1.0}}}},
                                               model="m")
    assert thresholds.estimated_quality_z == 1.0
    with pytest.raises(UserError, match="estimated_quality_zz"):
        WindowThresholds.from_mapping({"estimated_quality": {"estimated_quality_zz": 2.0}})
    with pytest.raises(UserError, match="estimated_quality_max_drop: input should be greater than or equal to 0"):
        WindowThresholds(estimated_quality_max_drop=-0.1)
    # detect reads them from --config: too few rows for the estimate, so it says why and never alerts.
    reference, current = _frames(np.random.default_rng(6), 3000, 1000)
    reference.to_csv(tmp_path / "ref.csv", index=False)
    current.to_csv(tmp_path / "cur.csv", index=False)
    (tmp_path / "c.toml").write_text("[estimated_quality]\nestimated_quality_min_rows = 5000\n")
    try:
        main(["detect", "--reference", str(tmp_path / "ref.csv"), "--current", str(tmp_path / "cur.csv"),
              "--prediction", "score", "--label", "y", "--config", str(tmp_path / "c.toml")])
    except SystemExit as exc:
        assert not exc.code
    estimated = json.loads(capfd.readouterr().out)["windows"][0]["performance"]["estimated"]
    assert all(e["insufficient_data"] and "1000 scored rows < 5000" in e["reason"] and e["alert"] is False
               for e in estimated.values())
