"""Training-serving skew: parity (the training transform re-run on raw inputs) and distribution skew."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from driftline.detectors.stats import binned, two_sample
from driftline.vocabulary import INSUFFICIENT_DATA_REASON
from driftline.detectors.families.results import WindowResult, insufficient, json_safe
from driftline.detectors.thresholds.levels import WindowThresholds
from driftline.baseline import Baseline, NumericProfile, category_key, is_null
from driftline.vocabulary import DISTRIBUTION_PSI, PARITY_MISMATCH_RATE, SKEW
from driftline.window_state import WindowState

__all__ = ["ParityCheck", "parity_skew", "skew", "skew_with_parity"]


@dataclass
class ParityCheck:
    """What the parity check found, for attributing other families' findings to skew.

    ``judged``: features whose parity could be judged (a transform, enough sampled
    events with raw inputs, the transform ran); ``skewed``: those whose mismatch
    rate breached. ``served`` / ``recomputed``: the sampled feature records and
    the training transform's output for the same raw inputs, pairwise.
    """

    judged: set[str] = field(default_factory=set)
    skewed: set[str] = field(default_factory=set)
    served: list[Mapping[str, Any]] = field(default_factory=list)
    recomputed: list[Mapping[str, Any]] = field(default_factory=list)


def skew(baseline: Baseline, state: WindowState, thresholds: WindowThresholds,
         transform: Any | None) -> list[WindowResult]:
    """Distribution skew per feature and parity skew on the sample (`skew_with_parity`)."""
    return skew_with_parity(baseline, state, thresholds, transform)[0]


def skew_with_parity(baseline: Baseline, state: WindowState, thresholds: WindowThresholds,
                     transform: Any | None) -> tuple[list[WindowResult], ParityCheck]:
    """Skew results and the `ParityCheck` behind them.

    **Parity skew** (`parity_skew`) is the evidence of training-serving skew: the
    training transform re-run on the logged raw inputs must reproduce the
    served features. **Distribution skew** (serving vs the training baseline,
    PSI on the reference deciles) is always reported, but the same comparison
    is data drift's, so it cannot tell a serving bug from a world that changed:
    it is ``breached`` only for a feature whose parity could not be checked (no
    transform, too few sampled events with raw ``inputs``, or the transform
    failed), where it is the only skew evidence there is. Where parity was
    checked, a distribution difference with matching parity is drift, and
    ``details["parity_checked"]`` says which case applies.
    """
    parity_results: list[WindowResult] = []
    parity = ParityCheck()
    if transform is not None:
        parity_results, parity = _parity_check(baseline, state, thresholds, transform)
    results = []
    for name, profile in baseline.profiles.items():
        window = state.features.get(name)
        if isinstance(profile, NumericProfile):
            rows = min(profile.count, window.binned) if window is not None else 0
            value = binned.psi_binned(profile, window) if rows else None
        else:
            rows = min(profile.count, sum(window.categories.values())) if window is not None else 0
            value = two_sample.psi(*binned.category_counts(profile, window)[1:]) if rows else None
        checked = name in parity.judged
        details: dict[str, Any] = {"kind": profile.kind, "rows": rows, "parity_checked": checked}
        min_rows = thresholds.drift.for_feature(name).min_rows
        large = value is not None and value >= thresholds.skew_distribution_psi
        breached = large and not checked
        if rows < min_rows:
            insufficient(details, f"{INSUFFICIENT_DATA_REASON}: {rows} rows < {min_rows}")
            breached = False
        elif checked:
            details["reason"] = ("parity skew: see parity_mismatch_rate" if name in parity.skewed else
                                 "parity holds: serving computes this feature as training does, so a "
                                 "distribution difference is drift (data_drift), not skew")
        elif large:
            details["reason"] = "no parity check possible for this feature: distribution skew is the only evidence"
        results.append(WindowResult(SKEW, name, DISTRIBUTION_PSI, value, thresholds.skew_distribution_psi,
                                      bool(breached), details))
    return results + parity_results, parity


def _apply(transform: Any, inputs: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    apply = getattr(transform, "apply", None)
    return list(apply(inputs) if callable(apply) else transform(inputs))


def _same(served: Any, recomputed: Any, tolerance: float) -> bool:
    if is_null(served) or is_null(recomputed):
        return is_null(served) and is_null(recomputed)
    numeric = (int, float, np.integer, np.floating)
    if isinstance(served, numeric) and isinstance(recomputed, numeric) and not isinstance(served, bool):
        a, b = float(served), float(recomputed)
        return abs(a - b) <= tolerance * max(1.0, abs(a), abs(b))
    return category_key(served) == category_key(recomputed)


def parity_skew(baseline: Baseline, state: WindowState, thresholds: WindowThresholds,
                transform: Any) -> list[WindowResult]:
    """Share of sampled events whose served feature differs from the training transform's output.

    For each sample record with raw ``inputs``: recompute the features with
    `transform` and compare feature by feature with the served ones (numbers within
    a relative tolerance, categories by `category_key`, null only matches null).
    """
    return _parity_check(baseline, state, thresholds, transform)[0]


def _parity_check(baseline: Baseline, state: WindowState, thresholds: WindowThresholds,
                  transform: Any) -> tuple[list[WindowResult], ParityCheck]:
    records = [r for r in state.sample if isinstance(r.get("inputs"), Mapping) and isinstance(r.get("features"), Mapping)]
    details: dict[str, Any] = {"sampled": len(records)}
    if len(records) < thresholds.parity_min_sample:
        insufficient(details, f"{INSUFFICIENT_DATA_REASON}: {len(records)} sampled events with inputs "
                               f"< {thresholds.parity_min_sample}")
        return [WindowResult(SKEW, None, PARITY_MISMATCH_RATE, None, thresholds.parity_mismatch_rate, False,
                               details)], ParityCheck()
    try:
        recomputed = _apply(transform, [r["inputs"] for r in records])
        if len(recomputed) != len(records):
            raise ValueError(f"returned {len(recomputed)} records for {len(records)} inputs")
    except Exception as exc:  # a transform that cannot process served inputs is itself skew
        details["error"] = f"{type(exc).__name__}: {exc}"
        return [WindowResult(SKEW, None, PARITY_MISMATCH_RATE, 1.0, thresholds.parity_mismatch_rate, True,
                               details)], ParityCheck()
    parity = ParityCheck(served=[r["features"] for r in records], recomputed=recomputed)
    results = []
    tolerance = thresholds.parity_relative_tolerance
    for name in baseline.profiles:
        mismatches = []
        compared = 0
        for record, features in zip(records, recomputed):
            if name not in features and name not in record["features"]:
                continue
            compared += 1
            served, expected = record["features"].get(name), features.get(name)
            if not _same(served, expected, tolerance):
                mismatches.append({"request_id": record.get("request_id"), "served": served, "recomputed": expected})
        rate = len(mismatches) / compared if compared else 0.0
        feature_details: dict[str, Any] = {"compared": compared, "mismatches": len(mismatches),
                                           "examples": mismatches[:3]}
        breached = rate > thresholds.parity_mismatch_rate
        if compared < thresholds.parity_min_sample:
            insufficient(feature_details, f"{INSUFFICIENT_DATA_REASON}: {compared} compared < {thresholds.parity_min_sample}")
            breached = False
        else:
            parity.judged.add(name)
            if breached:
                parity.skewed.add(name)
        results.append(WindowResult(SKEW, name, PARITY_MISMATCH_RATE, rate, thresholds.parity_mismatch_rate,
                                      bool(breached), json_safe(feature_details)))
    return results, parity
