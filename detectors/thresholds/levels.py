"""The alarm levels of `evaluate_window` besides the drift rule's: data quality, skew, model quality (the latency
SLO, `LatencySLO`, is the `[latency]` table of `driftline.latency_slo`)."""
from __future__ import annotations

import warnings
from typing import Annotated, Any, Mapping

from pydantic import Field, field_validator

from driftline.detectors.thresholds.decision import DriftThresholds
from driftline.detectors.stats.multivariate import MultivariateThresholds
from driftline.detectors.thresholds.embeddings import EmbeddingThresholds
from driftline import defaults
from driftline.latency_slo import LatencySLO
from driftline.toml_sections import Table, as_written, by_name, given, parse_section
from driftline.vocabulary import (
    DATA_QUALITY,
    ESTIMATED_QUALITY,
    MODEL_QUALITY,
    QUALITY_VS_CALIBRATION,
    QUALITY_VS_TRAINING,
    SKEW,
)

__all__ = ["LatencySLO", "WindowThresholds"]

# Every number here is a count, a share, a rate, a tolerance or a z: never negative, never nan or infinite.
_Count = Annotated[int, Field(ge=0)]
_NotNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
_Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
_Rate = Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)]  # a false-alarm rate: strictly between 0 and 1


class WindowThresholds(Table):
    """Every alarm level of `evaluate_window` besides the latency SLO (defaults: `driftline.defaults`): the drift,
    multivariate and embedding tables, and the keys of `[data_quality]`, `[skew]`, `[model_quality]` and
    `[estimated_quality]` (any of them in any of those tables, or at the top level)."""

    WHERE = "[window thresholds]"

    drift: DriftThresholds = Field(default_factory=DriftThresholds)
    multivariate: MultivariateThresholds = Field(default_factory=MultivariateThresholds)
    embedding: EmbeddingThresholds = Field(default_factory=EmbeddingThresholds)
    data_quality_min_rows: _Count = defaults.DATA_QUALITY_MIN_ROWS
    missing_rate_increase: _Share = defaults.MISSING_RATE_DELTA
    out_of_range_share: _Share = defaults.OUT_OF_RANGE_SHARE_MAX
    unseen_category_share: _Share = defaults.UNSEEN_CATEGORY_SHARE_MAX
    type_change_share: _Share = defaults.TYPE_CHANGE_SHARE_MAX
    missing_feature_share: _Share = defaults.MISSING_FEATURE_SHARE_MAX
    new_feature_share: _Share = defaults.NEW_FEATURE_SHARE_MAX
    skew_distribution_psi: _NotNegative = defaults.SKEW_DISTRIBUTION_PSI
    parity_relative_tolerance: _NotNegative = defaults.SKEW_PARITY_RELATIVE_TOLERANCE
    parity_mismatch_rate: _Share = defaults.SKEW_PARITY_MISMATCH_RATE
    parity_min_sample: _Count = defaults.SKEW_PARITY_MIN_SAMPLE
    quality_min_labels: _Count = defaults.QUALITY_MIN_LABELS
    quality_min_class_count: _Count = defaults.QUALITY_MIN_CLASS_COUNT
    quality_z: _NotNegative = defaults.QUALITY_Z
    quality_compared_with: str = defaults.QUALITY_COMPARED_WITH
    quality_max_drop: _NotNegative = defaults.QUALITY_MAX_DROP
    quality_max_error_increase: _NotNegative = defaults.QUALITY_MAX_ERROR_INCREASE
    # read by the evaluation (driftline.scheduler.evaluation), which pools labels before calling model_quality
    quality_pool_min_labels: _Count = defaults.QUALITY_POOL_MIN_LABELS
    quality_pool_max_windows: _Count = defaults.QUALITY_POOL_MAX_WINDOWS
    estimated_quality_z: _NotNegative = defaults.ESTIMATED_QUALITY_Z
    estimated_quality_max_drop: _NotNegative = defaults.ESTIMATED_QUALITY_MAX_DROP
    estimated_quality_max_error_increase: _NotNegative = defaults.ESTIMATED_QUALITY_MAX_ERROR_INCREASE
    estimated_quality_min_rows: _Count = defaults.ESTIMATED_QUALITY_MIN_ROWS
    estimated_quality_max_outside_share: _Share = defaults.ESTIMATED_QUALITY_MAX_OUTSIDE_SHARE
    # the score a row without the model's own decision is predicted positive at (`threshold` in [estimated_quality])
    estimated_quality_threshold: _Share = defaults.ESTIMATED_QUALITY_THRESHOLD
    estimation_invalid_windows: Annotated[int, Field(ge=1)] = defaults.ESTIMATION_INVALID_WINDOWS
    estimation_invalid_alpha: _Rate = defaults.ESTIMATION_INVALID_ALPHA

    @field_validator("quality_compared_with")
    @classmethod
    def _known_reference(cls, value: str) -> str:
        if value not in (QUALITY_VS_CALIBRATION, QUALITY_VS_TRAINING):
            raise ValueError(f"must be {QUALITY_VS_CALIBRATION!r} or {QUALITY_VS_TRAINING!r}")
        return value

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None, model: str | None = None) -> "WindowThresholds":
        """From a config dict: ``drift`` (a `DriftThresholds` section), ``multivariate_drift``
        (`MultivariateThresholds`' fields), ``embedding_drift`` (`EmbeddingThresholds`'), the other fields at the
        top level or in ``data_quality`` / ``skew`` / ``model_quality`` / ``estimated_quality`` sections, and
        ``models.NAME`` overrides for `model`."""
        section = parse_section(_WindowSection, mapping, cls.WHERE)
        drift = DriftThresholds.from_mapping(section.drift, model)
        values = _flatten(section)
        if model is not None and model in section.models:
            values.update(_flatten(section.models[model]))
        return cls(**values, drift=drift, multivariate=section.multivariate_drift or MultivariateThresholds(),
                   embedding=section.embedding_drift or EmbeddingThresholds())


