"""Data and prediction drift of one window: binned tests per feature, verdict by `driftline.detectors.thresholds.decision`."""
from __future__ import annotations

from typing import Any

from driftline.detectors.stats import binned, two_sample
from driftline.vocabulary import INSUFFICIENT_DATA_REASON
from driftline.detectors.thresholds.decision import DriftThresholds, correct_window, decide_dataset, judge_feature
from driftline.detectors.families.results import WindowResult, insufficient
from driftline.baseline import Baseline, NumericProfile, Profile
from driftline.vocabulary import (
    DATASET_DRIFT,
    DATA_DRIFT,
    DRIFTED_SHARE,
    INSUFFICIENT_DATA,
    PREDICTION_DRIFT,
    PSI,
)
from driftline.window_state import FeatureWindow, WindowState

__all__ = ["drift_results"]

# the prediction's result name; its key among the tested columns cannot be a feature's name
_PREDICTION = "prediction"
_PREDICTION_KEY = "\x00prediction"


def _feature_tests(profile: Profile, window: FeatureWindow, events: int) -> tuple[dict[str, dict[str, Any]], int]:
    """The drift tests of one feature and the rows behind them (the smaller side)."""
    if isinstance(profile, NumericProfile):
        tests = binned.numeric_tests(profile, window)
        rows = min(profile.count, window.binned)
    else:
        tests = binned.categorical_tests(profile, window)
        rows = min(profile.count, sum(window.categories.values()))
    reference_rows = profile.rows
    difference, p_value = two_sample.missing_rate_test(profile.nulls, reference_rows, window.nulls, events)
    tests["missing"] = {"value": window.nulls / events if events else 0.0, "reference": profile.null_rate,
                        "p_value": p_value}
    return tests, rows


def _drift_result(detector: str, name: str, profile: Profile, window: FeatureWindow | None, events: int,
                  thresholds: DriftThresholds, tests: dict[str, dict[str, Any]] | None = None,
                  rows: int | None = None) -> WindowResult:
    kind = profile.kind
    primary = PSI
    if window is None or events == 0:
        return WindowResult(detector, name, primary, None, thresholds.psi, False,
                              insufficient({"kind": kind, "rows": 0}, f"{INSUFFICIENT_DATA_REASON}: no values"))
    if tests is None:
        tests, rows = _feature_tests(profile, window, events)
    drift, reason = judge_feature(tests, kind, rows, thresholds)  # type: ignore[arg-type]
    details: dict[str, Any] = {"kind": kind, "rows": rows, "reason": reason, "tests": tests}
    if reason.startswith(INSUFFICIENT_DATA_REASON):
        details[INSUFFICIENT_DATA] = True
        if isinstance(profile, NumericProfile) and window.unbinned and not window.binned:
            details["reason"] = f"{INSUFFICIENT_DATA_REASON}: values were counted before the baseline existed"
    return WindowResult(detector, name, primary, tests[PSI]["value"], thresholds.psi, bool(drift), details)


def drift_results(baseline: Baseline, state: WindowState, thresholds: DriftThresholds, *, features: bool = True,
                  prediction: bool = True) -> list[WindowResult]:
    """Per-feature drift and the dataset verdict (`features`), and the prediction's drift (`prediction`).

    Every verdict of the window is one hypothesis of one family: the p-values are corrected by
    Benjamini-Hochberg across the features and the prediction together (judged alone, the
    prediction's 5 % level held for it alone, so it flagged unchanged windows the features' did not).
    """
    tested: dict[str, tuple[dict[str, dict[str, Any]], int]] = {}
    kinds: dict[str, str] = {}
    if features and state.events:
        for name, profile in baseline.profiles.items():
            window = state.features.get(name)
            if window is not None:
                tested[name], kinds[name] = _feature_tests(profile, window, state.events), profile.kind
    window = state.prediction if prediction and baseline.prediction is not None else None
    count = 0 if window is None else (window.count + sum(window.categories.values()))
    if window is not None and count and state.events:
        tested[_PREDICTION_KEY], kinds[_PREDICTION_KEY] = (_feature_tests(baseline.prediction, window, state.events),  # type: ignore[arg-type]
                                                   baseline.prediction.kind)  # type: ignore[union-attr]
    own_thresholds = {name: thresholds.for_feature(name) for name in baseline.profiles}
    prediction_thresholds = thresholds.for_feature(_PREDICTION)
    correct_window({name: (tests, tests["missing"]) for name, (tests, _) in tested.items()}, kinds,
                   lambda name: prediction_thresholds if name == _PREDICTION_KEY else own_thresholds[name],
                   thresholds.alpha)
    results: list[WindowResult] = []
    if features:
        results += _data_drift(baseline, state, thresholds, own_thresholds,
                               {n: t for n, t in tested.items() if n != _PREDICTION_KEY})
    if prediction and baseline.prediction is not None:
        own = tested.get(_PREDICTION_KEY)
        result = _drift_result(PREDICTION_DRIFT, _PREDICTION, baseline.prediction, window if count else None,
                               state.events, prediction_thresholds, *(own or (None, None)))
        result.details["source"] = baseline.prediction_source
        results.append(result)
    return results


def _data_drift(baseline: Baseline, state: WindowState, thresholds: DriftThresholds,
                own_thresholds: dict[str, DriftThresholds],
                tested: dict[str, tuple[dict[str, dict[str, Any]], int]]) -> list[WindowResult]:
    results = []
    for name, profile in baseline.profiles.items():
        feature_thresholds = own_thresholds[name]
        if name in tested:
            tests, rows = tested[name]
            results.append(_drift_result(DATA_DRIFT, name, profile, state.features[name], state.events,
                                         feature_thresholds, tests, rows))
        else:
            results.append(_drift_result(DATA_DRIFT, name, profile, None, state.events, feature_thresholds))
    judged = [r for r in results if not r.insufficient_data]
    drifted = [r.feature for r in judged if r.breached]
    share = len(drifted) / len(judged) if judged else 0.0
    details: dict[str, Any] = {"drifted_features": drifted, "features": len(judged)}
    if not judged:
        insufficient(details, f"{INSUFFICIENT_DATA_REASON}: no feature had enough rows")
    results.append(WindowResult(DATASET_DRIFT, None, DRIFTED_SHARE, share, thresholds.dataset_drift_share,
                                  decide_dataset(len(drifted), len(judged), thresholds), details))
    return results
