"""The TOML tables that several layers read, each one pydantic model with its bounds: `[rollouts]` (the worker,
the scheduler and the rollout detectors) and `[multivariate_drift]` (the detectors, streaming and batch).

They live with the settings, below the detectors, so reading a table never imports a detector. Built from a
TOML table (`from_mapping`) or in code (`RolloutPolicy(windows=3)`), a bad value is a `UserError` naming the
table and the key either way; defaults come from `driftline.defaults`.
"""
from __future__ import annotations

from typing import Annotated, Any, Mapping

from pydantic import Field, field_validator, model_validator

from driftline import defaults
from driftline.toml_sections import Table, as_written, by_name, given, parse_section
from driftline.vocabulary import ROLLOUT_JUDGED

__all__ = ["MultivariateThresholds", "RolloutPolicy"]

_AtLeastOne = Annotated[int, Field(ge=1)]
_NotNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
_Probability = Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)]


class RolloutPolicy(Table):
    """How rollouts are judged and moved on (defaults: `driftline.defaults`, "Rollouts")."""

    WHERE = "[rollouts]"

    windows: _AtLeastOne = defaults.ROLLOUT_WINDOWS
    min_events: _AtLeastOne = defaults.ROLLOUT_MIN_EVENTS
    min_pairs: _AtLeastOne = defaults.ROLLOUT_MIN_PAIRS
    min_labels: _AtLeastOne = defaults.ROLLOUT_MIN_LABELS
    max_error_rate_increase: _NotNegative = defaults.ROLLOUT_MAX_ERROR_RATE_INCREASE
    max_p99_increase: _NotNegative = defaults.ROLLOUT_MAX_P99_INCREASE
    p99_tolerance_ms: _NotNegative = defaults.ROLLOUT_P99_TOLERANCE_MS
    max_quality_drop: _NotNegative = defaults.ROLLOUT_MAX_QUALITY_DROP
    max_error_increase: _NotNegative = defaults.ROLLOUT_MAX_ERROR_INCREASE
    max_flip_rate: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = defaults.ROLLOUT_MAX_FLIP_RATE
    critical: tuple[str, ...] = defaults.ROLLOUT_CRITICAL
    alpha: _Probability = defaults.ROLLOUT_ALPHA
    tau: Annotated[float, Field(gt=0, allow_inf_nan=False)] = defaults.ROLLOUT_TAU
    canary_steps: tuple[int, ...] = defaults.ROLLOUT_CANARY_STEPS
    auto_promote: bool = defaults.ROLLOUT_AUTO_PROMOTE
    auto_rollback: bool = defaults.ROLLOUT_AUTO_ROLLBACK
    decision_threshold: float = defaults.ROLLOUT_DECISION_THRESHOLD
    top_differences: Annotated[int, Field(ge=0)] = defaults.ROLLOUT_TOP_DIFFERENCES

    @field_validator("critical", "canary_steps", mode="before")
    @classmethod
    def _listed(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value  # TOML arrays are lists

    @field_validator("critical")
    @classmethod
    def _judged(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [m for m in value if m not in ROLLOUT_JUDGED]
        if unknown:
            raise ValueError(f"unknown metric {', '.join(map(repr, unknown))}; expected some of "
                             f"{', '.join(ROLLOUT_JUDGED)}")
        return value

    @field_validator("canary_steps")
    @classmethod
    def _increasing(cls, steps: tuple[int, ...]) -> tuple[int, ...]:
        if not steps or any(not 0 < w <= 100 for w in steps) or any(b <= a for a, b in zip(steps, steps[1:])):
            raise ValueError("must be increasing weights in (0, 100]")
        return steps

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None, model: str | None = None) -> "RolloutPolicy":
        """From the ``[rollouts]`` TOML section; ``[rollouts.models.NAME]`` overrides for `model`."""
        section = parse_section(_RolloutSection, mapping, cls.WHERE)
        values = {k: v for k, v in given(section).items() if k != "models"}
        if model is not None and model in section.models:
            values.update(given(section.models[model]))
        return parse_section(cls, values, cls.WHERE)


# A [rollouts] table as written (every key optional, bounded), and the section that holds the per-model ones.
_RolloutValues = as_written(RolloutPolicy, "_RolloutValues")
_RolloutSection = as_written(RolloutPolicy, "_RolloutSection", models=by_name(_RolloutValues))


class MultivariateThresholds(Table):
    """The alarm levels and sample bounds of both multivariate detectors, the ``[multivariate_drift]`` table
    (defaults: `driftline.defaults`)."""

    WHERE = "[multivariate_drift]"

    pca_error_sigmas: _NotNegative = defaults.PCA_ERROR_Z
    domain_classifier_auc: Annotated[float, Field(ge=0.5, lt=1, allow_inf_nan=False)] = defaults.DOMAIN_CLASSIFIER_AUC_MIN
    domain_classifier_z: _NotNegative = defaults.DOMAIN_CLASSIFIER_Z
    min_rows: _AtLeastOne = defaults.MULTIVARIATE_MIN_ROWS
    max_rows: _AtLeastOne = defaults.DOMAIN_CLASSIFIER_MAX_ROWS
    pca_max_rows: _AtLeastOne = defaults.PCA_WINDOW_MAX_ROWS
    folds: Annotated[int, Field(ge=2)] = defaults.DOMAIN_CLASSIFIER_FOLDS
    trees: _AtLeastOne = defaults.DOMAIN_CLASSIFIER_TREES
    leaves: Annotated[int, Field(ge=2)] = defaults.DOMAIN_CLASSIFIER_LEAVES
    learning_rate: Annotated[float, Field(gt=0, allow_inf_nan=False)] = defaults.DOMAIN_CLASSIFIER_LEARNING_RATE
    top_features: Annotated[int, Field(ge=0)] = defaults.MULTIVARIATE_TOP_FEATURES

    @model_validator(mode="after")
    def _enough_rows_for_the_folds(self) -> "MultivariateThresholds":
        if self.min_rows < self.folds:
            raise ValueError(f"min_rows ({self.min_rows}) must be at least folds ({self.folds})")
        return self
