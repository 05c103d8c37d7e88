"""The alarm levels of `evaluate_window` besides the drift rule's: data quality, skew, model quality, latency SLO."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from detectors.decision import DriftThresholds
from driftline import defaults
from driftline.errors import UserError
from driftline.vocabulary import (
    DATA_QUALITY,
    MODEL_QUALITY,
    QUALITY_VS_CALIBRATION,
    QUALITY_VS_TRAINING,
    SKEW,
)

__all__ = ["LatencySLO", "WindowThresholds"]


@dataclass(frozen=True)
class LatencySLO:
    """A model's latency objectives (ms) and error budget; None switches a check off.

    ``max_qps`` / ``max_concurrency`` (default None: reported, never breached) cap
    throughput and in-flight requests when a deployment has a known capacity.
    """

    p50_ms: float | None = defaults.LATENCY_SLO_P50_MS
    p95_ms: float | None = defaults.LATENCY_SLO_P95_MS
    p99_ms: float | None = defaults.LATENCY_SLO_P99_MS
    error_rate: float | None = defaults.ERROR_RATE_MAX
    max_qps: float | None = None
    max_concurrency: float | None = None
    min_events: int = defaults.LATENCY_MIN_EVENTS

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None, model: str | None = None) -> "LatencySLO":
        """From a ``[latency]`` TOML section; ``[latency.models.NAME]`` overrides for `model`."""
        mapping = dict(mapping or {})
        models = mapping.pop("models", {}) or {}
        if model is not None and model in models:
            mapping.update(models[model])
        return _from_mapping(cls, mapping, "[latency]")


@dataclass(frozen=True)
class WindowThresholds:
    """Every alarm level of `evaluate_window` besides the latency SLO (defaults: `driftline.defaults`)."""

    drift: DriftThresholds = field(default_factory=DriftThresholds)
    data_quality_min_rows: int = defaults.DATA_QUALITY_MIN_ROWS
    missing_rate_increase: float = defaults.MISSING_RATE_INCREASE
    out_of_range_share: float = defaults.OUT_OF_RANGE_SHARE
    unseen_category_share: float = defaults.UNSEEN_CATEGORY_SHARE
    type_change_share: float = defaults.TYPE_CHANGE_SHARE
    missing_feature_share: float = defaults.MISSING_FEATURE_SHARE
    new_feature_share: float = defaults.NEW_FEATURE_SHARE
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
    # read by the evaluation (driftline.evaluation), which pools labels before calling model_quality
    quality_pool_min_labels: int = defaults.QUALITY_POOL_MIN_LABELS
    quality_pool_max_windows: int = defaults.QUALITY_POOL_MAX_WINDOWS

    def __post_init__(self) -> None:
        if self.quality_reference not in (QUALITY_VS_CALIBRATION, QUALITY_VS_TRAINING):
            raise UserError(f"quality_reference must be {QUALITY_VS_CALIBRATION!r} or {QUALITY_VS_TRAINING!r}, "
                            f"got {self.quality_reference!r}")
        if self.quality_z < 0 or self.quality_min_class_count < 0 or self.quality_min_labels < 0:
            raise UserError("quality_z, quality_min_class_count and quality_min_labels must not be negative")
        if self.quality_pool_min_labels < 0 or self.quality_pool_max_windows < 0:
            raise UserError("quality_pool_min_labels and quality_pool_max_windows must not be negative")

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None, model: str | None = None) -> "WindowThresholds":
        """From a config dict: ``drift`` (a `DriftThresholds` section), the other fields at
        the top level or in ``data_quality`` / ``skew`` / ``model_quality`` sections, and
        ``models.NAME`` overrides for `model`."""
        mapping = dict(mapping or {})
        models = mapping.pop("models", {}) or {}
        drift = DriftThresholds.from_mapping(mapping.pop("drift", None), model)
        flat: dict[str, Any] = {}
        for section in (DATA_QUALITY, SKEW, MODEL_QUALITY):
            flat.update(mapping.pop(section, {}) or {})
        flat.update(mapping)
        if model is not None and model in models:
            overrides = dict(models[model])
            for section in (DATA_QUALITY, SKEW, MODEL_QUALITY):
                flat.update(overrides.pop(section, {}) or {})
            flat.update(overrides)
        return _from_mapping(cls, {**flat, "drift": drift}, "[window thresholds]")


def _from_mapping(cls, mapping: Mapping[str, Any], where: str):
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(mapping) - known)
    if unknown:
        raise UserError(f"unknown key(s) {', '.join(unknown)} in {where}; known: {', '.join(sorted(known))}")
    return cls(**mapping)
