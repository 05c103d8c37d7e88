"""Measure a baseline's `ThresholdSpreads`: effect sizes over training chunks, for the streaming service.

`measure_spreads(features, kinds, predictions)` splits the training rows into contiguous chunks
of each size of `defaults.REFERENCE_THRESHOLD_SIZES` (and of the largest size the rows hold
`REFERENCE_THRESHOLD_MIN_CHUNKS` chunks of), at most `REFERENCE_THRESHOLD_MAX_CHUNKS` per size
spread evenly, exactly as `driftline detect` does for one window size
(`driftline.detectors.thresholds.reference`), measures each chunk against the whole training set
with `detect`'s statistics, and keeps each statistic's mean and standard deviation per size.
`streaming_thresholds` turns them into a window's `DriftThresholds` (docs/detectors.md,
"Reference-derived thresholds").
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from driftline import defaults
from driftline.baseline import (CATEGORICAL, CLASS, NUMERIC, Baseline, LabelSummary, QualitySpreads, ThresholdSpreads,
                                prediction_values)
from driftline.detectors.batch.engine import ReferenceProfile, reference_tests
from driftline.detectors.thresholds.decision import DriftThresholds
from driftline.detectors.thresholds.reference import DERIVED_STATISTICS, FIXED, REFERENCE, chunk_slices
from driftline.detectors.families.results import WindowResult
from driftline.vocabulary import (DATASET_DRIFT, DATA_DRIFT, PREDICTION_DRIFT, THRESHOLD_NOTE_KEY,
                                  THRESHOLD_SOURCE_KEY)

__all__ = ["NO_SPREADS", "label_threshold_source", "measure_quality_spreads", "measure_spreads", "spread_sizes",
           "streaming_thresholds"]

# The evaluation logs this once per version and every drift result of its windows carries it.
NO_SPREADS = ("reference-derived thresholds need the chunk spreads a baseline keeps from when it is registered; "
              "this version's baseline has none (registered before they existed): fixed thresholds used; "
              "register the version's baseline again to derive them")


def spread_sizes(rows: int, sizes: Sequence[int] = defaults.REFERENCE_THRESHOLD_SIZES,
                 min_chunks: int = defaults.REFERENCE_THRESHOLD_MIN_CHUNKS) -> list[int]:
    """The chunk sizes measured for `rows` training rows: the grid's that fit `min_chunks` times, and the largest.

    >>> spread_sizes(3000)
    [50, 100, 200, 500, 600]
    """
    largest = rows // max(min_chunks, 1)
    found = [int(s) for s in sizes if 1 <= s <= largest]
    if largest >= 1 and (not found or found[-1] < largest):
        found.append(largest)
    return found


def _spread(measured: list[Mapping[str, Mapping[str, Any]]]) -> dict[str, tuple[float, float]]:
    """{statistic: (mean, sample standard deviation)} over the chunks' tests (finite values only)."""
    found = {}
    for statistic in DERIVED_STATISTICS:
        if statistic not in measured[0]:
            continue
        values = np.asarray([m[statistic]["value"] for m in measured], dtype=np.float64)
        values = values[np.isfinite(values)]
        if values.size >= 2:
            found[statistic] = (float(values.mean()), float(values.std(ddof=1)))
    return found


def measure_spreads(features: pd.DataFrame, kinds: Mapping[str, str], predictions: Any = None, *,
                    sizes: Sequence[int] = defaults.REFERENCE_THRESHOLD_SIZES,
                    min_chunks: int = defaults.REFERENCE_THRESHOLD_MIN_CHUNKS,
                    max_chunks: int = defaults.REFERENCE_THRESHOLD_MAX_CHUNKS) -> ThresholdSpreads | None:
    """The spreads of every feature of `kinds` (and of `predictions`, the training outputs, when given),
    or None when the rows hold fewer than `min_chunks` chunks of any size."""
    grid = spread_sizes(len(features), sizes, min_chunks)
    if not grid:
        return None
    frame = features[list(kinds)].reset_index(drop=True)
    columns = dict(kinds)
    prediction_column = None
    if predictions is not None:
        source, values = prediction_values(predictions)
        prediction_column = "\x00prediction"  # no feature can have this name
        frame = frame.assign(**{prediction_column: pd.Series(values, dtype=object if source == CLASS else np.float64)})
        columns[prediction_column] = CATEGORICAL if source == CLASS else NUMERIC
    profile = ReferenceProfile(frame, columns)
    per_size: dict[str, list[dict[str, tuple[float, float]]]] = {name: [] for name in columns}
    chunks = []
    for size in grid:
        slices = chunk_slices(len(frame), size, max_chunks)
        chunks.append(len(slices))
        for name, kind in columns.items():
            column = frame[name]
            per_size[name].append(_spread([reference_tests(profile, name, column.iloc[part]) for part in slices]))

    def spread(name: str) -> dict[str, tuple[list[float], list[float]]]:
        statistics = set.intersection(*(set(s) for s in per_size[name]))
        return {statistic: ([s[statistic][0] for s in per_size[name]], [s[statistic][1] for s in per_size[name]])
                for statistic in DERIVED_STATISTICS if statistic in statistics}

    return ThresholdSpreads(sizes=grid, chunks=chunks, features={name: spread(name) for name in kinds},
                            prediction=None if prediction_column is None else spread(prediction_column))


