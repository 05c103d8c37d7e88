"""Per-segment references: the training data of one value of a column, on the whole baseline's bins.

A segment of a window is compared with the same segment of the training data, not with the
whole population (regions, channels and plans differ naturally). `compute_segments` profiles,
for each segment column, the largest `max_values` values by training rows (nulls are a value
of their own) and pools the rest under "other", each on the whole population's fine bins so
that a window's segment sub-state (binned on the same edges) compares with it directly.

Stored compactly inside the baseline's JSON: numeric features keep the non-zero fine-bin
counts only; a bin's sum is read back as its count times the whole population's mean in that
bin (a fine bin holds 1/1000 of the training data, so this moves a value by less than the
bin's width). Categorical features, the prediction and the label summary are kept whole.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pandas as pd

from driftline.baseline.labels import LabelSummary
from driftline.baseline.predictions import CLASS
from driftline.baseline.profiles import NUMERIC, CategoricalProfile, NumericProfile, Profile, profile_from_dict
from driftline.segments import NULL_KEY, OTHER_KEY, segment_key

__all__ = ["SegmentReference", "TrainingOutcomes", "compute_segments"]


@dataclass(frozen=True)
class TrainingOutcomes:
    """The model's outputs and labels on the training rows, one per row (None: not given): what a segment's
    prediction profile and training quality are computed from."""

    predictions: np.ndarray | None = None  # the prediction values (`driftline.baseline.predictions.prediction_values`)
    prediction_profile: Profile | None = None  # the whole population's, whose bins a segment's shares
    prediction_source: str | None = None
    raw_predictions: Any = None  # the outputs as given (the label summary reads them)
    labels: Any = None


@dataclass
class SegmentProfile:
    """One segment's training data: rows, features (the segment column left out), prediction, labels."""

    rows: int
    profiles: dict[str, Profile]
    prediction: Profile | None = None
    quality: LabelSummary | None = None
    sample: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class SegmentReference:
    """A column's segments in the training data: value key -> `SegmentProfile` (OTHER_KEY: the pooled rest)."""

    column: str
    segments: dict[str, SegmentProfile]
    pooled: int = 0  # how many training values "other" holds

    def to_dict(self) -> dict[str, Any]:
        return {"column": self.column, "pooled": self.pooled,
                "segments": {key: {"rows": seg.rows,
                                   "features": {name: _pack(p) for name, p in seg.profiles.items()},
                                   "prediction": None if seg.prediction is None else _pack(seg.prediction),
                                   "quality": None if seg.quality is None else seg.quality.to_dict()}
                             for key, seg in self.segments.items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], whole: Mapping[str, Profile], prediction: Profile | None,
                  sample: list[dict[str, Any]]) -> "SegmentReference":
        column = str(data["column"])
        segments = {}
        for key, seg in data["segments"].items():
            profiles = {name: _unpack(p, whole.get(name)) for name, p in seg["features"].items()}
            segments[str(key)] = SegmentProfile(
                rows=int(seg["rows"]), profiles=profiles,
                prediction=None if seg.get("prediction") is None else _unpack(seg["prediction"], prediction),
                quality=None if seg.get("quality") is None else LabelSummary.from_dict(seg["quality"]))
        out = cls(column=column, segments=segments, pooled=int(data.get("pooled", 0)))
        out.attach_sample(sample)
        return out

    def attach_sample(self, sample: list[dict[str, Any]]) -> None:
        """Give each segment its rows of the baseline's sample ("other": the rows of no kept value)."""
        kept = set(self.segments) - {OTHER_KEY}

        def key_of(row: dict[str, Any]) -> str:
            features = row.get("features") or {}
            return segment_key(features.get(self.column)) if self.column in features else NULL_KEY

        keys = [key_of(row) for row in sample]
        for key, segment in self.segments.items():
            segment.sample = [row for row, k in zip(sample, keys) if (k not in kept if key == OTHER_KEY else k == key)]


