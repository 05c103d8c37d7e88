"""From summaries to the `driftline detect` JSON: `finish(plan, reference, windows, settings)`.

The reference's merged `BatchSummary` and each window's merged summary (see
`driftline.detectors.batch.summary`) become exactly the dict `driftline.detectors.batch.engine.detect`
returns for the same tables held in memory, with the same decision rule (`engine.judge_window`):

* **exact**, always: row counts, missing rates and their tests, categorical chi-square,
  Jensen-Shannon and PSI (counts of every category), numeric PSI (the reference's decile edges
  are among the fine bins' edges), numeric Jensen-Shannon for a column with at most
  ``defaults.JENSENSHANNON_MAX_DISTINCT_AS_CATEGORIES`` distinct reference values;
* **exact while a side keeps its values** (at most ``plan.exact_values`` finite values in the
  reference, and in the window): KS, Wasserstein and the other numeric Jensen-Shannon values, by
  the very functions the in-memory path runs (`two_sample.numeric_statistics_sorted`);
* otherwise from the fine bins (`driftline.detectors.stats.binned`, the streaming service's own
  functions): the KS statistic is the supremum at the fine edges, within ``ks.max_error`` =
  max over bins of min(reference share, window share) of the exact one (below it, never above);
  the normalised Wasserstein distance is within ``wasserstein.max_error`` = sum, over the bins
  where the two CDFs may cross, of bin width x the larger share / reference std; Jensen-Shannon
  is read on Sturges bins rebuilt from the fine bins (values spread evenly inside a fine bin).
  Those tests then carry ``"max_error"`` (KS, Wasserstein) or ``"approximate": true``
  (Jensen-Shannon and the registry's other binned statistics, on the same bins), so a reader knows; the
  in-memory JSON has neither key.
* ``multivariate``, ``performance`` (``--label``), ``segments`` (``--segment-by``) and
  reference-derived thresholds come from the row samples (``plan.sample_rows`` rows per side;
  a window or reference of at most that many rows is its own sample, so these equal the
  in-memory results too).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from driftline import defaults
from driftline.baseline import NumericProfile
from driftline.detectors.batch.engine import SCHEMA_VERSION, ColumnRoles, Judging, ReferenceProfile, Window, \
    WindowExtras, _map, judge_window, reference_tests
from driftline.detectors.batch.plan import Plan
from driftline.detectors.batch.summary import NUMERIC, BatchSummary, CategoricalSummary, NumericSummary
from driftline.detectors.stats import binned, registry, two_sample
from driftline.detectors.stats.noise import wasserstein_noise, wasserstein_noise_scale
from driftline.detectors.stats.multivariate import MultivariateThresholds
from driftline.detectors.thresholds.decision import DriftThresholds
from driftline.detectors.thresholds.levels import WindowThresholds
from driftline.vocabulary import JENSENSHANNON, KS, PSI, WASSERSTEIN
from driftline.window_state import FeatureWindow

__all__ = ["Settings", "WindowSummary", "Finisher", "finish", "measure_categorical", "measure_numeric"]

Measured = tuple[dict[str, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class WindowSummary:
    """One window of the current data: its position, its merged summary, and its bounds (ISO 8601, or None)."""

    index: int
    summary: BatchSummary
    start: str | None = None
    end: str | None = None


@dataclass(frozen=True)
class Settings:
    """How windows are judged: `engine.detect`'s options after `engine.monitored_columns` resolved them."""

    prediction: str | None = None  # the one prediction column (prediction drift), if any
    probabilities: tuple[str, ...] | None = None  # a multiclass model's probability columns (with `label`)
    label: str | None = None
    prediction_class: str | None = None  # a binary classifier's own decisions (with `label`)
    segment_by: str | None = None
    thresholds: DriftThresholds = DriftThresholds()
    performance_thresholds: WindowThresholds | None = None
    multivariate: MultivariateThresholds | bool = True
    workers: int = 1

    @classmethod
    def resolved(cls, columns: ColumnRoles, judging: Judging, prediction: str | None,
                 probabilities: Sequence[str] | None, workers: int) -> Settings:
        """The options, with the prediction and probability columns `engine.monitored_columns` resolved."""
        return cls(prediction=prediction, probabilities=tuple(probabilities) if probabilities else None,
                   label=columns.label, prediction_class=columns.prediction_class, segment_by=columns.segment_by,
                   thresholds=judging.thresholds or DriftThresholds(),
                   performance_thresholds=judging.performance_thresholds, multivariate=judging.multivariate,
                   workers=workers)

    def columns(self) -> ColumnRoles:
        """The resolved column roles (`prediction`: the one prediction column, None for class probabilities)."""
        return ColumnRoles(prediction=self.prediction, label=self.label, prediction_class=self.prediction_class,
                           segment_by=self.segment_by)


def _missing_test(reference_missing: int, reference_rows: int, missing: int, rows: int) -> dict[str, Any]:
    _, p_value = two_sample.missing_rate_test(reference_missing, reference_rows, missing, rows)
    return {"value": missing / rows if rows else 0.0,
            "reference": reference_missing / reference_rows if reference_rows else 0.0, "p_value": p_value}


