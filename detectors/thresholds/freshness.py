"""The `[freshness]` section: each feature's maximum age, and the share of stale requests that breaches.

```toml
[freshness]
max_age = {credit_score = 900, annual_income = 86400}   # seconds; a feature not listed is not checked
stale_share = 0.01                                       # default: defaults.STALE_FEATURE_SHARE_MAX

[freshness.models."credit-default"]
max_age = {credit_score = 300}                           # replaces the table's max_age for this model
```
Off by default: without a `max_age` for a feature there is no `stale_features` result for it.
"""
from __future__ import annotations

from typing import Annotated, Any, Mapping

from pydantic import Field

from driftline import defaults
from driftline.toml_sections import Table, as_written, by_name, given, parse_section

__all__ = ["FRESHNESS", "FreshnessThresholds"]

FRESHNESS = "freshness"

_Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
_Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]


class FreshnessThresholds(Table):
    """Feature name -> maximum age in seconds (none: the check is off), and the stale share that breaches."""

    WHERE = "[freshness]"

    max_age: dict[str, _Seconds] = {}
    stale_share: _Share = defaults.STALE_FEATURE_SHARE_MAX

    @property
    def max_age_s(self) -> Mapping[str, float]:
        return self.max_age

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None, model: str | None = None) -> "FreshnessThresholds":
        """From a `[freshness]` table; `[freshness.models.NAME]` overrides for `model`."""
        section = parse_section(_FreshnessSection, mapping, cls.WHERE)
        values = {k: v for k, v in given(section).items() if k != "models"}
        if model is not None and model in section.models:
            values.update(given(section.models[model]))
        return cls(**values)


_FreshnessValues = as_written(FreshnessThresholds, "_FreshnessValues")
_FreshnessSection = as_written(FreshnessThresholds, "_FreshnessSection", models=by_name(_FreshnessValues))
