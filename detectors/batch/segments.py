"""Segments: each window compared with the reference one value of a column at a time (`detect --segment-by`).

A drift confined to one group (one region, one channel) is diluted in the whole
population and may never reach a verdict there; compared group against group it
does. Each segment of a window is judged against the same segment of the
reference with the whole-window rule (`driftline.detectors.batch.engine.detect_window`),
the segment column itself left out. The largest `SEGMENT_MAX_VALUES` values by
reference rows are segments of their own, the rest are pooled as "other"; a value
absent from the reference is reported but not compared; a segment with fewer than
``min_rows`` rows on either side is "insufficient data".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import pandas as pd

from driftline import defaults
from driftline.detectors.batch.engine import ReferenceProfile, Window, detect_window
from driftline.vocabulary import INSUFFICIENT_DATA_REASON
from driftline.detectors.thresholds.decision import DriftThresholds
from driftline.errors import UserError
from driftline.vocabulary import DATASET_DRIFT, INSUFFICIENT_DATA

__all__ = ["OTHER", "SegmentProfiles", "segment_keys"]

OTHER = "other"
# Internal keys for null values and the pooled rest; neither reaches the JSON.
_MISSING = "\x00driftline-missing"
_POOLED = "\x00driftline-pooled"


def segment_keys(series: pd.Series) -> pd.Series:
    """The column's values as hashable segment keys (nulls become one key of their own)."""
    values = series.astype(object)
    return values.where(series.notna(), _MISSING)


def _check_column(reference: pd.DataFrame, current: pd.DataFrame, column: str) -> None:
    for frame, where in ((reference, "reference"), (current, "current data")):
        if column not in frame.columns:
            raise UserError(f"--segment-by {column}: no such column in the {where} "
                            f"(columns: {', '.join(map(str, frame.columns))})")
    dtype = reference[column].dtype
    if pd.api.types.is_datetime64_any_dtype(dtype) or pd.api.types.is_timedelta64_dtype(dtype):
        raise UserError(f"--segment-by {column}: the column holds dates/times; segment by a category instead")
    if pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
        distinct = reference[column].nunique(dropna=True)
        if distinct > defaults.SEGMENT_MAX_NUMERIC_DISTINCT:
            raise UserError(f"--segment-by {column}: a numeric column with {distinct} distinct values "
                            f"(at most {defaults.SEGMENT_MAX_NUMERIC_DISTINCT} are used as segments); "
                            f"add a column of bands (e.g. {column}_band) and segment by that")


def _json_value(key: Any) -> Any:
    if isinstance(key, str) and key == _MISSING:
        return None
    return key.item() if hasattr(key, "item") else key


@dataclass(frozen=True)
class _Segment:
    key: Any
    reference_rows: int
    profile: ReferenceProfile
    pooled: int = 0  # how many reference values the "other" segment holds
    performance: Any = None  # what `segment_reference` made of the segment's reference rows


class SegmentProfiles:
    """The reference profiled once per segment of `column`; `detect` then judges each window segment by segment."""

    def __init__(self, reference: pd.DataFrame, current: pd.DataFrame, column: str, kinds: dict[str, str],
                 workers: int = 1, max_values: int = defaults.SEGMENT_MAX_VALUES,
                 segment_reference: Callable[[pd.DataFrame], Any] | None = None):
        """`segment_reference(rows)`, when given, is kept per segment for `detect`'s `performance` (its
        training values)."""
        _check_column(reference, current, column)
        self.column = column
        self.kinds = {name: kind for name, kind in kinds.items() if name != column}
        keys = segment_keys(reference[column])
        counts = keys.value_counts(sort=True)
        kept, pooled = list(counts.index[:max_values]), list(counts.index[max_values:])
        self.known = set(counts.index)
        self.kept = set(kept)
        def segment(key: Any, rows: pd.DataFrame, pooled_values: int = 0) -> _Segment:
            return _Segment(key, len(rows), ReferenceProfile(rows, self.kinds, workers), pooled_values,
                            None if segment_reference is None else segment_reference(rows))

        self.segments = [segment(key, reference[keys == key]) for key in kept]
        if pooled:
            self.segments.append(segment(_POOLED, reference[keys.isin(pooled)], len(pooled)))

    def detect(self, window: Window, prediction: str | None, thresholds: DriftThresholds,
               workers: int = 1, performance: Callable[[pd.DataFrame, Any], dict[str, Any]] | None = None
               ) -> list[dict[str, Any]]:
        """Every segment's result for `window`: kept segments, then "other", then values the reference lacks.

        `performance(rows, segment_performance)`, when given, adds each compared segment's ``performance``
        (`segment_performance`: what `segment_reference` made of the segment's reference rows)."""
        keys = segment_keys(window.frame[self.column])
        grouped = keys.where(keys.isin(self.kept) | ~keys.isin(self.known), _POOLED)
        groups = {key: window.frame.loc[index] for key, index in grouped.groupby(grouped, sort=False).groups.items()}
        out = []
        for segment in self.segments:
            rows = groups.get(segment.key, window.frame.iloc[0:0])
            out.append(self._segment_result(segment, rows, window, prediction, thresholds, workers))
            if performance is not None and out[-1]["features"]:
                out[-1]["performance"] = performance(rows, segment.performance)
        unseen = sorted((key for key in groups if key not in self.known and key != _POOLED),
                        key=lambda key: (-len(groups[key]), str(key)))
        for key in unseen:
            out.append({"column": self.column, "value": _json_value(key), "rows": int(len(groups[key])),
                        "reference_rows": 0, "features": [], "drifted_features": [], DATASET_DRIFT: False,
                        "reason": "not in the reference: not compared"})
        return out

    def _segment_result(self, segment: _Segment, frame: pd.DataFrame, window: Window, prediction: str | None,
                        thresholds: DriftThresholds, workers: int) -> dict[str, Any]:
        value = OTHER if segment.key == _POOLED else _json_value(segment.key)
        result: dict[str, Any] = {"column": self.column, "value": value, "rows": int(len(frame)),
                                  "reference_rows": segment.reference_rows}
        if segment.pooled:
            result["pooled_values"] = segment.pooled
        rows = min(len(frame), segment.reference_rows)
        if rows < thresholds.min_rows:
            return {**result, "features": [], "drifted_features": [], DATASET_DRIFT: False,
                    INSUFFICIENT_DATA: True,
                    "reason": f"{INSUFFICIENT_DATA_REASON}: {len(frame)} rows in the window, {segment.reference_rows} "
                              f"in the reference (at least {thresholds.min_rows} on both sides)"}
        judged = detect_window(segment.profile, Window(window.index, frame, window.start, window.end),
                               prediction if prediction != self.column else None, thresholds, workers)
        return {**result, "features": judged["features"], "prediction": judged["prediction"],
                "drifted_features": judged["drifted_features"], DATASET_DRIFT: judged[DATASET_DRIFT]}
