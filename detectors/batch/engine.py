"""Batch drift detection: a reference DataFrame and a current DataFrame in, the result documented in docs/detectors.md out.

Pure (no files, no printing): `driftline.commands.detect` reads the files and
writes the JSON/HTML; this module validates columns, splits the current data
into windows, computes every statistic of every feature and applies the
decision rule of `driftline.detectors.thresholds.decision`.

The reference is profiled once (`ReferenceProfile`: sorted values, standard
deviation, decile bins, category counts), so each window costs one sort per
numeric feature plus linear work. Multivariate drift (`driftline.detectors.families.multivariate`)
fits its PCA and encodes its bounded reference sample once too; per window it adds
one projection of the window's rows and a cross-validated classifier on at most
`defaults.DOMAIN_CLASSIFIER_MAX_ROWS` rows per side.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pandas as pd

from driftline.detectors.stats import binned, registry, two_sample
from driftline.detectors.stats.noise import wasserstein_noise, wasserstein_noise_scale
from driftline.detectors.stats.multivariate import MultivariateThresholds
from driftline.detectors.batch.multivariate import BatchReference, batch_multivariate
from driftline.detectors.batch.windowing import iso_time, parse_timestamps
from driftline.detectors.thresholds.decision import DriftThresholds, correct_window, decide_dataset, judge_feature
from driftline.detectors.batch.performance import (EstimateChecks, check_decision, check_label, for_segment,
                                                    performance_reference, window_performance)
from driftline.detectors.thresholds.levels import WindowThresholds
from driftline.detectors.thresholds.reference import FIXED as FIXED_SOURCE
from driftline.detectors.thresholds.reference import REFERENCE as REFERENCE_SOURCE
from driftline.detectors.thresholds.reference import ReferenceThresholds
from driftline.errors import UserError
from driftline.vocabulary import (CATEGORICAL, DATASET_DRIFT, JENSENSHANNON, KS, MISSING_RATE, NUMERIC, PSI,
                                  WASSERSTEIN)

__all__ = [
    "SCHEMA_VERSION",
    "ColumnRoles",
    "Judging",
    "ReferenceProfile",
    "Window",
    "Windowing",
    "default_workers",
    "detect",
    "detect_window",
    "feature_kinds",
    "iter_features",
    "judge_window",
    "period_offset",
    "monitored_columns",
    "WindowExtras",
    "reference_tests",
    "split_windows",
]

SCHEMA_VERSION = 1


# --- options ----------------------------------------------------------------------

@dataclass(frozen=True)
class ColumnRoles:
    """What the named columns of both tables are (``--categorical``, ``--prediction``, ``--ignore``, ...).

    `prediction`: the score or prediction column, or ``"p_a,p_b,..."`` one probability column per class
    (with `label`); `label`: the true outcome (performance); `prediction_class` (with `label`): the
    model's own decisions (0/1); `segment_by`: the column whose values are judged apart.
    """

    categorical: Sequence[str] = ()
    prediction: str | None = None
    ignore: Sequence[str] = ()
    timestamp: str | None = None
    label: str | None = None
    prediction_class: str | None = None
    segment_by: str | None = None


@dataclass(frozen=True)
class Windowing:
    """How the current data is cut into windows: every `chunk_size` rows, or per `chunk_period` of the timestamp."""

    chunk_size: int | None = None
    chunk_period: str | None = None


@dataclass(frozen=True)
class Judging:
    """What windows are judged by: drift `thresholds` (None: the defaults), `performance_thresholds`, and the
    `multivariate` detectors' levels (True: the defaults; False: no ``multivariate`` object)."""

    thresholds: DriftThresholds | None = None
    performance_thresholds: WindowThresholds | None = None
    multivariate: MultivariateThresholds | bool = True

    def resolved(self) -> "Judging":
        """The same, with the default drift thresholds filled in."""
        return self if self.thresholds is not None else replace(self, thresholds=DriftThresholds())


# --- columns and kinds ------------------------------------------------------------

