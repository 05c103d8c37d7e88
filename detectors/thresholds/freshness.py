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

from dataclasses import dataclass, field
from typing import Annotated, Any, Mapping

from pydantic import Field

from driftline import defaults
from driftline.toml_sections import Section, given, parse_section

__all__ = ["FRESHNESS", "FreshnessThresholds"]

FRESHNESS = "freshness"

_Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
_Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]


class _FreshnessValues(Section):
    max_age: dict[str, _Seconds] | None = None
    stale_share: _Share | None = None


class _FreshnessSection(_FreshnessValues):
    models: dict[str, _FreshnessValues] = {}


@dataclass(frozen=True)
class FreshnessThresholds:
    """Feature name -> maximum age in seconds (none: the check is off), and the stale share that breaches."""

    max_age_s: Mapping[str, float] = field(default_factory=dict)
    stale_share: float = defaults.STALE_FEATURE_SHARE_MAX

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None, model: str | None = None) -> "FreshnessThresholds":
        """From a `[freshness]` table; `[freshness.models.NAME]` overrides for `model`."""
        section = parse_section(_FreshnessSection, mapping, "[freshness]")
        values = {k: v for k, v in given(section).items() if k != "models"}
        if model is not None and model in section.models:
            values.update(given(section.models[model]))
        return cls(max_age_s=dict(values.get("max_age") or {}),
                   stale_share=values.get("stale_share", defaults.STALE_FEATURE_SHARE_MAX))