def measure_categorical(reference: CategoricalSummary, current: CategoricalSummary) -> Measured:
    """chi-square, Jensen-Shannon and PSI over the reference's categories then the unseen ones (engine's order)."""
    categories = list(reference.counts)
    unseen = [key for key in current.counts if key not in reference.counts]
    reference_counts = np.array([*reference.counts.values(), *([0] * len(unseen))], dtype=np.int64)
    current_counts = np.array([current.counts.get(key, 0) for key in categories]
                              + [current.counts[key] for key in unseen], dtype=np.int64)
    return (binned.category_tests(reference_counts, current_counts),
            _missing_test(reference.missing, reference.rows, current.missing, current.rows))


def _profile(plan: Plan, name: str, reference: NumericSummary) -> NumericProfile:
    folded = reference.binned(plan, name)
    distinct = plan.distinct.get(name)
    return NumericProfile(edges=plan.edges[name], counts=folded.counts, sums=folded.sums,  # type: ignore[arg-type]
                          decile_edges=plan.deciles[name], count=folded.count, nulls=folded.missing, nonfinite=0,
                          min=folded.min if folded.count else None, max=folded.max if folded.count else None,
                          mean=folded.mean if folded.count else None, std=plan.reference_std[name],
                          distinct=distinct.size if distinct is not None else
                          defaults.JENSENSHANNON_MAX_DISTINCT_AS_CATEGORIES + 1)


def _window(plan: Plan, name: str, current: NumericSummary) -> FeatureWindow:
    folded = current.binned(plan, name)
    return FeatureWindow(kind=NUMERIC, count=folded.count, total=folded.mean * folded.count, min=folded.min,
                         max=folded.max, above_max=folded.above, counts=folded.counts, sums=folded.sums)


def _ks_max_error(profile: NumericProfile, window: FeatureWindow) -> float:
    n, m = int(profile.counts.sum()), int(window.counts.sum())  # type: ignore[union-attr]
    return float(np.minimum(profile.counts / n, window.counts / m).max(initial=0.0))  # type: ignore[operator]


def _wasserstein_max_error(profile: NumericProfile, window: FeatureWindow) -> float:
    """Sum over the bins where F - G may change sign (|F - G| at the bin's start <= its larger share) of width x share."""
    a, b = profile.counts / profile.counts.sum(), window.counts / window.counts.sum()  # type: ignore[union-attr,operator]
    low = min(profile.min if profile.min is not None else window.min, window.min)
    high = max(profile.max if profile.max is not None else window.max, window.max)
    knots = np.concatenate(([low], np.clip(profile.edges, low, high), [high]))
    widths = np.diff(knots)
    start = np.abs(np.concatenate(([0.0], np.cumsum(a)[:-1] - np.cumsum(b)[:-1])))
    share = np.maximum(a, b)
    crossing = start <= share
    return float((widths * share)[crossing].sum())


def measure_numeric(plan: Plan, name: str, reference: NumericSummary, current: NumericSummary,
                    reference_sorted: np.ndarray | None = None) -> Measured:
    """PSI, KS, Wasserstein and Jensen-Shannon of one numeric column (module docstring: what is exact)."""
    missing = _missing_test(reference.missing, reference.rows, current.missing, current.rows)
    if reference.exact and current.exact:
        if reference_sorted is None:
            reference_sorted = np.sort(reference.values)  # type: ignore[arg-type]
        current_sorted = current.values
        current_sorted.sort()  # type: ignore[union-attr]  # in place: the same multiset, no second copy
        measured = two_sample.numeric_statistics_sorted(
            reference_sorted, current_sorted, std=plan.reference_std[name],  # type: ignore[arg-type]
            psi_edges=plan.deciles[name], reference_psi_counts=two_sample.bin_counts(reference_sorted,
                                                                                   plan.deciles[name]))
        return ({PSI: {"value": measured[PSI]},
                 KS: {"statistic": measured["ks_statistic"], "p_value": measured["ks_p_value"]},
                 WASSERSTEIN: {"value": measured[WASSERSTEIN], "noise": wasserstein_noise(
                     wasserstein_noise_scale(reference_sorted, plan.reference_std[name]),  # type: ignore[arg-type]
                     current_sorted.size, reference_sorted.size)},  # type: ignore[union-attr]
                 JENSENSHANNON: {"value": measured[JENSENSHANNON]},
                 **registry.sorted_tests(reference_sorted, current_sorted)}, missing)  # type: ignore[arg-type]
    if reference.count == 0 or current.count == 0:
        return ({PSI: {"value": 0.0}, KS: {"statistic": 0.0, "p_value": 1.0}, WASSERSTEIN: {"value": 0.0},
                 JENSENSHANNON: {"value": 0.0}, **registry.binned_tests(None, None, NUMERIC)}, missing)
    profile, window = _profile(plan, name, reference), _window(plan, name, current)
    tests = binned.numeric_tests(profile, window)
    tests[KS]["max_error"] = _ks_max_error(profile, window)
    tests[WASSERSTEIN]["max_error"] = _wasserstein_max_error(profile, window) / plan.reference_std[name]
    distinct = plan.distinct.get(name)
    folded_reference, folded_current = reference.binned(plan, name), current.binned(plan, name)
    if distinct is not None and folded_reference.at_distinct is not None and folded_current.at_distinct is not None:
        # value by value, as in memory: values the reference lacks share one bin (their terms are linear in it)
        a, b = folded_reference.at_distinct, folded_current.at_distinct
        tests[JENSENSHANNON] = {"value": two_sample.jensenshannon(a, b)}
        tests.update(registry.binned_tests(a, b, NUMERIC))
        if a[-1] == 0 and b[-1] == 0:  # both sides on the reference's few values: both CDFs known exactly
            gaps = np.cumsum(a[:-1])[:-1] / a.sum() - np.cumsum(b[:-1])[:-1] / b.sum()
            statistic = float(np.abs(gaps).max(initial=0.0))
            tests[KS] = {"statistic": statistic, "p_value": two_sample.ks_p_value(statistic, int(a.sum()),
                                                                                   int(b.sum())), "max_error": 0.0}
            tests[WASSERSTEIN] = {"value": float((np.abs(gaps) * np.diff(distinct)).sum()) / plan.reference_std[name],
                                  "noise": tests[WASSERSTEIN]["noise"], "max_error": 0.0}
    else:
        for key in (JENSENSHANNON, *registry.binned_tests(None, None, NUMERIC)):  # read on rebuilt Sturges bins
            tests[key]["approximate"] = True
    return tests, missing