def measure_quality_spreads(predictions: Any, labels: Any, decisions: Any = None, *,
                            sizes: Sequence[int] = defaults.QUALITY_SPREAD_SIZES,
                            min_chunks: int = defaults.REFERENCE_THRESHOLD_MIN_CHUNKS,
                            max_chunks: int = defaults.QUALITY_SPREAD_MAX_CHUNKS) -> QualitySpreads | None:
    """Each quality metric's mean and standard deviation over contiguous chunks of the labelled rows, per size
    (`spread_sizes` of `sizes`), or None when the rows hold fewer than `min_chunks` chunks of any size."""
    from driftline.detectors.stats.quality import quality_metrics  # here: the layer below needs no metrics

    labels = pd.Series(np.asarray(labels, dtype=object))
    predictions = pd.Series(list(predictions), dtype=object)
    decided = None if decisions is None else pd.Series(list(decisions), dtype=object)
    grid = spread_sizes(len(labels), sizes, min_chunks)
    if not grid or len(predictions) != len(labels):
        return None
    task = LabelSummary.infer_task(predictions.to_numpy(), labels.to_numpy())
    measured: dict[str, list[tuple[float, float]]] = {}
    chunks = []
    for size in grid:
        slices = chunk_slices(len(labels), size, max_chunks)
        chunks.append(len(slices))
        values: dict[str, list[float]] = {}
        for part in slices:
            summary = LabelSummary(task=task).add(predictions.iloc[part].to_numpy(), labels.iloc[part],
                                                  None if decided is None else decided.iloc[part].to_numpy())
            for metric, value in quality_metrics(summary).items():
                if value is not None and math.isfinite(value):
                    values.setdefault(metric, []).append(float(value))
        for metric, found in values.items():
            if len(found) >= 2:
                measured.setdefault(metric, []).append((float(np.mean(found)), float(np.std(found, ddof=1))))
    return QualitySpreads(sizes=grid, chunks=chunks, metrics={
        metric: ([m for m, _ in found], [s for _, s in found]) for metric, found in measured.items()
        if len(found) == len(grid)})


def streaming_thresholds(baseline: Baseline, thresholds: DriftThresholds, rows: int,
                         k: float = defaults.REFERENCE_THRESHOLD_Z,
                         ) -> tuple[DriftThresholds, str, str | None]:
    """(thresholds for a streaming window of `rows` events, their source, a note when falling back to fixed).

    Fixed thresholds unless ``thresholds.threshold_source`` is "reference"; then derived from the
    baseline's spreads, a feature's own ``[drift.features.NAME]`` values still winning.
    """
    if thresholds.threshold_source != REFERENCE:
        return thresholds, FIXED, None
    spreads = baseline.threshold_spreads
    if spreads is None:
        return thresholds, FIXED, NO_SPREADS
    derived = spreads.thresholds(rows, k)
    if derived is None:
        return thresholds, FIXED, (f"reference-derived thresholds need at least {defaults.REFERENCE_THRESHOLD_MIN_CHUNKS}"
                                   f" training chunks of the window's {rows} rows; the baseline's spreads go up to "
                                   f"{spreads.largest} rows: fixed thresholds used")
    by_feature, prediction = derived
    if prediction:
        by_feature = {**by_feature, "prediction": prediction}
    features = {name: {**by_feature.get(name, {}), **thresholds.feature_overrides(name)}
                for name in set(by_feature) | set(thresholds.features)}
    return thresholds.replace(features=features), REFERENCE, None


def label_threshold_source(results: list[WindowResult], source: str, note: str | None) -> None:
    """Each drift result (features, prediction, dataset) says where its thresholds came from, and why not
    from the reference when that was asked for and could not be done."""
    for result in results:
        if result.detector in (DATA_DRIFT, PREDICTION_DRIFT, DATASET_DRIFT):
            result.details[THRESHOLD_SOURCE_KEY] = source
            if note is not None:
                result.details[THRESHOLD_NOTE_KEY] = note
