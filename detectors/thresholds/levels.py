"""The alarm levels of `evaluate_window` besides the drift rule's: data quality, skew, model quality (the latency
SLO, `LatencySLO`, is the `[latency]` table of `driftline.latency_slo`)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Mapping

from pydantic import Field, create_model

from driftline.detectors.thresholds.decision import DriftThresholds
from driftline.detectors.stats.multivariate import MultivariateThresholds
from driftline.detectors.thresholds.embeddings import EmbeddingThresholds
from driftline import defaults
from driftline.errors import UserError
from driftline.latency_slo import LatencySLO
from driftline.toml_sections import Section, given, parse_section
from driftline.vocabulary import (
    DATA_QUALITY,
    ESTIMATED_QUALITY,
    MODEL_QUALITY,
    QUALITY_VS_CALIBRATION,
    QUALITY_VS_TRAINING,
    SKEW,
)

__all__ = ["LatencySLO", "WindowThresholds"]


@dataclass(frozen=True)
class WindowThresholds:
    """Every alarm level of `evaluate_window` besides the latency SLO (defaults: `driftline.defaults`)."""

    drift: DriftThresholds = field(default_factory=DriftThresholds)
    multivariate: MultivariateThresholds = field(default_factory=MultivariateThresholds)
    embedding: EmbeddingThresholds = field(default_factory=EmbeddingThresholds)
    data_quality_min_rows: int = defaults.DATA_QUALITY_MIN_ROWS
    missing_rate_increase: float = defaults.MISSING_RATE_DELTA
    out_of_range_share: float = defaults.OUT_OF_RANGE_SHARE_MAX
    unseen_category_share: float = defaults.UNSEEN_CATEGORY_SHARE_MAX
    type_change_share: float = defaults.TYPE_CHANGE_SHARE_MAX
    missing_feature_share: float = defaults.MISSING_FEATURE_SHARE_MAX
    new_feature_share: float = defaults.NEW_FEATURE_SHARE_MAX
    skew_distribution_psi: float = defaults.SKEW_DISTRIBUTION_PSI
    parity_relative_tolerance: float = defaults.SKEW_PARITY_RELATIVE_TOLERANCE
    parity_mismatch_rate: float = defaults.SKEW_PARITY_MISMATCH_RATE
    parity_min_sample: int = defaults.SKEW_PARITY_MIN_SAMPLE
    quality_min_labels: int = defaults.QUALITY_MIN_LABELS
    quality_min_class_count: int = defaults.QUALITY_MIN_CLASS_COUNT
    quality_z: float = defaults.QUALITY_Z
    quality_reference: str = defaults.QUALITY_REFERENCE
    quality_max_drop: float = defaults.QUALITY_MAX_DROP
    quality_max_error_increase: float = defaults.QUALITY_MAX_ERROR_INCREASE
    # read by the evaluation (driftline.scheduler.evaluation), which pools labels before calling model_quality
    quality_pool_min_labels: int = defaults.QUALITY_POOL_MIN_LABELS
    quality_pool_max_windows: int = defaults.QUALITY_POOL_MAX_WINDOWS
    estimated_quality_z: float = defaults.ESTIMATED_QUALITY_Z
    estimated_quality_max_drop: float = defaults.ESTIMATED_QUALITY_MAX_DROP
    estimated_quality_max_error_increase: float = defaults.ESTIMATED_QUALITY_MAX_ERROR_INCREASE
    estimated_quality_min_rows: int = defaults.ESTIMATED_QUALITY_MIN_ROWS
    estimated_quality_max_outside_share: float = defaults.ESTIMATED_QUALITY_MAX_OUTSIDE_SHARE

    def __post_init__(self) -> None:
        if self.quality_reference not in (QUALITY_VS_CALIBRATION, QUALITY_VS_TRAINING):
            raise UserError(f"quality_reference must be {QUALITY_VS_CALIBRATION!r} or {QUALITY_VS_TRAINING!r}, "
                            f"got {self.quality_reference!r}")
        if self.quality_z < 0 or self.quality_min_class_count < 0 or self.quality_min_labels < 0:
            raise UserError("quality_z, quality_min_class_count and quality_min_labels must not be negative")
        if self.quality_pool_min_labels < 0 or self.quality_pool_max_windows < 0:
            raise UserError("quality_pool_min_labels and quality_pool_max_windows must not be negative")
        if min(self.estimated_quality_z, self.estimated_quality_max_drop, self.estimated_quality_max_error_increase,
               self.estimated_quality_min_rows, self.estimated_quality_max_outside_share) < 0:
            raise UserError("the estimated_quality_* thresholds must not be negative")

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None, model: str | None = None) -> "WindowThresholds":
        """From a config dict: ``drift`` (a `DriftThresholds` section), ``multivariate_drift``
        (`MultivariateThresholds`' fields), the other fields at the top level or in
        ``data_quality`` / ``skew`` / ``model_quality`` sections, and ``models.NAME``
        overrides for `model`."""
        section = parse_section(_WindowSection, mapping, "[window thresholds]")
        drift = DriftThresholds.from_mapping(section.drift, model)
        multivariate = section.multivariate_drift or MultivariateThresholds()
        embedding = EmbeddingThresholds(**(given(section.embedding_drift)
                                           if section.embedding_drift is not None else {}))
        values = _flatten(section)
        if model is not None and model in section.models:
            values.update(_flatten(section.models[model]))
        return cls(**values, drift=drift, multivariate=multivariate, embedding=embedding)


# Field types of the dataclasses above, as the sections accept them (every key optional). Every number here
# is a count, a share, a rate, a latency or a z: never negative (nan fails the bound too); finer bounds
# (a share at most 1) are the dataclasses' own checks, run at start for every model named.
_NOT_NEGATIVE = Field(ge=0)
_TYPES = {"int": Annotated[int, _NOT_NEGATIVE] | None, "float": Annotated[float, _NOT_NEGATIVE] | None,
          "str": str | None, "float | None": Annotated[float, _NOT_NEGATIVE] | None}


def _values(cls: type, name: str) -> type[Section]:
    """A section holding any of `cls`'s fields (but a nested ``drift``), each optional."""
    fields: dict[str, Any] = {f.name: (_TYPES[str(f.type)], None) for f in dataclasses.fields(cls)
                              if f.name not in ("drift", "multivariate", "embedding")}
    return create_model(name, __base__=Section, **fields)


if TYPE_CHECKING:  # built at run time from the dataclasses' fields; a type checker sees plain sections
    _WindowValues = Section
    _EmbeddingSection = Section
else:
    _WindowValues = _values(WindowThresholds, "WindowValues")
    _EmbeddingSection = _values(EmbeddingThresholds, "EmbeddingSection")


class _WindowModelSection(_WindowValues):
    """The values at the top level or in a family's table (as today, any value in any of them)."""

    data_quality: _WindowValues | None = None
    skew: _WindowValues | None = None
    model_quality: _WindowValues | None = None
    estimated_quality: _WindowValues | None = None


class _WindowSection(_WindowModelSection):
    drift: Any = None  # read by DriftThresholds.from_mapping
    multivariate_drift: MultivariateThresholds | None = None
    embedding_drift: _EmbeddingSection | None = None
    models: dict[str, _WindowModelSection] = {}


def _flatten(section: _WindowModelSection) -> dict[str, Any]:
    """The values a section sets: its families' tables, then its top level (which wins)."""
    values: dict[str, Any] = {}
    for family in (DATA_QUALITY, SKEW, MODEL_QUALITY, ESTIMATED_QUALITY):
        table = getattr(section, family)
        if table is not None:
            values.update(given(table))
    top = given(section)
    values.update({k: v for k, v in top.items() if k in _WindowValues.model_fields})
    return values