# The tables as written (every key optional, with its bound), derived from WindowThresholds' fields (built at run
# time); the values they set are checked across keys by the WindowThresholds made from them, at start for every model.
_NESTED = ("drift", "multivariate", "embedding")
# the setting quality_compared_with was called quality_reference, the name a baseline's quality rows keep
_RENAMED = {"quality_reference": "quality_compared_with"}
_OLD_NAMES = {old: (str | None, None) for old in _RENAMED}
_WindowValues = as_written(WindowThresholds, "WindowValues", exclude=_NESTED, **_OLD_NAMES)
# the values at the top level or in a family's table (any value in any of them)
# [estimated_quality] also takes `threshold`, the short name of estimated_quality_threshold (the model's decision cut)
_EstimatedValues = as_written(WindowThresholds, "EstimatedValues", exclude=_NESTED, threshold=(_Share | None, None),
                              **_OLD_NAMES)
_FAMILIES = {family: (_WindowValues | None, None) for family in (DATA_QUALITY, SKEW, MODEL_QUALITY)}
_FAMILIES[ESTIMATED_QUALITY] = (_EstimatedValues | None, None)
_WindowModelSection = as_written(WindowThresholds, "WindowModelSection", exclude=_NESTED, **_FAMILIES, **_OLD_NAMES)
_WindowSection = as_written(
    WindowThresholds, "WindowSection", exclude=_NESTED, **_FAMILIES, **_OLD_NAMES,
    drift=(Any, None),  # read by DriftThresholds.from_mapping
    multivariate_drift=(MultivariateThresholds | None, None), embedding_drift=(EmbeddingThresholds | None, None),
    models=by_name(_WindowModelSection))


def _flatten(section: Any) -> dict[str, Any]:
    """The values a section sets: its families' tables, then its top level (which wins)."""
    values: dict[str, Any] = {}
    for family in (DATA_QUALITY, SKEW, MODEL_QUALITY, ESTIMATED_QUALITY):
        table = getattr(section, family)
        if table is not None:
            values.update(given(table))
    if "threshold" in values:
        values["estimated_quality_threshold"] = values.pop("threshold")
    top = given(section)
    values.update({k: v for k, v in top.items() if k in _WindowValues.model_fields})
    for old, new in _RENAMED.items():
        if old in values:
            value = values.pop(old)
            warnings.warn(f"the setting {old} is now called {new}: {old} = {value!r} is read as {new} (rename it; "
                          f"{old} is the baseline's record of where its quality rows came from)", FutureWarning,
                          stacklevel=2)
            values.setdefault(new, value)
    return values
