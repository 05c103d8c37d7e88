"""Data quality of one window against the training profiles: missing, out-of-range, unseen, type changes, schema."""
from __future__ import annotations

from typing import Any

from driftline.detectors.stats import two_sample
from driftline.vocabulary import INSUFFICIENT_DATA_REASON
from driftline.baseline.values import finite_or_none
from driftline.detectors.families.results import WindowResult, insufficient
from driftline.detectors.thresholds.levels import WindowThresholds
from driftline.baseline import Baseline, NumericProfile, Profile
from driftline.vocabulary import (
    DATA_QUALITY,
    MISSING_FEATURE_SHARE,
    MISSING_RATE,
    NEW_FEATURE_SHARE,
    OUT_OF_RANGE_SHARE,
    TYPE_CHANGE_SHARE,
    UNSEEN_CATEGORY_SHARE,
)
from driftline.window_state import OTHER_CATEGORY, OTHER_FEATURES, FeatureWindow, WindowState

__all__ = ["data_quality", "expected_types"]


def expected_types(profile: Profile) -> set[str]:
    if isinstance(profile, NumericProfile):
        return {"number"}
    return set(profile.value_types) or {"string"}


def data_quality(baseline: Baseline, state: WindowState, thresholds: WindowThresholds) -> list[WindowResult]:
    """Missing rate, out-of-range, unseen categories, type changes, missing and new features."""
    events = state.events
    enough = events >= thresholds.data_quality_min_rows
    results = []

    def result(feature: str | None, metric: str, value: float, threshold: float, breached: bool,
               details: dict[str, Any]) -> None:
        details = dict(details, events=events)
        if not enough:
            insufficient(details, f"{INSUFFICIENT_DATA_REASON}: {events} events < {thresholds.data_quality_min_rows}")
            breached = False
        results.append(WindowResult(DATA_QUALITY, feature, metric, value, threshold, bool(breached), details))

    for name, profile in baseline.profiles.items():
        window = state.features.get(name) or FeatureWindow(kind=profile.kind, absent=events, nulls=events)
        rate = window.nulls / events if events else 0.0
        increase, p_value = two_sample.missing_rate_test(profile.nulls, profile.rows, window.nulls, events)
        limit = profile.null_rate + thresholds.missing_rate_increase
        result(name, MISSING_RATE, rate, limit,
               increase >= thresholds.missing_rate_increase and p_value < thresholds.drift.alpha,
               {"reference": profile.null_rate, "nulls": window.nulls, "p_value": p_value})
        absent_share = window.absent / events if events else 0.0
        result(name, MISSING_FEATURE_SHARE, absent_share, thresholds.missing_feature_share,
               absent_share > thresholds.missing_feature_share, {"absent": window.absent})
        values = sum(window.value_types.values())
        expected = expected_types(profile)
        changed = {k: v for k, v in window.value_types.items() if k not in expected}
        changed_count = sum(changed.values())
        share = changed_count / values if values else 0.0
        result(name, TYPE_CHANGE_SHARE, share, thresholds.type_change_share,
               share > thresholds.type_change_share,
               {"expected_types": sorted(expected), "changed": changed})
        if isinstance(profile, NumericProfile):
            outside = window.below_min + window.above_max
            numbers = window.count + window.nonfinite
            share = outside / numbers if numbers else 0.0
            result(name, OUT_OF_RANGE_SHARE, share, thresholds.out_of_range_share,
                   share > thresholds.out_of_range_share,
                   {"below_min": window.below_min, "above_max": window.above_max, "training_min": profile.min,
                    "training_max": profile.max, "window_min": finite_or_none(window.min), "window_max": finite_or_none(window.max)})
        else:
            seen = sum(window.categories.values())
            unseen = {k: v for k, v in window.categories.items() if k not in profile.counts}
            share = sum(unseen.values()) / seen if seen else 0.0
            top = dict(sorted(unseen.items(), key=lambda kv: -kv[1])[:10])
            result(name, UNSEEN_CATEGORY_SHARE, share, thresholds.unseen_category_share,
                   share > thresholds.unseen_category_share, {"unseen": top, "unseen_categories": len(unseen)})
    for name, window in state.features.items():
        if name in baseline.profiles:
            continue
        share = (events - window.absent) / events if events else 0.0
        details: dict[str, Any] = {"kind": window.kind}
        if name == OTHER_FEATURES:  # the names beyond the window's bound, in one result
            names = {k: v for k, v in window.categories.items() if k != OTHER_CATEGORY}
            details.update(names=dict(sorted(names.items(), key=lambda kv: (-kv[1], kv[0]))[:10]),
                           names_counted=len(names), values_of_more_names=window.categories.get(OTHER_CATEGORY, 0))
        result(name, NEW_FEATURE_SHARE, share, thresholds.new_feature_share,
               share > thresholds.new_feature_share, details)
    return results