def _family(series: pd.Series) -> str:
    """What the non-null values of a column are: numeric, boolean, datetime, text, or empty."""
    if not series.notna().any():
        return "empty"
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return "boolean"
    if pd.api.types.is_datetime64_any_dtype(dtype) or pd.api.types.is_timedelta64_dtype(dtype):
        return "datetime"
    if pd.api.types.is_numeric_dtype(dtype):
        return "numeric"
    if isinstance(dtype, pd.CategoricalDtype):
        return _family(pd.Series(dtype.categories))
    inferred = pd.api.types.infer_dtype(series, skipna=True)
    if inferred == "boolean":
        return "boolean"
    if inferred in ("integer", "floating", "mixed-integer-float", "decimal"):
        return "numeric"
    if inferred in ("datetime", "datetime64", "date", "timedelta"):
        return "datetime"
    return "text"


def _categorical_dtype(series: pd.Series) -> bool:
    """object, string, category and bool columns are categorical unless told otherwise."""
    dtype = series.dtype
    return (isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_bool_dtype(dtype)
            or pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype))


def _check_names(names: Sequence[str], columns: pd.Index, option: str, where: str) -> None:
    unknown = [name for name in names if name not in columns]
    if unknown:
        raise UserError(f"{option}: column(s) {', '.join(unknown)} not in the {where} "
                        f"(columns: {', '.join(map(str, columns))})")


def feature_kinds(reference: pd.DataFrame, current: pd.DataFrame, *, categorical: Sequence[str] = (),
                  ignore: Sequence[str] = (), prediction: str | None = None,
                  timestamp: str | None = None, features_optional: bool = False) -> dict[str, str]:
    """Each monitored column of `reference` with its kind, ``"numeric"`` or ``"categorical"``.

    Monitored: every reference column except `ignore`, `timestamp` and
    `prediction` (which is returned too, under its own name, for prediction
    drift). Kind: categorical when named in `categorical`, else inferred from the
    reference dtype (object, string, category and bool are categorical).
    Raises `UserError` for unknown names, columns missing from `current`,
    date/time columns that are neither ignored nor the timestamp, and type
    mismatches between the two frames; and when no feature is left, unless `features_optional` (the tables hold
    embeddings, judged on their own).
    """
    _check_names(ignore, reference.columns, "--ignore", "reference")
    _check_names(categorical, reference.columns, "--categorical", "reference")
    if prediction is not None:
        _check_names([prediction], reference.columns, "--prediction", "reference")
        _check_names([prediction], current.columns, "--prediction", "current data")
        if prediction in ignore:
            raise UserError(f"--prediction {prediction} is also in --ignore; drop it from one of them")
    if timestamp is not None:
        _check_names([timestamp], current.columns, "--timestamp", "current data")
    skipped = set(ignore) | ({timestamp} if timestamp else set())
    monitored = [c for c in reference.columns if c not in skipped]
    missing = [c for c in monitored if c not in current.columns]
    if missing:
        raise UserError(f"column(s) {', '.join(map(str, missing))} of the reference are missing from the current "
                        f"data; add them or pass --ignore {','.join(map(str, missing))}")
    if not features_optional and not [c for c in monitored if c != prediction]:
        raise UserError("no feature columns left to compare (check --ignore, --prediction and --timestamp)")
    kinds: dict[str, str] = {}
    for column in monitored:
        reference_family = _family(reference[column])
        current_family = _family(current[column])
        if reference_family == "datetime":
            raise UserError(f"column {column} holds dates/times; pass it to --ignore (or to --timestamp for chunking)")
        kind = CATEGORICAL if (column in categorical or _categorical_dtype(reference[column])
                               or reference_family in ("text", "boolean")) else NUMERIC
        compatible = (current_family == "empty" or reference_family == "empty"
                      or current_family == reference_family)
        if not compatible:
            raise UserError(f"column {column} has {reference_family} values in the reference but "
                            f"{current_family} values in the current data")
        kinds[column] = kind
    return kinds


# --- windows ---------------------------------------------------------------------

@dataclass(frozen=True)
class Window:
    """One slice of the current data; `start`/`end` are ISO 8601 strings when there are timestamps."""

    index: int
    frame: pd.DataFrame
    start: str | None = None
    end: str | None = None