def compute_segments(features: pd.DataFrame, profiles: Mapping[str, Profile], columns: list[str], max_values: int,
                     outcomes: TrainingOutcomes = TrainingOutcomes()) -> dict[str, SegmentReference]:
    """Each column's segments (`max_values` largest values, the rest pooled as "other")."""
    predictions, prediction_profile, labels = outcomes.predictions, outcomes.prediction_profile, outcomes.labels
    out = {}
    for column in columns:
        keys = pd.Series([segment_key(v) for v in features[column].astype(object).tolist()], index=features.index)
        counts = keys.value_counts(sort=False)
        ranked = sorted(counts.index, key=lambda k: (-int(counts[k]), k))
        kept, pooled = ranked[:max_values], ranked[max_values:]
        groups = {key: (keys == key).to_numpy() for key in kept}
        if pooled:
            groups[OTHER_KEY] = keys.isin(pooled).to_numpy()
        segments = {}
        for key, mask in groups.items():
            rows = features[mask]
            seg_profiles = {name: _profile_of(rows[name], profile) for name, profile in profiles.items()
                            if name != column}
            prediction = quality = None
            if predictions is not None and prediction_profile is not None:
                part = predictions[mask]
                prediction = (CategoricalProfile.from_values(part) if outcomes.prediction_source == CLASS
                              else _numeric_on(part, prediction_profile))  # type: ignore[arg-type]  # scores: numeric
                if labels is not None:
                    positions = np.flatnonzero(mask)
                    quality = LabelSummary().add([outcomes.raw_predictions[i] for i in positions],
                                                 np.asarray(labels, dtype=object)[positions])
            segments[key] = SegmentProfile(rows=int(mask.sum()), profiles=seg_profiles, prediction=prediction,
                                           quality=quality)
        out[column] = SegmentReference(column, segments, len(pooled))
    return out


def _profile_of(values: pd.Series, whole: Profile) -> Profile:
    if whole.kind == NUMERIC:
        return _numeric_on(values.to_numpy(dtype=np.float64, na_value=np.nan), whole)  # type: ignore[arg-type]  # kind says numeric
    return CategoricalProfile.from_values(values.astype(object))


def _numeric_on(values: Any, whole: NumericProfile) -> NumericProfile:
    """A numeric profile of `values` on `whole`'s edges (not their own quantiles)."""
    array = np.asarray(values, dtype=np.float64).ravel()
    nan = np.isnan(array)
    finite = np.sort(array[np.isfinite(array)])
    index = np.searchsorted(whole.edges, finite, side="right")
    counts = np.bincount(index, minlength=whole.edges.size + 1).astype(np.int64)
    n = finite.size
    return NumericProfile(
        edges=whole.edges, counts=counts, sums=_bin_sums(counts, whole), decile_edges=whole.decile_edges, count=int(n),
        nulls=int(nan.sum()), nonfinite=int(array.size - n - nan.sum()),
        min=float(finite[0]) if n else None, max=float(finite[-1]) if n else None,
        mean=float(finite.mean()) if n else None, std=float(finite.std()) if n else None,
        distinct=int(np.count_nonzero(np.diff(finite))) + 1 if n else 0)


def _bin_sums(counts: np.ndarray, whole: NumericProfile) -> np.ndarray:
    """Each bin's count times the whole population's mean in that bin (module docstring)."""
    means = np.divide(whole.sums, whole.counts, out=np.zeros(whole.counts.size), where=whole.counts > 0)
    return counts * means


def _pack(profile: Profile) -> dict[str, Any]:
    if not isinstance(profile, NumericProfile):
        return profile.to_dict()
    nonzero = np.flatnonzero(profile.counts)
    data = profile.to_dict()
    for name in ("edges", "counts", "sums", "decile_edges"):
        data.pop(name)
    data["bins"] = nonzero.tolist()
    data["bin_counts"] = profile.counts[nonzero].tolist()
    return data


def _unpack(data: Mapping[str, Any], whole: Profile | None) -> Profile:
    if data.get("kind") != NUMERIC:
        return profile_from_dict(data)
    if not isinstance(whole, NumericProfile):
        raise ValueError("a numeric segment profile needs the whole population's numeric profile")
    counts = np.zeros(whole.edges.size + 1, dtype=np.int64)
    counts[np.asarray(data["bins"], dtype=np.int64)] = np.asarray(data["bin_counts"], dtype=np.int64)
    return NumericProfile(edges=whole.edges, counts=counts, sums=_bin_sums(counts, whole),
                          decile_edges=whole.decile_edges, count=int(data["count"]), nulls=int(data["nulls"]),
                          nonfinite=int(data.get("nonfinite", 0)), min=data["min"], max=data["max"], mean=data["mean"],
                          std=data["std"], distinct=int(data.get("distinct", 0)))

