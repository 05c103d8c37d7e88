"""Evaluate each segment of a merged window: the window rule, one segment at a time, pure.

`evaluate_segments(baseline, state, spec, ...)` runs the families (`run_families`) on every evaluated
segment of every `[segments]` column (`WindowState.segment_states`: the `max_values`
largest values by events, the rest as "other") and returns the results with their
`segment` ("column=value"). A segment is compared with the same segment of the training
data (`Baseline.segment_baseline`), not with the whole population, and the segment column
is left out of its own segments. Where there is no such reference (a tag column, "other",
a value the training data lacked or pooled, a baseline computed without that column's
segments) drift is not judged; data quality, latency, estimated and realized quality still
are, against the whole baseline. Realized (model) quality counts the labels joined to the
segment's predictions (the collector keeps each prediction's segment values for the join),
against the segment's training labels where it has a reference; it is not pooled with
earlier windows as the whole population's is. A segment with estimates also gets its own
``estimation_invalid`` (its labels checked against its estimates, tested with the segment's earlier checks in
``estimate_history``, keyed by segment name), so the estimates of one segment can stop holding while the whole
population's still do. Skew and multivariate drift stay whole-population checks.
"""
from __future__ import annotations

import copy
from typing import Any, Mapping, Sequence

from driftline import defaults
from driftline.baseline import Baseline
from driftline.detectors.estimation.validity import WindowCheck
from driftline.detectors.families.estimated_quality import estimation_validity, own_check
from driftline.detectors.families.results import WindowResult
from driftline.detectors.thresholds.levels import LatencySLO, WindowThresholds
from driftline.detectors.families.run import run_families
from driftline.segments import SegmentSpec, segment_name
from driftline.vocabulary import DATA_DRIFT, DATA_QUALITY, ESTIMATED_QUALITY, LATENCY, MODEL_QUALITY, PREDICTION_DRIFT
from driftline.window_state import WindowState

__all__ = ["SEGMENT_FAMILIES", "evaluate_segments"]

# The families judged per segment (drift ones only where the segment has a reference).
SEGMENT_FAMILIES = (DATA_DRIFT, PREDICTION_DRIFT, DATA_QUALITY, LATENCY, MODEL_QUALITY, ESTIMATED_QUALITY)
_DRIFT = (DATA_DRIFT, PREDICTION_DRIFT)


def evaluate_segments(baseline: Baseline | None, state: WindowState, spec: SegmentSpec, *,
                      thresholds: WindowThresholds | None = None, slo: LatencySLO | None = None,
                      window_seconds: float | None = None,
                      estimate_history: Mapping[str, Sequence[WindowCheck]] | None = None) -> list[WindowResult]:
    """Every segment's results (module docstring); [] when `spec` names no column. `estimate_history`: per segment
    name, its earlier labelled windows' checks of their estimates, oldest first."""
    results: list[WindowResult] = []
    for column in spec.columns:
        for key, sub in state.segment_states(column, spec.max_values).items():
            reference = baseline.segment_baseline(column, key) if baseline is not None else None
            if reference is not None:
                sub = _without(sub, column)
                families: tuple[str, ...] = SEGMENT_FAMILIES
                judged_against = reference
            else:
                families = tuple(f for f in SEGMENT_FAMILIES if f not in _DRIFT)
                judged_against = baseline
            name = segment_name(column, key)
            found = run_families(judged_against, sub, thresholds=thresholds, slo=slo,
                                 window_seconds=window_seconds or defaults.WINDOW_SECONDS, families=families)
            if any(r.detector == ESTIMATED_QUALITY for r in found):
                own = thresholds or WindowThresholds()
                found.append(estimation_validity(own_check(judged_against, sub, own),
                                                 (estimate_history or {}).get(name, ()), own, sub.labels.n))
            for result in found:
                result.segment = name
                result.details.setdefault("segment_events", sub.events)
                if reference is None and baseline is not None:
                    result.details.setdefault("drift_not_judged", _why_no_reference(baseline, column, key))
                results.append(result)
    return results


def _without(state: WindowState, column: str) -> WindowState:
    """The sub-state without the segment column's feature (constant inside its own segments)."""
    if column not in state.features:
        return state
    out = copy.copy(state)
    out.features = {name: window for name, window in state.features.items() if name != column}
    return out


def _why_no_reference(baseline: Baseline, column: str, key: str) -> str:
    reference: Any = baseline.segments.get(column)
    if column not in baseline.profiles:
        return f"{column} is not a feature (a tag): the training data has no segments of it"
    if reference is None:
        return f"the baseline has no segments of {column} (computed before it was configured)"
    return "no training segment of this value (a value outside the training's largest, or new)"
