"""The `[latency]` table: a model's latency objectives per latency part, its error budget and its capacity.

One pydantic model with its bounds (`driftline.toml_sections.Table`), read by the latency detector family and shown by
the dashboard; it lives with the settings so that reading it imports no detector. The top-level ``p50_ms`` /
``p95_ms`` / ``p99_ms`` are the objectives of ``total``; ``[latency.parts.NAME]`` sets any other part's (a
generated answer's ``ttft`` and ``tpot`` have default p99 objectives); ``[latency.models.NAME]`` overrides any of
it for one model. Defaults: `driftline.defaults` ("Latency SLO") and `driftline.serving_defaults` ("Generated
answers").
"""
from __future__ import annotations

from typing import Annotated, Any, Mapping

from pydantic import Field, field_validator

from driftline import defaults
from driftline.names import is_safe_name
from driftline.toml_sections import Table, as_written, by_name, given, parse_section
from driftline.vocabulary import LATENCY_TOTAL, LATENCY_TPOT, LATENCY_TTFT, P50_MS, P95_MS, P99_MS

__all__ = ["LatencySLO", "PartObjectives"]

_Ms = Annotated[float, Field(ge=0, allow_inf_nan=False)]
_Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
# the quantile each objective holds, by its result's metric name
QUANTILES = {P50_MS: 0.5, P95_MS: 0.95, P99_MS: 0.99}


class PartObjectives(Table):
    """The objectives of one latency part, in milliseconds; None: that quantile is reported, never breached."""

    WHERE = "[latency.parts.NAME]"

    p50_ms: _Ms | None = None
    p95_ms: _Ms | None = None
    p99_ms: _Ms | None = None

    def by_metric(self) -> dict[str, float | None]:
        return {P50_MS: self.p50_ms, P95_MS: self.p95_ms, P99_MS: self.p99_ms}


def _default_parts() -> dict[str, PartObjectives]:
    return {LATENCY_TTFT: PartObjectives(p99_ms=defaults.LATENCY_SLO_TTFT_P99_MS),
            LATENCY_TPOT: PartObjectives(p99_ms=defaults.LATENCY_SLO_TPOT_P99_MS)}


class LatencySLO(Table):
    """A model's latency objectives (ms) and error budget; None switches a check off.

    ``max_qps`` / ``max_concurrency`` (default None: reported, never breached) cap throughput and in-flight
    requests when a deployment has a known capacity; ``min_tokens_per_second`` (default None: reported only) is a
    floor under the window's median decode rate of generated answers (`TOKENS_PER_SECOND_P50`).
    """

    WHERE = "[latency]"

    p50_ms: _Ms | None = defaults.LATENCY_SLO_P50_MS
    p95_ms: _Ms | None = defaults.LATENCY_SLO_P95_MS
    p99_ms: _Ms | None = defaults.LATENCY_SLO_P99_MS
    error_rate: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = defaults.ERROR_RATE_MAX
    max_qps: _Positive | None = None
    max_concurrency: _Positive | None = None
    min_tokens_per_second: _Positive | None = None
    min_events: Annotated[int, Field(ge=0)] = defaults.LATENCY_MIN_EVENTS
    parts: dict[str, PartObjectives] = Field(default_factory=_default_parts)

    @field_validator("parts")
    @classmethod
    def _named_parts(cls, parts: dict[str, PartObjectives]) -> dict[str, PartObjectives]:
        if LATENCY_TOTAL in parts:
            raise ValueError(f"{LATENCY_TOTAL!r}'s objectives are [latency]'s own p50_ms, p95_ms and p99_ms")
        bad = [name for name in parts if not is_safe_name(name)]
        if bad:
            raise ValueError(f"part name {bad[0][:64]!r} must be letters, digits, '.', '_' or '-'")
        if len(parts) > defaults.LATENCY_MAX_PARTS:
            raise ValueError(f"{len(parts)} parts, above the limit of {defaults.LATENCY_MAX_PARTS}")
        return parts

    def objectives(self, part: str) -> dict[str, float | None]:
        """metric (p50_ms, p95_ms, p99_ms) -> the objective `part` is held to (None: reported only)."""
        if part == LATENCY_TOTAL:
            return {P50_MS: self.p50_ms, P95_MS: self.p95_ms, P99_MS: self.p99_ms}
        table = self.parts.get(part)
        return table.by_metric() if table is not None else dict.fromkeys(QUANTILES)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None, model: str | None = None) -> "LatencySLO":
        """From a ``[latency]`` TOML section; ``[latency.models.NAME]`` overrides for `model`, key by key and
        part by part (a part's table sets only the quantiles it names; the others keep their defaults)."""
        section = parse_section(_LatencySection, mapping, cls.WHERE)
        tables = [section] + ([section.models[model]] if model is not None and model in section.models else [])
        values: dict[str, Any] = {}
        parts = {name: given(objectives) for name, objectives in _default_parts().items()}
        for table in tables:
            values.update({k: v for k, v in given(table).items() if k not in ("models", "parts")})
            for name, objectives in (table.parts or {}).items():
                parts.setdefault(name, {}).update(given(objectives))
        values["parts"] = {name: PartObjectives(**objectives) for name, objectives in parts.items()}
        return cls(**values)


# A `[latency]` (or `[latency.models.NAME]`) table as written: every key optional, each with its bound, so an
# error names its path (`models.chat.p99_ms`); the SLO made from them checks the parts' names.
_LatencyValues = as_written(LatencySLO, "_LatencyValues")
_LatencySection = as_written(LatencySLO, "_LatencySection", models=by_name(_LatencyValues))
