"""Feature freshness in a window: how old each served feature value was, as a mergeable quantile sketch.

Events may say when each feature's value was computed (`feature_ts`, event time of the value) or how
old it was (`feature_age_ms`); `age_columns` turns a batch's events into one float64 column of ages
(ms at the event's time, NaN where not given) per feature, and a window state keeps an `AgeHistogram`
per feature: the latency sketch (`LatencyHistogram`, 1 % relative error) over a range that reaches
years, not hours. A value stamped after its event (clock skew) counts as age 0.

Only the ages of features an event carries in its `features` count (the age of a value that was not served
says nothing), and only for the features its window tracks: the collector drops other names as soon as an
event is decoded (`drop_unserved`), and `age_columns` makes a column only for a name the batch has a feature
column of, so 600 events of 1 000 unique names each cost no 600 x 600 000 matrix (3 GB; now a few MB).
"""
from __future__ import annotations

import math
from typing import Any, Collection, Mapping, Sequence

import numpy as np

from driftline import defaults
from driftline.events import FEATURE_AGE_MS, FEATURE_TS, parse_timestamp
from driftline.window_state.latency import LatencyHistogram


class AgeHistogram(LatencyHistogram):
    """A `LatencyHistogram` of feature ages in ms, up to `defaults.FEATURE_AGE_MAX_MS`."""

    _offset = math.ceil(math.log(defaults.LATENCY_MIN_MS) / LatencyHistogram._log_gamma)
    size = math.ceil(math.log(defaults.FEATURE_AGE_MAX_MS) / LatencyHistogram._log_gamma) - _offset + 1
    __slots__ = ()

    def share_above(self, limit_ms: float) -> tuple[int, float]:
        """(count, share) of ages above `limit_ms`, from whole buckets (within the sketch's 1 %)."""
        if self.count == 0:
            return 0, 0.0
        if limit_ms >= self.max:
            return 0, 0.0
        if limit_ms < self.min:
            return self.count, 1.0
        bucket = math.ceil(math.log(max(limit_ms, defaults.LATENCY_MIN_MS)) / self._log_gamma) - self._offset
        above = int(self.counts[min(max(bucket, 0), self.size - 1) + 1:].sum())
        return above, above / self.count


def age_columns(events: Sequence[Any], times_ms: np.ndarray, names: Collection[str]) -> dict[str, np.ndarray] | None:
    """Per feature of `names` (the batch's feature columns), each event's age in ms (NaN: not given); None when
    no event says any. Other names make no column: their number is the producer's to choose.

    `events`: validated inference events (dicts or objects with `raw`); `times_ms` their event times.
    """
    columns: dict[str, np.ndarray] = {}
    n = len(events)
    for i, event in enumerate(events):
        raw = event if isinstance(event, dict) else (getattr(event, "raw", None) or {})
        stamps, ages = raw.get(FEATURE_TS), raw.get(FEATURE_AGE_MS)
        if not stamps and not ages:
            continue
        for name, value in (stamps or {}).items():
            if name in names:
                _column(columns, name, n)[i] = max(0.0, float(times_ms[i] - parse_timestamp(value, FEATURE_TS)))
        for name, value in (ages or {}).items():
            if name in names:
                _column(columns, name, n)[i] = float(value)
    return columns or None


def drop_unserved(raw: dict[str, Any], features: Mapping[str, Any]) -> None:
    """Keep in a decoded event's `feature_ts` / `feature_age_ms` only the names of its own `features` (in place):
    what the collector holds of an event is then bounded by its features, whatever names it was sent."""
    for field in (FEATURE_TS, FEATURE_AGE_MS):
        given = raw.get(field)
        if given and not features.keys() >= given.keys():
            raw[field] = {name: value for name, value in given.items() if name in features}


def _column(columns: dict[str, np.ndarray], name: str, n: int) -> np.ndarray:
    column = columns.get(name)
    if column is None:
        column = columns[name] = np.full(n, np.nan)
    return column


def fold_ages(sketches: dict[str, AgeHistogram], ages: Mapping[str, np.ndarray] | None,
              known: Mapping[str, Any], carried: Mapping[str, Any]) -> None:
    """Add a batch's ages to `sketches`, for the features the window tracks (`known`) and the batch carries
    (`carried`, its feature columns) only: bounded, and the same whichever decoder made the batch."""
    for name, values in (ages or {}).items():
        if name not in known or name not in carried:
            continue
        sketch = sketches.get(name)
        if sketch is None:
            if np.isnan(values).all():
                continue
            sketch = sketches[name] = AgeHistogram()
        sketch.add(values)


def merge_ages(a: Mapping[str, AgeHistogram], b: Mapping[str, AgeHistogram]) -> dict[str, AgeHistogram]:
    return {name: (a[name].merged(b[name]) if name in a and name in b else (a.get(name) or b[name]).merged(AgeHistogram()))
            for name in dict.fromkeys([*a, *b])}


def pack_ages(sketches: Mapping[str, AgeHistogram]) -> dict[str, Any]:
    return {name: sketch._pack() for name, sketch in sketches.items()}


def unpack_ages(doc: Mapping[str, Any] | None) -> dict[str, AgeHistogram]:
    return {str(name): AgeHistogram._unpack(data) for name, data in (doc or {}).items()}
