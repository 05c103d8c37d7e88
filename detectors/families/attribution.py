"""Findings that parity skew explains: drift and data-quality results of skewed features, reported as skew."""
from __future__ import annotations

from typing import Any

import numpy as np

from driftline.detectors.families.data_quality import expected_types
from driftline.vocabulary import INSUFFICIENT_DATA_REASON
from driftline.detectors.thresholds.decision import DriftThresholds, decide_dataset
from driftline.detectors.families.results import WindowResult, insufficient
from driftline.detectors.families.skew import ParityCheck
from driftline.baseline import Baseline, NumericProfile, Profile, category_key, is_null, json_type
from driftline.vocabulary import (
    DATASET_DRIFT,
    DATA_DRIFT,
    DATA_QUALITY,
    EXPLAINED_BY_KEY,
    MISSING_FEATURE_SHARE,
    MISSING_RATE,
    MULTIVARIATE_DRIFT,
    OUT_OF_RANGE_SHARE,
    PREDICTION_DRIFT,
    SKEW,
    TYPE_CHANGE_SHARE,
    UNSEEN_CATEGORY_SHARE,
)

__all__ = ["explain_drift_by_skew", "explain_quality_by_skew"]


def _explained(result: WindowResult, **details: Any) -> None:
    """Mark `result` as explained by skew: not breached, the verdict it would have had kept."""
    result.details[EXPLAINED_BY_KEY] = SKEW
    result.details["breached_without_skew"] = bool(result.breached)
    result.details.update(details)
    result.breached = False


def explain_drift_by_skew(results: list[WindowResult], parity: ParityCheck,
                          thresholds: DriftThresholds) -> list[WindowResult]:
    """Drift results of features with parity skew: explained by skew (in place; also returned).

    While serving computes a feature differently from training, its distribution
    against the training baseline measures the bug, not the world: the
    feature's ``data_drift`` result gets ``breached=False`` and
    ``details["explained_by"] = "skew"`` (the feature is still alerted, as skew),
    and it leaves the dataset-level share (numerator and denominator: its drift
    could not be judged). ``prediction_drift`` is explained the same way when any
    feature has parity skew, since the model was fed the skewed values, and so is
    ``multivariate_drift``, whose sample holds the skewed values among the others.
    """
    if not parity.skewed:
        return results
    skewed = sorted(parity.skewed)
    for result in results:
        if result.detector == DATA_DRIFT and result.feature in parity.skewed:
            _explained(result)
        elif result.detector in (PREDICTION_DRIFT, MULTIVARIATE_DRIFT):
            _explained(result, skewed_features=skewed)
    for result in results:
        if result.detector != DATASET_DRIFT:
            continue
        judged = [r for r in results if r.detector == DATA_DRIFT and r.feature is not None
                  and not r.insufficient_data and r.feature not in parity.skewed]
        drifted = [r.feature for r in judged if r.breached]
        result.value = len(drifted) / len(judged) if judged else 0.0
        result.breached = decide_dataset(len(drifted), len(judged), thresholds)
        result.details.update(drifted_features=drifted, features=len(judged), explained_by_skew=skewed)
        if not judged and not result.insufficient_data:
            insufficient(result.details, f"{INSUFFICIENT_DATA_REASON}: no feature without skew had enough rows")
    return results


def _recomputed_share(metric: str, profile: Profile, values: list[Any], absent: int) -> float | None:
    """`metric` of data quality measured on the training transform's output for the sample."""
    rows = len(values) + absent
    present = [v for v in values if not is_null(v)]
    if metric == MISSING_RATE:
        return (rows - len(present)) / rows if rows else None
    if metric == MISSING_FEATURE_SHARE:
        return absent / rows if rows else None
    if not present:
        return 0.0
    if metric == TYPE_CHANGE_SHARE:
        expected = expected_types(profile)
        return sum(json_type(v) not in expected for v in present) / len(present)
    if metric == OUT_OF_RANGE_SHARE and isinstance(profile, NumericProfile):
        numbers = [float(v) for v in present if json_type(v) == "number"]
        if not numbers or profile.min is None:
            return 0.0
        array = np.asarray(numbers)
        return float(np.mean((array < profile.min) | (array > profile.max)))
    if metric == UNSEEN_CATEGORY_SHARE and not isinstance(profile, NumericProfile):
        return sum(category_key(v) not in profile.counts for v in present) / len(present)
    return None


def explain_quality_by_skew(results: list[WindowResult], baseline: Baseline,
                            parity: ParityCheck) -> list[WindowResult]:
    """Data-quality breaches that the serving path causes: explained by skew (in place; also returned).

    A breached data-quality result of a feature with parity skew is explained
    by skew when the same check, run on the training transform's output for the
    sampled raw inputs, passes: the nulls, out-of-range values, unseen
    categories, wrong types or absent keys come from the serving computation,
    not from the inputs. When the recomputed features fail the check too (the
    raw inputs themselves are bad), the result stays breached: that is a
    data-quality problem of its own. ``details["recomputed_value"]`` holds the
    check's value on the recomputed sample either way.
    """
    if not parity.skewed:
        return results
    for result in results:
        name = result.feature
        if result.detector != DATA_QUALITY or not result.breached or name not in parity.skewed:
            continue
        profile = baseline.profiles.get(name)
        if profile is None:
            continue
        values = [features[name] for features in parity.recomputed if name in features]
        absent = len(parity.recomputed) - len(values)
        recomputed = _recomputed_share(result.metric, profile, values, absent)
        if recomputed is None:
            continue
        result.details["recomputed_value"] = recomputed
        if result.threshold is None or recomputed <= result.threshold:
            _explained(result)
    return results