def period_offset(chunk_size: int | None, chunk_period: str | None, timestamp: str | None) -> pd.DateOffset | None:
    """The checked chunking options: `chunk_period` as a pandas offset (None without one); `UserError` if wrong."""
    if chunk_size is not None and chunk_period is not None:
        raise UserError("use either --chunk-size or --chunk-period, not both")
    if chunk_size is not None and chunk_size < 1:
        raise UserError(f"--chunk-size must be at least 1, got {chunk_size}")
    if chunk_period is not None and timestamp is None:
        raise UserError("--chunk-period needs --timestamp COLUMN to know each row's time")
    if chunk_period is None:
        return None
    try:
        offset = pd.tseries.frequencies.to_offset(chunk_period)
    except (ValueError, TypeError):
        offset = None
    if offset is None or not isinstance(offset, pd.DateOffset) or getattr(offset, "n", 0) <= 0:
        raise UserError(f"--chunk-period {chunk_period!r} is not a period; use e.g. 1D, 6h, 15min or 1W")
    return offset


def split_windows(current: pd.DataFrame, *, chunk_size: int | None = None, chunk_period: str | None = None,
                  timestamp: str | None = None) -> list[Window]:
    """The current data as windows: one (no chunking), every `chunk_size` rows, or per `chunk_period` of `timestamp`.

    `chunk_period` is a pandas offset alias (``1D``, ``6h``, ``15min``, ``1W``);
    periods without rows are skipped. With a `timestamp`, each window's
    start/end are its period's bounds (or, without a period, its first and last
    timestamps).
    """
    offset = period_offset(chunk_size, chunk_period, timestamp)
    times = parse_timestamps(current[timestamp], timestamp) if timestamp is not None else None

    if offset is not None:
        assert times is not None
        windows: list[Window] = []
        keyed = current.assign(__driftline_period=times.dt.tz_localize(None))
        for start, group in keyed.groupby(pd.Grouper(key="__driftline_period", freq=offset), sort=True):
            if len(group) == 0:
                continue
            start = pd.Timestamp(start).tz_localize("UTC")
            windows.append(Window(len(windows), group.drop(columns="__driftline_period"),
                                  iso_time(start), iso_time(start + offset)))
        return windows

    size = chunk_size or max(len(current), 1)
    windows = []
    for index, begin in enumerate(range(0, max(len(current), 1), size)):
        frame = current.iloc[begin:begin + size]
        start = end = None
        if times is not None and len(frame):
            window_times = times.iloc[begin:begin + size]
            start, end = iso_time(window_times.min()), iso_time(window_times.max())
        windows.append(Window(index, frame, start, end))
    return windows


# --- reference profile and per-feature tests --------------------------------------

@dataclass(frozen=True)
class _NumericReference:
    rows: int
    missing: int
    values_sorted: np.ndarray
    std: float
    psi_edges: np.ndarray
    psi_counts: np.ndarray
    noise_scale: float = 0.0  # `noise.wasserstein_noise_scale`: the Wasserstein distance's sampling level


@dataclass(frozen=True)
class _CategoricalReference:
    rows: int
    missing: int
    categories: pd.Index
    counts: np.ndarray

    def aligned_counts(self, present: pd.Series) -> tuple[np.ndarray, np.ndarray]:
        """(reference counts, current counts) over the reference's categories, then the unseen ones."""
        current = present.value_counts(sort=False)
        position = self.categories.get_indexer(current.index)
        seen = position >= 0
        current_counts = np.zeros(len(self.categories), dtype=np.int64)
        current_counts[position[seen]] = current.to_numpy()[seen]
        unseen = current.to_numpy()[~seen].astype(np.int64)
        return (np.concatenate((self.counts, np.zeros(unseen.size, dtype=np.int64))),
                np.concatenate((current_counts, unseen)))


def _numeric_values(series: pd.Series) -> np.ndarray:
    return series.to_numpy(dtype=np.float64, na_value=np.nan)


