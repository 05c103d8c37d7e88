"""`Baseline` and `compute_baseline`: the whole training summary of a model version, computed once."""
from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from driftline import defaults
from driftline.baseline.labels import LabelSummary
from driftline.baseline.predictions import CLASS, prediction_values
from driftline.baseline.profiles import CategoricalProfile, NumericProfile, Profile, profile_from_dict
from driftline.baseline.reconstruction import ReconstructionFit, fit_reconstruction
from driftline.baseline.segments import SegmentReference, TrainingOutcomes, compute_segments
from driftline.baseline.spreads import QualitySpreads, ThresholdSpreads
from driftline.embeddings.reference import EmbeddingReference
from driftline.errors import UserError

# the layout version of `Baseline.to_dict()`
BASELINE_FORMAT = 1


@dataclass
class Baseline:
    """A model version's training summary (module docstring). Build with `compute_baseline`."""

    rows: int
    profiles: dict[str, Profile]  # feature name -> profile, in training column order
    prediction: Profile | None = None
    prediction_source: str | None = None  # SCORE, PROBABILITY or CLASS
    quality: LabelSummary | None = None
    sample: list[dict[str, Any]] = field(default_factory=list)
    fine_bins: int = defaults.BASELINE_FINE_BINS
    fingerprint: str = ""
    # The PCA multivariate drift measures against; None for baselines registered before it existed.
    reconstruction: ReconstructionFit | None = None
    # Segment column -> its per-segment training profiles (driftline.baseline.segments); not in the fingerprint:
    # segments are binned on the whole population's edges.
    segments: dict[str, SegmentReference] = field(default_factory=dict)
    # Effect sizes over training chunks, for reference-derived thresholds; None when not measured.
    threshold_spreads: ThresholdSpreads | None = None
    # Embedding name -> what its training vectors look like (driftline.embeddings.reference); empty: none.
    embeddings: dict[str, EmbeddingReference] = field(default_factory=dict)
    # Where `quality` was measured: vocabulary.QUALITY_FROM_TRAINING_ROWS (in-sample) or QUALITY_FROM_HOLDOUT;
    # None: not said (the Python API, older baselines). Not in the fingerprint: the profiles do not change.
    quality_reference: str | None = None
    # Each quality metric's spread over chunks of the quality reference's labelled rows; None: not measured.
    quality_spreads: QualitySpreads | None = None

    def __post_init__(self) -> None:
        if not self.fingerprint:
            self.fingerprint = self._compute_fingerprint()
        self._segment_baselines: dict[tuple[str, str], Baseline | None] = {}

    def segment_baseline(self, column: str, key: str) -> "Baseline | None":
        """The training data of one segment as a baseline on the same bins (None: no reference for it).

        The segment column itself is left out; the multivariate fit is not (it is the whole population's).
        """
        cache_key = (column, key)
        if cache_key not in self._segment_baselines:
            reference = self.segments.get(column)
            segment = reference.segments.get(key) if reference is not None else None
            self._segment_baselines[cache_key] = None if segment is None else dataclasses.replace(
                self, rows=segment.rows, profiles=segment.profiles, prediction=segment.prediction or self.prediction,
                quality=segment.quality or self.quality, sample=segment.sample, reconstruction=None, segments={},
                fingerprint=self.fingerprint)
        return self._segment_baselines[cache_key]

    def add_embeddings(self, references: Mapping[str, EmbeddingReference]) -> "Baseline":
        """Attach embedding references (before the baseline is stored: window states bin on them). Returns self."""
        self.embeddings.update(references)
        self.fingerprint = self._compute_fingerprint()
        return self

    @property
    def feature_names(self) -> list[str]:
        return list(self.profiles)

    def kind(self, name: str) -> str:
        """"numeric" or "categorical"; a KeyError names an unknown feature."""
        try:
            return self.profiles[name].kind
        except KeyError:
            raise KeyError(f"feature {name!r} is not in the baseline (known: {', '.join(self.profiles)})") from None

    def profile(self, name: str) -> Profile:
        return self.profiles[name]

    @property
    def numeric(self) -> dict[str, NumericProfile]:
        return {k: v for k, v in self.profiles.items() if isinstance(v, NumericProfile)}

    @property
    def categorical(self) -> dict[str, CategoricalProfile]:
        return {k: v for k, v in self.profiles.items() if isinstance(v, CategoricalProfile)}

    def _compute_fingerprint(self) -> str:
        # Window states count on these bins; states built on different bins must not merge.
        digest = hashlib.sha1(f"{BASELINE_FORMAT}:{self.rows}".encode())
        parts = list(self.profiles.items()) + ([("\x00prediction", self.prediction)] if self.prediction else [])
        for name, profile in parts:
            digest.update(name.encode("utf-8", "surrogatepass") + b"\x00" + profile.kind.encode())
            if isinstance(profile, NumericProfile):
                # + 0.0 turns -0.0 into 0.0: the same bins whichever way a chunk rounded its zero edge.
                digest.update((np.ascontiguousarray(profile.edges, dtype="<f8") + 0.0).tobytes())
        for name, reference in self.embeddings.items():  # absent from older baselines: their fingerprints stand
            digest.update(b"\x00embedding\x00" + name.encode() + reference.fingerprint)
        return digest.hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe (no NaN, no numpy types): what the store keeps."""
        return {"format": BASELINE_FORMAT, "rows": self.rows, "fine_bins": self.fine_bins,
                "fingerprint": self.fingerprint,
                "features": [{"name": name, **profile.to_dict()} for name, profile in self.profiles.items()],
                "prediction": None if self.prediction is None else self.prediction.to_dict(),
                "prediction_source": self.prediction_source,
                "quality": None if self.quality is None else self.quality.to_dict(),
                "sample": self.sample,
                "reconstruction": None if self.reconstruction is None else self.reconstruction.to_dict(),
                "segments": [reference.to_dict() for reference in self.segments.values()],
                "threshold_spreads": None if self.threshold_spreads is None else self.threshold_spreads.to_dict(),
                **({"quality_reference": self.quality_reference} if self.quality_reference else {}),
                **({"quality_spreads": self.quality_spreads.to_dict()} if self.quality_spreads else {}),
                **({"embeddings": {name: reference.to_dict() for name, reference in self.embeddings.items()}}
                   if self.embeddings else {})}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Baseline":
        if not isinstance(data, Mapping) or data.get("format") != BASELINE_FORMAT:
            found = data.get("format") if isinstance(data, Mapping) else type(data).__name__
            raise UserError(f"not a driftline baseline (format {found!r}, expected {BASELINE_FORMAT})")
        profiles = {entry["name"]: profile_from_dict(entry) for entry in data["features"]}
        prediction = None if data.get("prediction") is None else profile_from_dict(data["prediction"])
        sample = list(data.get("sample") or [])
        segments = [SegmentReference.from_dict(entry, profiles, prediction, sample)
                    for entry in data.get("segments") or []]
        return cls(rows=int(data["rows"]), profiles=profiles,
                   prediction=prediction, segments={reference.column: reference for reference in segments},
                   prediction_source=data.get("prediction_source"),
                   quality=None if data.get("quality") is None else LabelSummary.from_dict(data["quality"]),
                   sample=sample, fine_bins=int(data.get("fine_bins", defaults.BASELINE_FINE_BINS)),
                   fingerprint=str(data.get("fingerprint") or ""),
                   reconstruction=None if data.get("reconstruction") is None
                   else ReconstructionFit.from_dict(data["reconstruction"]),
                   threshold_spreads=None if data.get("threshold_spreads") is None
                   else ThresholdSpreads.from_dict(data["threshold_spreads"]),
                   embeddings={str(name): EmbeddingReference.from_dict(entry)
                               for name, entry in (data.get("embeddings") or {}).items()},
                   quality_reference=None if data.get("quality_reference") is None
                   else str(data["quality_reference"]),
                   quality_spreads=None if data.get("quality_spreads") is None
                   else QualitySpreads.from_dict(data["quality_spreads"]))


def is_categorical_column(column: pd.Series) -> bool:
    """Whether a column is profiled as categorical without being named so: text, category and boolean columns."""
    return not pd.api.types.is_numeric_dtype(column.dtype) or pd.api.types.is_bool_dtype(column.dtype)


def _json_value(value: Any) -> Any:
    """A JSON-safe copy of one cell: numpy scalars to Python, NaN to None."""
    if isinstance(value, np.ndarray):
        return [_json_value(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    return value


def sample_positions(rows: int, size: int, seed: int = 0) -> np.ndarray:
    """The sorted table rows a seeded uniform sample of `size` of `rows` rows takes (all rows when fewer)."""
    return np.sort(np.random.default_rng(seed).choice(rows, size=min(size, rows), replace=False))


def sample_records(features: pd.DataFrame, predictions: Any = None, labels: Any = None) -> list[dict[str, Any]]:
    """The baseline's sample entries of these rows: features, and the prediction and label of each row
    (`predictions[i]`, `labels[i]` belong to row i), JSON-safe."""
    records = features.astype(object).to_dict(orient="records")
    sample = []
    for i, record in enumerate(records):
        row: dict[str, Any] = {"features": {str(k): _json_value(v) for k, v in record.items()}}
        if predictions is not None:
            row["prediction"] = _json_value(predictions[i])
        if labels is not None:
            row["label"] = _json_value(labels[i])
        sample.append(row)
    return sample


def segment_reference_columns(profiles: Mapping[str, Profile], wanted: Iterable[str] = ()) -> list[str]:
    """The features that get segment references: those in `wanted`, and every categorical one with at most
    `defaults.SEGMENT_REFERENCE_MAX_DISTINCT` training values."""
    wanted = set(wanted)
    return [name for name, profile in profiles.items()
            if name in wanted or (isinstance(profile, CategoricalProfile)
                                  and len(profile.counts) <= defaults.SEGMENT_REFERENCE_MAX_DISTINCT)]


def compute_baseline(features: pd.DataFrame, *, categorical: Iterable[str] = (),
                     predictions: np.ndarray | pd.Series | list | None = None, labels: Any = None,
                     sample_size: int = defaults.BASELINE_SAMPLE_SIZE, seed: int = 0,
                     fine_bins: int = defaults.BASELINE_FINE_BINS, segment_columns: Iterable[str] = (),
                     segment_max_values: int = defaults.SEGMENT_MAX_VALUES, decisions: Any = None) -> Baseline:
    """Summarise a model version's training data (module docstring).

    `features`: one row per training example, one column per model feature.
    Columns named in `categorical`, and any non-numeric or boolean column, are
    categorical; the rest numeric. `predictions` (optional, one per row): the
    model's outputs on the training rows; `labels` (optional, needs predictions):
    their true labels, for the training quality metrics; `decisions` (optional, with labels): the
    model's own decisions (`driftline.baseline.decisions`), which a binary model's training metrics
    follow. A uniform sample of
    `sample_size` rows (seeded by `seed`) is kept. Segment references
    (`driftline.baseline.segments`) are computed for every categorical feature with at
    most `SEGMENT_REFERENCE_MAX_DISTINCT` training values and for the features named in
    `segment_columns` (other names, tags for instance, have none). Raises `UserError` for input a
    user can fix (no rows, unknown categorical column, length mismatch).
    """
    if not isinstance(features, pd.DataFrame):
        raise UserError(f"baseline features must be a pandas DataFrame, got {type(features).__name__}")
    if len(features) == 0 or features.shape[1] == 0:
        raise UserError(f"cannot compute a baseline from {len(features)} rows and {features.shape[1]} columns")
    if fine_bins < defaults.PSI_NUMERIC_BINS or fine_bins % defaults.PSI_NUMERIC_BINS:
        raise UserError(f"fine_bins must be a multiple of {defaults.PSI_NUMERIC_BINS}, got {fine_bins}")
    names = [str(c) for c in features.columns]
    if len(set(names)) != len(names):
        raise UserError("baseline feature names must be unique")
    categorical = set(categorical)
    unknown = sorted(categorical - set(names))
    if unknown:
        raise UserError(f"categorical column(s) not in the data: {', '.join(unknown)}")
    profiles: dict[str, Profile] = {}
    for name, column in zip(names, (features.iloc[:, j] for j in range(features.shape[1]))):
        if name in categorical or is_categorical_column(column):
            profiles[name] = CategoricalProfile.from_values(column.astype(object))
        else:
            profiles[name] = NumericProfile.from_values(column.to_numpy(dtype=np.float64, na_value=np.nan), fine_bins)

    prediction = source = quality = None
    if predictions is not None:
        if len(predictions) != len(features):
            raise UserError(f"{len(predictions)} predictions for {len(features)} training rows")
        source, values = prediction_values(predictions)
        prediction = (CategoricalProfile.from_values(values) if source == CLASS
                      else NumericProfile.from_values(values, fine_bins))
        if labels is not None:
            if len(labels) != len(features):
                raise UserError(f"{len(labels)} labels for {len(features)} training rows")
            if decisions is not None and len(decisions) != len(features):
                raise UserError(f"{len(decisions)} decisions for {len(features)} training rows")
            quality = LabelSummary().add(predictions, labels, decisions)
    elif labels is not None:
        raise UserError("training labels need the training predictions too (for the training metrics)")

    take = sample_positions(len(features), sample_size, seed)
    prediction_list = None if predictions is None else (
        predictions.to_numpy() if isinstance(predictions, pd.Series) else predictions)
    label_list = None if labels is None else (labels.to_numpy() if isinstance(labels, pd.Series) else labels)
    sample = sample_records(features.iloc[take], None if prediction_list is None else
                            [prediction_list[p] for p in take.tolist()],
                            None if label_list is None else [label_list[p] for p in take.tolist()])
    reconstruction = fit_reconstruction(features.set_axis(names, axis=1),
                                        {name: profile.kind for name, profile in profiles.items()}, seed=seed)
    frame = features.set_axis(names, axis=1)
    columns = segment_reference_columns(profiles, segment_columns)
    outcomes = TrainingOutcomes(None if predictions is None else values, prediction, source, prediction_list, label_list)
    segments = compute_segments(frame, profiles, columns, segment_max_values, outcomes) if columns else {}
    baseline = Baseline(rows=len(features), profiles=profiles, prediction=prediction, prediction_source=source,
                        quality=quality, sample=sample, fine_bins=fine_bins, reconstruction=reconstruction,
                        segments=segments)
    for reference in segments.values():
        reference.attach_sample(sample)
    return baseline
