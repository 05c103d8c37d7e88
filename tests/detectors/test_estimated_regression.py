"""Estimated regression performance (direct loss estimation): MAE and RMSE before labels, judged against training.

The synthetic model: y = 2·x1 + sin(x2) + noise whose spread grows with x1 (and in category
"c" of g); the model predicts 2·x1 + 0.9·sin(x2), nearly the mean. Windows shifted toward
large x1 move into the noisy region: the true MAE rises though the relation is unchanged;
shifted far beyond the reference's range, the estimate is untrusted.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from driftline.cli import main
from driftline.detectors.batch.engine import ColumnRoles, Windowing, detect
from driftline.detectors.batch.performance import RegressionReference, window_performance
from driftline.detectors.estimation.dle import estimate_regression, realized_regression
from driftline.detectors.thresholds.levels import WindowThresholds
from driftline import defaults
from driftline.errors import UserError
from driftline.vocabulary import MAE, RMSE

KINDS = {"x1": "numeric", "x2": "numeric", "g": "categorical", "pred": "numeric"}


def frame(rng, n, shift=0.0, noise=1.0):
    x1, x2 = rng.normal(shift, 1.0, n), rng.normal(0.0, 1.0, n)
    g = rng.choice(["a", "b", "c"], n)
    sd = noise * (0.3 + 2.0 * expit(4.0 * (x1 - 0.5)) + 0.5 * (g == "c"))
    return pd.DataFrame({"x1": x1, "x2": x2, "g": g, "pred": 2.0 * x1 + 0.9 * np.sin(x2),
                         "y": 2.0 * x1 + np.sin(x2) + sd * rng.normal(0.0, 1.0, n)})


@pytest.fixture(scope="module")
def reference():
    data = frame(np.random.default_rng(1), 10_000)
    return RegressionReference.from_frame(data, "pred", "y", KINDS)


def realized(data):
    return realized_regression(data["y"].to_numpy(), data["pred"].to_numpy())


def test_estimate_follows_realized_into_the_noisy_region(reference):
    rng = np.random.default_rng(2)
    calm, noisy = frame(rng, 5000), frame(rng, 5000, shift=1.0)
    z = defaults.ESTIMATED_QUALITY_Z
    calm_estimate, noisy_estimate = estimate_regression(reference.estimator, calm, z), \
        estimate_regression(reference.estimator, noisy, z)
    for metric in (MAE, RMSE):
        assert abs(calm_estimate[metric].value - realized(calm)[metric]) < 0.05 * realized(calm)[metric]
        assert abs(noisy_estimate[metric].value - realized(noisy)[metric]) < 0.08 * realized(noisy)[metric]
        # the population is noisier, and the estimate knows it without labels
        assert noisy_estimate[metric].value > 1.3 * calm_estimate[metric].value
        assert realized(noisy)[metric] > 1.3 * realized(calm)[metric]


def test_realized_lies_within_the_band_most_of_the_time(reference):
    rng = np.random.default_rng(3)
    inside = {MAE: [], RMSE: []}
    for _ in range(40):
        data = frame(rng, 500, shift=rng.uniform(-1.0, 1.0))
        estimates = estimate_regression(reference.estimator, data, defaults.ESTIMATED_QUALITY_Z)
        for metric, flags in inside.items():
            flags.append(estimates[metric].lower <= realized(data)[metric] <= estimates[metric].upper)
    for metric, flags in inside.items():  # nominally 99.7 %; room for 40 windows' luck
        assert np.mean(flags) >= 0.9, (metric, np.mean(flags))


def test_alert_on_a_noisier_window_not_on_one_like_the_reference(reference):
    rng = np.random.default_rng(4)
    thresholds = WindowThresholds()
    calm = window_performance(reference, frame(rng, 2000).drop(columns="y"), thresholds)["estimated"]
    shifted = window_performance(reference, frame(rng, 2000, shift=1.0).drop(columns="y"), thresholds)["estimated"]
    for metric in (MAE, RMSE):
        assert calm[metric]["alert"] is False and shifted[metric]["alert"] is True
        training = reference.estimator.training[metric]
        assert shifted[metric]["lower"] > training * (1 + defaults.ESTIMATED_QUALITY_MAX_ERROR_INCREASE)
        assert set(calm[metric]) == {"value", "lower", "upper", "alert", "standard_error", "training"}
    # a larger margin silences it; a window too small is insufficient data, never alerting
    quiet = window_performance(reference, frame(rng, 2000, shift=1.0),
                               WindowThresholds(estimated_quality_max_error_increase=5.0))["estimated"]
    small = window_performance(reference, frame(rng, 50, shift=1.0), thresholds)["estimated"]
    # predictions past the reference's range: the trees extrapolate flat, so the estimate is untrusted
    beyond = window_performance(reference, frame(rng, 2000, shift=3.0), thresholds)["estimated"]
    for metric in (MAE, RMSE):
        assert quiet[metric]["alert"] is False
        assert small[metric]["insufficient_data"] is True and small[metric]["alert"] is False
        assert "50 predicted rows < 100" in small[metric]["reason"]
        assert beyond[metric]["insufficient_data"] is True and beyond[metric]["alert"] is False
        assert "of predictions outside the reference's range" in beyond[metric]["reason"]


def test_the_fit_is_deterministic():
    data = frame(np.random.default_rng(5), 1000)
    window = frame(np.random.default_rng(6), 300)
    first, second = (estimate_regression(RegressionReference.from_frame(data, "pred", "y", KINDS).estimator,
                                         window, 3.0) for _ in range(2))
    assert first == second


def test_a_perfect_model_estimates_no_error():
    """Every loss is zero (a Poisson fit refuses that): the estimate is zero with a zero band, and never alerts."""
    data = frame(np.random.default_rng(8), 1000).assign(pred=lambda f: f["y"])
    window = detect(data, data.iloc[:500],
                    columns=ColumnRoles(prediction="pred", label="y"))["windows"][0]["performance"]
    for metric in (MAE, RMSE):
        assert window["estimated"][metric]["value"] == 0.0 and window["estimated"][metric]["upper"] == 0.0
        assert window["estimated"][metric]["alert"] is False and window["realized"][metric]["value"] == 0.0


def test_huge_targets_keep_their_squares_finite():
    """Errors near 1e200 square beyond the float range: fitted in a unit of their own, the estimate scales."""
    rng = np.random.default_rng(9)
    small = frame(rng, 2000)
    huge = small.assign(**{c: small[c] * 1e200 for c in ("x1", "pred", "y")})
    found = {}
    for name, data in (("small", small), ("huge", huge)):
        estimate = estimate_regression(RegressionReference.from_frame(data, "pred", "y", KINDS).estimator,
                                       data.iloc[:1000], 3.0)
        found[name] = {metric: estimate[metric].value for metric in (MAE, RMSE)}
        assert all(np.isfinite([estimate[m].value, estimate[m].lower, estimate[m].upper]).all() for m in estimate)
    assert realized(huge)[RMSE] == pytest.approx(realized(small)[RMSE] * 1e200, rel=1e-9)
    for metric in (MAE, RMSE):
        assert found["huge"][metric] == pytest.approx(found["small"][metric] * 1e200, rel=0.05)


def test_detect_reports_estimated_and_realized_with_the_gap():
    rng = np.random.default_rng(7)
    reference, current = frame(rng, 4000), frame(rng, 2000, shift=0.5)
    current.loc[:9, "y"] = np.nan  # rows without a label (or an infinite one) are skipped, not fatal
    current.loc[10:14, "y"] = np.inf
    current.loc[15:19, "pred"] = np.nan
    result = detect(reference, current, columns=ColumnRoles(prediction="pred", label="y"),
                    windowing=Windowing(chunk_size=1000))
    assert len(result["windows"]) == 2
    for window in result["windows"]:
        assert "y" not in {f["name"] for f in window["features"]}  # the label is not a feature
        performance = window["performance"]
        assert set(performance) == {"estimated", "realized", "estimation_invalid"}  # labels: the estimates checked
        assert set(performance["estimated"]) == {MAE, RMSE} and performance["estimation_invalid"] is False
        for metric, entry in performance["realized"].items():
            assert set(entry) == {"value", "labels", "gap", "concept_drift"}
            assert entry["gap"] == pytest.approx(entry["value"] - performance["estimated"][metric]["value"], abs=0.1)
            assert entry["concept_drift"] is False
    assert result["windows"][0]["performance"]["realized"][MAE]["labels"] == 980
    json.dumps(result, allow_nan=False)
    # The relation changes (the model is off by a constant now): the gap is flagged.
    current["y"] += 1.5
    drifted = detect(reference, current,
                     columns=ColumnRoles(prediction="pred", label="y"))["windows"][0]["performance"]["realized"]
    assert drifted[MAE]["concept_drift"] is True and drifted[MAE]["gap"] > 0.5


@pytest.mark.parametrize("side, change, message", [
    ("both", lambda f: f.assign(pred=f["pred"].astype(str)), "--prediction pred must hold numbers for a regression"),
    ("reference", lambda f: f.assign(y=np.where(np.arange(len(f)) < 100, f["y"], np.nan)),
     "the reference has 100 rows with a finite label and prediction; .* needs 300"),
    ("current", lambda f: f.assign(y="unknown"), "--label y must hold numbers for a regression model.*current data"),
    ("current", lambda f: f.assign(pred="high"), "column pred has numeric values in the reference but text"),
])
def test_bad_input_is_one_line(side, change, message):
    rng = np.random.default_rng(8)
    frames = {"reference": frame(rng, 600), "current": frame(rng, 300)}
    for name in frames:
        if side in (name, "both"):
            frames[name] = change(frames[name])
    with pytest.raises(UserError, match=message) as exc:
        detect(frames["reference"], frames["current"], columns=ColumnRoles(prediction="pred", label="y"))
    assert "\n" not in str(exc.value)


def test_detect_regression_on_the_command_line(tmp_path, capfd):
    rng = np.random.default_rng(9)
    frame(rng, 3000).to_csv(tmp_path / "ref.csv", index=False)
    frame(rng, 1000, shift=1.0).to_csv(tmp_path / "cur.csv", index=False)
    try:
        main(["detect", "--reference", str(tmp_path / "ref.csv"), "--current", str(tmp_path / "cur.csv"),
              "--prediction", "pred", "--label", "y"])
    except SystemExit as exc:
        assert not exc.code
    performance = json.loads(capfd.readouterr().out)["windows"][0]["performance"]
    assert set(performance["estimated"]) == {MAE, RMSE} and set(performance["realized"]) == {MAE, RMSE}
    assert performance["estimated"][MAE]["alert"] is True
    assert performance["estimated"][MAE]["lower"] <= performance["realized"][MAE]["value"] \
        <= performance["estimated"][MAE]["upper"]