def _profile_column(series: pd.Series, kind: str) -> _NumericReference | _CategoricalReference:
    if kind == NUMERIC:
        raw = _numeric_values(series)
        values = np.sort(two_sample.clean_numeric(raw))
        edges = two_sample.decile_edges(values)
        std = two_sample.reference_std(values)
        return _NumericReference(rows=len(raw), missing=len(raw) - values.size, values_sorted=values,
                                 std=std, psi_edges=edges, psi_counts=two_sample.bin_counts(values, edges),
                                 noise_scale=wasserstein_noise_scale(values, std))
    present = series.dropna()
    counts = present.value_counts(sort=False)
    return _CategoricalReference(rows=len(series), missing=len(series) - len(present), categories=counts.index,
                                 counts=counts.to_numpy().astype(np.int64))


def default_workers() -> int:
    """Threads for per-feature work: numpy's sorts and searches release the GIL, so features run in parallel."""
    return max(1, min(8, os.cpu_count() or 1))


def _map(function: Callable[[str], Any], names: list[str], workers: int) -> list[Any]:
    if workers <= 1 or len(names) <= 1:
        return [function(name) for name in names]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(function, names))


class ReferenceProfile:
    """Everything a window needs from the reference, computed once: per column sorted values or category data."""

    def __init__(self, reference: pd.DataFrame, kinds: dict[str, str], workers: int = 1):
        self.rows = len(reference)
        self.kinds = dict(kinds)
        names = list(kinds)
        profiles = _map(lambda name: _profile_column(reference[name], kinds[name]), names, workers)
        self.columns: dict[str, _NumericReference | _CategoricalReference] = dict(zip(names, profiles))


def reference_tests(profile: ReferenceProfile, name: str, values: pd.Series) -> dict[str, dict[str, Any]]:
    """Column `name`'s drift tests of `values` (any rows, e.g. a chunk of the reference) against the profile."""
    return _feature_tests(profile.columns[name], values, profile.kinds[name])[0]


def _feature_tests(reference: _NumericReference | _CategoricalReference, series: pd.Series,
                   kind: str) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The contract's tests for one feature, and its missing-rate test (values only, no flags yet)."""
    rows = len(series)
    if kind == NUMERIC:
        assert isinstance(reference, _NumericReference)
        raw = _numeric_values(series)
        values = np.sort(two_sample.clean_numeric(raw))
        missing = rows - values.size
        measured = two_sample.numeric_statistics_sorted(reference.values_sorted, values, std=reference.std,
                                                   psi_edges=reference.psi_edges,
                                                   reference_psi_counts=reference.psi_counts)
        tests: dict[str, dict[str, Any]] = {
            PSI: {"value": measured[PSI]},
            KS: {"statistic": measured["ks_statistic"], "p_value": measured["ks_p_value"]},
            WASSERSTEIN: {"value": measured[WASSERSTEIN],
                          "noise": wasserstein_noise(reference.noise_scale, values.size, reference.values_sorted.size)},
            JENSENSHANNON: {"value": measured[JENSENSHANNON]},
            **registry.sorted_tests(reference.values_sorted, values),
        }
    else:
        assert isinstance(reference, _CategoricalReference)
        present = series.dropna()
        missing = rows - len(present)
        tests = binned.category_tests(*reference.aligned_counts(present))
    change, p_missing = two_sample.missing_rate_test(reference.missing, reference.rows, missing, rows)
    missing_test = {
        "value": missing / rows if rows else 0.0,
        "reference": reference.missing / reference.rows if reference.rows else 0.0,
        "p_value": p_missing,
    }
    return tests, missing_test


def _feature_result(name: str, kind: str, tests: dict[str, dict[str, Any]], missing: dict[str, Any], rows: int,
                    thresholds: DriftThresholds) -> dict[str, Any]:
    drift, reason = judge_feature(tests, kind, rows, thresholds.for_feature(name), missing)
    return {"name": name, "kind": kind, MISSING_RATE: missing["value"], "drift": drift, "reason": reason,
            "tests": tests, "missing": missing}


