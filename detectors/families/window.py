"""Evaluate one merged window: every detector family, its segments and its status, pure.

`evaluate_window(baseline, state, ...)` returns a `WindowOutcome`:

* ``results``: the `WindowResult`s of every family (`driftline.detectors.families.run.run_families`: drift,
  data quality, skew, latency, realized and estimated quality, multivariate and embedding drift), then of
  every segment of the ``segments`` spec (`driftline.detectors.families.segments.evaluate_segments`);
* ``status``: ``no_baseline`` (a version not registered yet: only latency is judged), ``insufficient_data``
  (the window's data drift had too little data) or ``ok``;
* ``breached``: ``"detector:feature"`` (or the detector alone) of the whole population's breached results,
  sorted; ``segments_breached``: ``"segment:detector"`` of the segments' breached results, sorted;
* ``threshold_note``: why ``[drift] thresholds = "reference"`` fell back to the fixed thresholds, if it did.

Realized quality pools labels: a window with some labels but fewer than ``quality_pool_min_labels`` is judged
on its labels merged with the earlier windows' in ``pooled_labels`` (`PooledLabels`, which the caller read),
and its model-quality results say so (``window_labels``, ``pooled_windows``, ``pooled_labels``). The input
state is left as it was. A window with estimates also gets ``estimated_quality``'s ``estimation_invalid`` result:
its own labels (never the pool) checked against its estimates, tested with the earlier labelled windows'
checks in ``estimate_history`` (`estimation_validity`, which the caller read). Nothing here does I/O.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from driftline import vocabulary
from driftline.baseline import Baseline
from driftline.detectors.estimation.validity import WindowCheck
from driftline.detectors.families.estimated_quality import estimation_validity, own_check
from driftline.detectors.families.pooled_labels import PooledLabels, pooling_wanted
from driftline.detectors.families.results import WindowResult
from driftline.detectors.families.run import FAMILIES, run_families
from driftline.detectors.families.segments import evaluate_segments
from driftline.detectors.thresholds.decision import DriftThresholds
from driftline.detectors.thresholds.freshness import FreshnessThresholds
from driftline.detectors.thresholds.levels import LatencySLO, WindowThresholds
from driftline.segments import SegmentSpec
from driftline.window_state import WindowState

# The thresholds and result types are part of evaluate_window's signature, so they are importable here too.
__all__ = ["FAMILIES", "LatencySLO", "PooledLabels", "WindowOutcome", "WindowResult", "WindowThresholds",
           "evaluate_window"]


@dataclass(frozen=True)
class WindowOutcome:
    """One window's evaluation: its status, every result (whole population, then segments) and their summary."""

    status: str  # one of vocabulary.WINDOW_STATUSES
    results: tuple[WindowResult, ...]
    breached: tuple[str, ...] = ()
    segments_breached: tuple[str, ...] = ()
    threshold_note: str | None = None


def evaluate_window(baseline: Baseline | None, state: WindowState, *,
                    thresholds: WindowThresholds | DriftThresholds | None = None,
                    slo: LatencySLO | None = None,
                    transform: Callable[[list[Mapping[str, Any]]], list[Mapping[str, Any]]] | Any | None = None,
                    window_seconds: float | None = None,
                    families: Iterable[str] = FAMILIES,
                    freshness: FreshnessThresholds | None = None,
                    segments: SegmentSpec = SegmentSpec(),
                    pooled_labels: PooledLabels = PooledLabels(),
                    estimate_history: Sequence[WindowCheck] = (),
                    segment_estimate_history: Mapping[str, Sequence[WindowCheck]] | None = None) -> WindowOutcome:
    """The window's outcome (module docstring); the arguments before `segments` are `run_families`'.

    `segments`: the ``[segments]`` columns judged segment by segment (none by default).
    `pooled_labels`: the earlier windows' labels, pooled when this window has too few of its own.
    `estimate_history`: the earlier labelled windows' checks of their estimates, oldest first;
    `segment_estimate_history`: the same per segment name.
    """
    if isinstance(thresholds, DriftThresholds):
        thresholds = WindowThresholds(drift=thresholds)
    thresholds = thresholds or WindowThresholds()
    window_labels = state.labels.n
    own = state  # its own labels: the estimates are checked on these, never on a pool
    pooled_windows = 0
    if baseline is not None and pooling_wanted(state.labels, thresholds.quality_pool_min_labels):
        labels, pooled_windows = pooled_labels.pool(state.labels, thresholds.quality_pool_min_labels)
        if pooled_windows:
            state = copy.copy(state)  # the caller's state keeps its own labels
            state.labels = labels
    results = run_families(baseline, state, thresholds=thresholds, slo=slo, transform=transform,
                           window_seconds=window_seconds, families=families, freshness=freshness)
    if pooled_windows:
        for result in results:
            if result.detector == vocabulary.MODEL_QUALITY:
                result.details.update(window_labels=window_labels, pooled_windows=pooled_windows,
                                      pooled_labels=state.labels.n)
    if any(r.detector == vocabulary.ESTIMATED_QUALITY and not r.segment for r in results):
        results.append(estimation_validity(own_check(baseline, own, thresholds), estimate_history, thresholds,
                                           own.labels.n))
    note = next((r.details[vocabulary.THRESHOLD_NOTE_KEY] for r in results
                 if r.details and vocabulary.THRESHOLD_NOTE_KEY in r.details), None)
    results += evaluate_segments(baseline, state, segments, thresholds=thresholds, slo=slo,
                                 window_seconds=window_seconds, estimate_history=segment_estimate_history)
    return WindowOutcome(
        status=window_status(baseline, results), results=tuple(results),
        breached=tuple(sorted({f"{r.detector}:{r.feature}" if r.feature else r.detector
                               for r in results if r.breached and not r.segment})),
        segments_breached=tuple(sorted({f"{r.segment}:{r.detector}" for r in results if r.breached and r.segment})),
        threshold_note=note)


def window_status(baseline: Baseline | None, results: Iterable[WindowResult]) -> str:
    """``no_baseline`` without a baseline, ``insufficient_data`` when the window's data drift had too little data,
    else ``ok``."""
    if baseline is None:
        return vocabulary.WINDOW_NO_BASELINE
    if any(r.insufficient_data for r in results if r.detector == vocabulary.DATA_DRIFT and not r.segment):
        return vocabulary.WINDOW_INSUFFICIENT_DATA
    return vocabulary.WINDOW_OK
