"""What a window is judged by: the thresholds of the --config TOML, parsed once per configuration.

`EvaluationConfig` holds the detectors' sections ([drift], [data_quality], [skew], [model_quality],
[estimated_quality], [multivariate_drift], [embedding_drift], [latency], [freshness]), [segments] and the
sequential paging policy's stated rate (`PagingSettings`). The rate is written where users page,
``[alerts] false_pages_per_model_per_month`` (and per model in ``[alerts.models."M"]``), and the setting
``false_pages_per_model_per_month`` (DRIFTLINE_FALSE_PAGES_PER_MODEL_PER_MONTH) beats the file's global
value; it is parsed here, by the stage that pages on it, under that one name. The alert rules leave the key
to this parser.

Parsed once: a configuration's `version` is a digest of its content, and each model's parsed thresholds,
SLO, freshness limits and paging policy are cached under it, so judging a window looks them up rather than
reading the TOML tables again; a changed configuration has another version and is parsed anew.
"""
from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated, Any, Callable, Mapping, TypeVar

from pydantic import Field

from driftline import defaults, vocabulary
from driftline.config import Settings
from driftline.detectors.families.window import LatencySLO, WindowThresholds
from driftline.detectors.thresholds.freshness import FRESHNESS, FreshnessThresholds
from driftline.detectors.thresholds.paging import PagingPolicy
from driftline.segments import SegmentSpec
from driftline.toml_sections import Section, Table, parse_section

__all__ = ["EVALUATION_SECTIONS", "PAGING_KEY", "EvaluationConfig", "PagingSettings"]

# the TOML sections the window detectors read
EVALUATION_SECTIONS = ("drift", vocabulary.DATA_QUALITY, vocabulary.SKEW, vocabulary.MODEL_QUALITY,
                       vocabulary.ESTIMATED_QUALITY, vocabulary.LATENCY, vocabulary.MULTIVARIATE_DRIFT,
                       vocabulary.EMBEDDING_DRIFT, FRESHNESS)
PAGING_KEY = "false_pages_per_model_per_month"
PAGING_SECTION = "alerts"
# parsed (configuration version, what, model) entries kept: a few per model of a deployment
_PARSED_ENTRIES = 4_096

# expected false pages a month of one model version: a positive, finite rate
_Rate = Annotated[float, Field(gt=0, allow_inf_nan=False)]
P = TypeVar("P")


class _ModelPagingWritten(Section):
    false_pages_per_model_per_month: _Rate | None = None


class _PagingWritten(Section):
    """The paging keys of [alerts] as written (its other keys are the alert rules')."""

    false_pages_per_model_per_month: _Rate | None = None
    models: dict[str, _ModelPagingWritten] = {}


class PagingSettings(Table):
    """The sequential policy's stated false-page rate: for every model, and per model."""

    WHERE = "[alerts]"

    false_pages_per_model_per_month: _Rate = defaults.ALERT_FALSE_PAGES_PER_MODEL_PER_MONTH
    models: dict[str, _Rate] = {}  # model -> its own rate

    def rate_for(self, model: str | None) -> float:
        """Expected false pages a month of one version of `model`."""
        return self.models.get(model, self.false_pages_per_model_per_month) if model is not None \
            else self.false_pages_per_model_per_month

    @classmethod
    def from_mapping(cls, alerts: Mapping[str, Any] | None, override: float | None = None) -> PagingSettings:
        """The rates of an [alerts] table (its other keys are left to the alert rules); `override` (the setting)
        beats the table's global rate, never a model's own."""
        written = parse_section(_PagingWritten, _paging_keys(alerts), cls.WHERE)
        rate = override if override is not None else written.false_pages_per_model_per_month
        return cls(**({} if rate is None else {PAGING_KEY: rate}),
                   models={model: table.false_pages_per_model_per_month for model, table in written.models.items()
                           if table.false_pages_per_model_per_month is not None})

    @classmethod
    def from_settings(cls, settings: Settings) -> PagingSettings:
        return cls.from_mapping(settings.section(PAGING_SECTION), settings.false_pages_per_model_per_month)


def _paging_keys(alerts: Mapping[str, Any] | None) -> dict[str, Any]:
    """Only the paging keys of [alerts] (a malformed table is the alert rules' to report)."""
    if not isinstance(alerts, Mapping):
        return {}
    picked: dict[str, Any] = {PAGING_KEY: alerts[PAGING_KEY]} if PAGING_KEY in alerts else {}
    models = alerts.get("models")
    if isinstance(models, Mapping):
        per_model = {str(name): {PAGING_KEY: table[PAGING_KEY]} for name, table in models.items()
                     if isinstance(table, Mapping) and PAGING_KEY in table}
        if per_model:
            picked["models"] = per_model
    return picked