def judge_window(kinds: dict[str, str], measured: dict[str, tuple[dict[str, dict[str, Any]], dict[str, Any]]],
                 prediction_measured: tuple[dict[str, dict[str, Any]], dict[str, Any]] | None,
                 prediction: str | None, rows: int, thresholds: DriftThresholds) -> dict[str, Any]:
    """A window's verdicts from its measured tests: ``features``, ``prediction``, ``drifted_features``, dataset drift.

    `measured`: feature -> (tests, missing-rate test) as `_feature_tests` (or the bounded-memory
    `driftline.detectors.batch.finish`) measures them; `rows`: the smaller side's rows. p-values are
    corrected by Benjamini-Hochberg across the window's features and its prediction (every verdict
    of the window is one hypothesis of one family), in two families: the distribution tests
    (KS/chi-square) and the missing-rate tests.
    """
    names = [c for c in kinds if c != prediction]
    family = {**{n: measured[n] for n in names},
              **({prediction: prediction_measured} if prediction is not None and prediction_measured is not None else {})}
    correct_window(family, kinds, thresholds.for_feature, thresholds.alpha)

    features = [_feature_result(name, kinds[name], *measured[name], rows, thresholds) for name in names]
    drifted = [f["name"] for f in features if f["drift"]]

    prediction_result = None
    if prediction is not None and prediction_measured is not None:
        kind = kinds[prediction]
        result = _feature_result(prediction, kind, *prediction_measured, rows, thresholds)
        prediction_result = {"name": prediction, "kind": kind, MISSING_RATE: result[MISSING_RATE],
                             "drift": result["drift"], "reason": result["reason"], "tests": result["tests"],
                             "missing": result["missing"]}
    return {"features": features, "prediction": prediction_result, "drifted_features": drifted,
            DATASET_DRIFT: decide_dataset(len(drifted), len(features), thresholds)}


def detect_window(profile: ReferenceProfile, window: Window, prediction: str | None,
                  thresholds: DriftThresholds, workers: int = 1, multivariate: BatchReference | None = None,
                  multivariate_thresholds: MultivariateThresholds | None = None) -> dict[str, Any]:
    """One window's result: every feature's tests and verdict, prediction drift, dataset drift,
    and, given the `multivariate` reference, multivariate drift.

    p-values are corrected by Benjamini-Hochberg across the window's features and
    prediction, in two families: the distribution tests (KS/chi-square) and the
    missing-rate tests (`judge_window`).
    """
    names = [c for c in profile.kinds if c != prediction]
    measured = dict(zip(names, _map(
        lambda name: _feature_tests(profile.columns[name], window.frame[name], profile.kinds[name]), names, workers)))
    prediction_measured = None if prediction is None else _feature_tests(
        profile.columns[prediction], window.frame[prediction], profile.kinds[prediction])
    result = {"index": window.index, "rows": int(len(window.frame)), "start": window.start, "end": window.end,
              **judge_window(profile.kinds, measured, prediction_measured, prediction,
                             min(len(window.frame), profile.rows), thresholds)}
    if multivariate is not None:
        result["multivariate"] = batch_multivariate(multivariate, window.frame, multivariate_thresholds)
    return result