class Finisher:
    """The reference side, prepared once; `window` judges one window (engines may call it as windows complete)."""

    def __init__(self, plan: Plan, reference: BatchSummary, settings: Settings):
        self.plan = plan
        self.reference = reference
        self.settings = settings
        self._sorted: dict[str, np.ndarray] = {}
        sample = reference.sample_frame()
        profile: list[ReferenceProfile] = []

        def measure(name: str, values: pd.Series) -> dict[str, dict[str, Any]]:
            if not profile:  # reference-derived thresholds only: chunks of the reference's sample
                profile.append(ReferenceProfile(sample, plan.kinds))
            return reference_tests(profile[0], name, values)

        self.extras = WindowExtras(sample, sample.iloc[0:0], plan.kinds,
                                   list(settings.probabilities) if settings.probabilities else None,
                                   settings.columns(), Judging(settings.thresholds, settings.performance_thresholds,
                                                               settings.multivariate), settings.workers, measure)

    def _reference_sorted(self, name: str) -> np.ndarray | None:
        column = self.reference.columns[name]
        if not isinstance(column, NumericSummary) or not column.exact:
            return None
        if name not in self._sorted:
            values = column.values
            values.sort()  # type: ignore[union-attr]  # in place: the same multiset, no second copy
            self._sorted[name] = values  # type: ignore[assignment]
        return self._sorted[name]

    def measure(self, name: str, current: NumericSummary | CategoricalSummary) -> Measured:
        reference = self.reference.columns[name]
        if isinstance(reference, NumericSummary):
            assert isinstance(current, NumericSummary)
            return measure_numeric(self.plan, name, reference, current, self._reference_sorted(name))
        assert isinstance(current, CategoricalSummary)
        return measure_categorical(reference, current)

    def window(self, window: WindowSummary) -> dict[str, Any]:
        """One window's entry of ``windows`` in the `detect` JSON."""
        prediction = self.settings.prediction
        summary = window.summary
        names = [name for name in self.plan.kinds if name != prediction]
        # threads: numpy's sorts release the GIL, so features measure in parallel (as engine.detect_window)
        measured = dict(zip(names, _map(lambda name: self.measure(name, summary.columns[name]), names,
                                        self.settings.workers)))
        prediction_measured = None if prediction is None else self.measure(prediction, summary.columns[prediction])
        thresholds = self.extras.thresholds_for(summary.rows)
        result = {"index": window.index, "rows": int(summary.rows), "start": window.start, "end": window.end,
                  **judge_window(self.plan.kinds, measured, prediction_measured, prediction,
                                 min(summary.rows, self.reference.rows), thresholds)}
        self.extras.complete(result, Window(window.index, summary.sample_frame(), window.start, window.end),
                             summary.rows)
        return result


def finish(plan: Plan, reference: BatchSummary, windows: Iterable[WindowSummary],
           settings: Settings) -> dict[str, Any]:
    """The `driftline detect` JSON (as a dict) from the reference's and the windows' merged summaries.

    `plan`: the run's plan (`Plan.with_reference`); `windows` in index order.
    """
    finisher = Finisher(plan, reference, settings)
    return {"schema_version": SCHEMA_VERSION, "reference_rows": int(reference.rows),
            "windows": [finisher.window(window) for window in windows]}