_parsed: OrderedDict[tuple[str, str, str | None], Any] = OrderedDict()


def _cached(key: tuple[str, str, str | None], parse: Callable[[], P]) -> P:
    """`parse()` once per key (every value cached is immutable: frozen tables and dataclasses)."""
    found = _parsed.get(key)
    if found is None:
        found = _parsed[key] = parse()
        if len(_parsed) > _PARSED_ENTRIES:
            _parsed.popitem(last=False)
    else:
        _parsed.move_to_end(key)
    return found


@dataclass(frozen=True)
class EvaluationConfig:
    """Thresholds from the --config TOML (module docstring); build it with `from_settings`."""

    window_seconds: int
    sections: Mapping[str, Mapping[str, Any]]
    segments: SegmentSpec = SegmentSpec()  # [segments]: each window is also judged segment by segment
    paging: PagingSettings = field(default_factory=PagingSettings)

    @classmethod
    def from_settings(cls, settings: Settings) -> EvaluationConfig:
        config = cls(settings.window_seconds, {name: settings.section(name) for name in EVALUATION_SECTIONS},
                     SegmentSpec.from_settings(settings), PagingSettings.from_settings(settings))
        # a bad key or value fails at start-up, not at the first window (of that model)
        for model in (None, *sorted(config.models_named())):
            config.thresholds_for(model)
            config.slo_for(model)
            config.freshness_for(model)
        return config

    @cached_property
    def version(self) -> str:
        """A digest of the configuration's content: equal configurations share their parsed thresholds."""
        content = {"window_seconds": self.window_seconds, "sections": self.sections,
                   "segments": self.segments.model_dump(), "paging": self.paging.model_dump()}
        return hashlib.sha256(json.dumps(content, sort_keys=True, default=repr).encode()).hexdigest()

    def models_named(self) -> set[str]:
        """The models with a table of their own in any section ([drift.models."credit-default"], ...)."""
        named: set[str] = set(self.paging.models)
        for section in self.sections.values():
            models = section.get("models") if isinstance(section, Mapping) else None
            if isinstance(models, Mapping):  # anything else is refused by the section's own parser
                named.update(map(str, models))
        return named

    def thresholds_for(self, model: str | None) -> WindowThresholds:
        return _cached((self.version, "thresholds", model), lambda: self._parse_thresholds(model))

    def freshness_for(self, model: str | None) -> FreshnessThresholds:
        return _cached((self.version, FRESHNESS, model),
                       lambda: FreshnessThresholds.from_mapping(self.sections.get(FRESHNESS, {}), model=model))

    def slo_for(self, model: str | None) -> LatencySLO:
        return _cached((self.version, vocabulary.LATENCY, model),
                       lambda: LatencySLO.from_mapping(self.sections.get(vocabulary.LATENCY, {}), model=model))

    def paging_for(self, model: str) -> PagingPolicy:
        return _cached((self.version, "paging", model), lambda: PagingPolicy(
            false_pages_per_model_per_month=self.paging.rate_for(model), window_seconds=self.window_seconds))

    def _parse_thresholds(self, model: str | None) -> WindowThresholds:
        # Per-model overrides are written inside each section ([skew.models."credit-default"]);
        # WindowThresholds takes them as one top-level `models` table of sections.
        mapping: dict[str, Any] = {"models": {}}
        for name in ("drift", vocabulary.DATA_QUALITY, vocabulary.SKEW, vocabulary.MODEL_QUALITY,
                     vocabulary.ESTIMATED_QUALITY):
            section = dict(self.sections.get(name, {}))
            if name != "drift":  # DriftThresholds reads its own [drift.models.*]
                for model_name, overrides in (section.pop("models", {}) or {}).items():
                    mapping["models"].setdefault(model_name, {})[name] = dict(overrides)
            mapping[name] = section
        # one table for every model: the multivariate alarm levels are statistical, not per model
        mapping[vocabulary.MULTIVARIATE_DRIFT] = dict(self.sections.get(vocabulary.MULTIVARIATE_DRIFT, {}))
        mapping[vocabulary.EMBEDDING_DRIFT] = dict(self.sections.get(vocabulary.EMBEDDING_DRIFT, {}))
        return WindowThresholds.from_mapping(mapping, model=model)