def detect(reference: pd.DataFrame, current: pd.DataFrame, *, columns: ColumnRoles = ColumnRoles(),
           windowing: Windowing = Windowing(), judging: Judging = Judging(),
           on_window: Callable[[int, int, int], None] | None = None, workers: int | None = None,
           embeddings: Any = None) -> dict[str, Any]:
    """Compare `current` (whole, or in windows) with `reference`; the `driftline detect` JSON as a dict.

    `on_window(done, total, rows)` is called after each window (for progress).
    `workers` threads share the per-feature work (default: `default_workers()`;
    results do not depend on it). `columns` (`ColumnRoles`): with a `label` (a column of the reference,
    needs the `prediction` score, the class probabilities, or a regression model's predicted value),
    each window gains ``performance`` (`driftline.detectors.batch.performance`), judged by
    ``judging.performance_thresholds``; `segment_by` adds each window's ``segments``
    (`driftline.detectors.batch.segments`); `prediction_class` (with `label`): the column of the model's own
    decisions (0/1), which the binary estimates follow instead of a threshold on the score.
    ``judging.thresholds.threshold_source == "reference"`` derives effect-size thresholds from the reference
    (`driftline.detectors.thresholds.reference`). ``judging.multivariate``: the multivariate detectors' alarm
    levels and sample bounds (True: `driftline.defaults`; False: no ``multivariate``
    object, for callers that need only the per-feature verdicts and not its cost). `embeddings`: a
    `driftline.detectors.batch.embeddings.BatchEmbeddings` of the current rows in order; each window
    gains ``embeddings`` (name -> verdict).
    Raises `UserError` for anything wrong with the inputs (empty frames,
    unknown or missing columns, type mismatches, bad chunking options).
    """
    judging = judging.resolved()
    if len(reference) == 0:
        raise UserError("the reference has no rows")
    if len(current) == 0:
        raise UserError("the current data has no rows")
    kinds, prediction, probabilities = monitored_columns(reference, current, columns,
                                                         features_optional=embeddings is not None)
    if embeddings is not None:
        current = current.reset_index(drop=True)  # a window's index labels are then its rows' positions
    windows = split_windows(current, chunk_size=windowing.chunk_size, chunk_period=windowing.chunk_period,
                            timestamp=columns.timestamp)
    workers = default_workers() if workers is None else workers
    profile = ReferenceProfile(reference, kinds, workers)
    extras = WindowExtras(reference, current, kinds, probabilities, replace(columns, prediction=prediction),
                          judging, workers, lambda name, values: reference_tests(profile, name, values))
    results = []
    for done, window in enumerate(windows, start=1):
        own = extras.thresholds_for(len(window.frame))
        result = detect_window(profile, window, prediction, own, workers)
        extras.complete(result, window, len(window.frame))
        if embeddings is not None:
            result["embeddings"] = embeddings.window(window.frame.index.to_numpy())
        results.append(result)
        if on_window is not None:
            on_window(done, len(windows), len(window.frame))
    return {"schema_version": SCHEMA_VERSION, "reference_rows": int(len(reference)), "windows": results}


def monitored_columns(reference: pd.DataFrame, current: pd.DataFrame, columns: ColumnRoles, *,
                      features_optional: bool = False) -> tuple[dict[str, str], str | None, list[str] | None]:
    """(kinds of the monitored columns, the one prediction column or None, a multiclass model's probability columns).

    `feature_kinds` after `detect`'s rules for ``--label``: the label is the target, not a feature;
    ``--prediction p_a,p_b`` (class probabilities, needs the label) is judged by the estimate, not as
    features or one prediction. Frames may be the first rows of each table (bounded-memory runs).
    """
    prediction, ignore, label, prediction_class = columns.prediction, columns.ignore, columns.label, \
        columns.prediction_class
    probabilities = None
    if prediction is not None and "," in prediction:
        probabilities = [name.strip() for name in prediction.split(",") if name.strip()]
        if label is None:
            raise UserError("several --prediction columns (class probabilities) need --label; "
                            "name one column for prediction drift")
        for name in [*probabilities, label]:
            if name not in reference.columns:
                raise UserError(f"--prediction/--label: column {name} not in the reference "
                                f"(columns: {', '.join(map(str, reference.columns))})")
        ignore, prediction = [*ignore, *[c for c in probabilities if c not in ignore]], None
    if label is not None:
        if probabilities is None:
            check_label(reference, prediction, label)  # before the label joins --ignore, whose errors would mislead
        ignore = [*ignore, label] if label not in ignore else ignore
    if prediction_class is not None:  # the model's decisions: what the estimates follow, not a feature
        check_decision(reference, prediction_class, label, probabilities)
        ignore = [*ignore, prediction_class] if prediction_class not in ignore else ignore
    kinds = feature_kinds(reference, current, categorical=columns.categorical, ignore=ignore, prediction=prediction,
                          timestamp=columns.timestamp, features_optional=features_optional)
    return kinds, prediction, probabilities


class WindowExtras:
    """What a window gets beyond its per-feature tests: threshold source, ``segments``, ``performance``, ``multivariate``.

    Built from reference rows (the whole reference in memory, or a bounded sample of it in a
    bounded-memory run); `complete` adds them to a window's result from the window's rows (or a
    sample of them) and its true row count.
    """

    def __init__(self, reference: pd.DataFrame, current: pd.DataFrame, kinds: dict[str, str],
                 probabilities: list[str] | None, columns: ColumnRoles, judging: Judging, workers: int,
                 measure: Callable[[str, pd.Series], dict[str, dict[str, Any]]]):
        """`columns.prediction`: the one prediction column `monitored_columns` resolved (None for class
        probabilities); `judging.thresholds` set (`Judging.resolved`)."""
        prediction, label = columns.prediction, columns.label
        thresholds = judging.thresholds
        assert thresholds is not None
        multivariate = judging.multivariate
        self.prediction = prediction
        self.thresholds = thresholds
        self.workers = workers
        self.performance = None
        if label is not None:
            self.performance = performance_reference(reference, probabilities if probabilities else prediction,
                                                     label, None if probabilities else kinds, columns.prediction_class)
        self.judged_by = judging.performance_thresholds or WindowThresholds()
        self.checks = EstimateChecks(self.judged_by)  # the windows' estimates against their labels, in order
        performance = self.performance
        self.segments = _segments(reference, current, columns.segment_by, kinds, workers,
                                  None if performance is None else (
            lambda rows: for_segment(performance, rows, self.judged_by.estimated_quality_min_rows,
                                     self.judged_by.estimated_quality_threshold)))
        self.derived = None
        if thresholds.threshold_source == REFERENCE_SOURCE:
            self.derived = ReferenceThresholds(reference, list(kinds), measure)
        self.levels = multivariate if isinstance(multivariate, MultivariateThresholds) else MultivariateThresholds()
        features = {name: kind for name, kind in kinds.items() if name != prediction}
        self.multivariate = BatchReference.build(reference, features, self.levels) if multivariate else None
        self._note: dict[int, tuple[str, str | None]] = {}

    def thresholds_for(self, rows: int) -> DriftThresholds:
        """The thresholds a window of `rows` rows is judged by (reference-derived ones when asked for)."""
        if self.derived is None:
            self._note[rows] = (FIXED_SOURCE, None)
            return self.thresholds
        own, source, note = self.derived.for_window(self.thresholds, rows)
        self._note[rows] = (source, note)
        return own

    def complete(self, result: dict[str, Any], window: Window, rows: int) -> None:
        """Add the threshold source, multivariate, segments and performance of `window` (its rows, or a sample)."""
        source, note = self._note.get(rows) or (FIXED_SOURCE, None)
        if self.multivariate is not None:
            result["multivariate"] = batch_multivariate(self.multivariate, window.frame, self.levels)
        _label_threshold_source(result, source, note)
        if self.segments is not None:
            segment_performance = None if self.performance is None else (
                lambda rows, own: window_performance(own, rows, self.judged_by))
            result["segments"] = self.segments.detect(window, self.prediction, self.thresholds, self.workers,
                                                      segment_performance)
            for segment in result["segments"]:
                _label_threshold_source(segment, FIXED_SOURCE, None)
        if self.performance is not None:
            result["performance"] = self.checks.judged(window_performance(self.performance, window.frame,
                                                                          self.judged_by))


def _segments(reference: pd.DataFrame, current: pd.DataFrame, column: str | None, kinds: dict[str, str],
              workers: int, segment_reference: Callable[[pd.DataFrame], Any] | None) -> Any:
    if column is None:
        return None
    from driftline.detectors.batch.segments import SegmentProfiles  # it builds on this module's windows and profiles

    return SegmentProfiles(reference, current, column, kinds, workers, segment_reference=segment_reference)


def _label_threshold_source(result: dict[str, Any], source: str, note: str | None) -> None:
    """Each feature (and the prediction) says where its effect-size thresholds came from."""
    for feature in [*result.get("features", []), *([result["prediction"]] if result.get("prediction") else [])]:
        feature["threshold_source"] = source
    if note is not None:
        result["threshold_note"] = note


def iter_features(result: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(window index, feature result) for every feature of every window: handy for summaries and tests."""
    for window in result["windows"]:
        for feature in window["features"]:
            yield window["index"], feature
