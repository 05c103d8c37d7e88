"""Alert rules: what fires, how soon, how loud, who hears it; from the `[alerts]` TOML section.

Semantics follow Prometheus Alertmanager, with evaluated windows as the clock:

- a rule per detector family, with a severity (info < warning < error < critical);
- ``policy``: how a window's results become a page. ``"sequential"`` (the default for the
  drift families, `vocabulary.SEQUENTIAL_FAMILIES`) fires when the evidence accumulated over
  windows crosses the line that ``false_pages_per_model_per_month`` sets
  (`driftline.detectors.families.evidence`); ``"for_windows"`` (every other family's):
- ``for_windows`` K: an alert is *pending* until its (detector, feature) has breached
  K consecutive windows, then *firing*;
- ``resolve_after_windows`` M: a firing alert resolves only after M clean windows in
  a row (hysteresis, so a metric hovering at its threshold does not flap);
- ``group``: alerts of one model version with the same group name are announced
  together (ten drifted features, one message); the default group is the detector;
- ``repeat_interval``: a group still firing is announced again this often;
- inhibition: while a *source* alert fires, alerts of the *target* detectors of the
  same model version are not announced (the dataset-level alert lists their features);
- channels: the lowest severity each configured channel receives.

Everything has a documented default in `driftline.defaults`; the TOML overrides it
globally, per detector, per model, and per model and detector (docs/alerts.md).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterable, Mapping

from driftline import defaults, vocabulary
from driftline.errors import UserError
from driftline.toml_sections import Section, did_you_mean, parse_section

from driftline.alerts.endpoints import ENDPOINT_SETTINGS, NOTIFY_CHANNELS, RETRAIN, configured_channels
from driftline.alerts.times import parse_duration

# Rules, inhibit rules and the retraining policy may only name what a detector emits.
# the families an alert can belong to: the window detectors', and the rollout analysis' own
DETECTORS = vocabulary.ALERT_FAMILIES
SEVERITIES = tuple(defaults.ALERT_SEVERITIES)



# The tables of [alerts] and the keys each may hold. Values are checked below, where
# each kind of value has its own message (a severity, a duration, a whole number).
class _Defaults(Section):
    """What a rule may set at the top of [alerts] or of a model's table."""

    severity: Any = None
    for_windows: Any = None
    resolve_after_windows: Any = None
    repeat_interval: Any = None
    enabled: Any = None
    policy: Any = None


class _RuleSection(_Defaults):
    """[alerts.detectors.NAME]: one detector's rule."""

    group: Any = None


class _ModelSection(_Defaults):
    detectors: Any = None
    false_pages_per_model_per_month: Any = None


class _AlertsSection(_Defaults):
    detectors: Any = None
    false_pages_per_model_per_month: Any = None
    models: Any = None
    channels: Any = None
    inhibit: Any = None
    delivery: Any = None
    retrain: Any = None


class _InhibitSection(Section):
    source: Any = None
    targets: Any = None


class _DeliverySection(Section):
    timeout: Any = None
    lease: Any = None
    backoff_initial: Any = None
    backoff_max: Any = None
    max_age: Any = None
    max_attempts: Any = None


class _RetrainSection(Section):
    enabled: Any = None
    windows: Any = None
    features: Any = None
    detectors: Any = None
    quality_drop: Any = None
    quality_metrics: Any = None
    cooldown: Any = None
    rollout: Any = None


_RULE_KEYS = frozenset(_RuleSection.model_fields)
RETRAIN_ROLLOUTS = vocabulary.RETRAIN_ROLLOUTS
SEQUENTIAL = "sequential"
FOR_WINDOWS = "for_windows"
POLICIES = (SEQUENTIAL, FOR_WINDOWS)


def severity_rank(severity: str) -> int:
    """Position in info < warning < error < critical (unknown severities rank as warning)."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else SEVERITIES.index("warning")


@dataclass(frozen=True)
class AlertRule:
    detector: str
    severity: str = "warning"
    for_windows: int = defaults.ALERT_FOR_WINDOWS
    resolve_after_windows: int = defaults.ALERT_RESOLVE_AFTER_WINDOWS
    repeat_interval: timedelta = timedelta(seconds=defaults.ALERT_REPEAT_INTERVAL_SECONDS)
    group: str = ""  # "" means: the detector's name
    enabled: bool = True
    policy: str = FOR_WINDOWS

    @property
    def group_name(self) -> str:
        return self.group or self.detector

    @property
    def sequential(self) -> bool:
        return self.policy == SEQUENTIAL

    @property
    def windows_to_fire(self) -> int:
        """K: a sequential rule fires on the window whose evidence crossed the line."""
        return 1 if self.sequential else self.for_windows


@dataclass(frozen=True)
class InhibitRule:
    """While an alert of `source` fires, alerts of `targets` (same model and version) stay quiet."""

    source: str
    targets: tuple[str, ...]


@dataclass(frozen=True)
class DeliveryPolicy:
    """How the outbox retries (see driftline.alerts.delivery)."""

    timeout: timedelta = timedelta(seconds=defaults.ALERT_HTTP_TIMEOUT_SECONDS)
    lease: timedelta = timedelta(seconds=defaults.ALERT_DELIVERY_LEASE_SECONDS)
    backoff_initial: timedelta = timedelta(seconds=defaults.ALERT_BACKOFF_INITIAL_SECONDS)
    backoff_max: timedelta = timedelta(seconds=defaults.ALERT_BACKOFF_MAX_SECONDS)
    max_age: timedelta = timedelta(seconds=defaults.ALERT_DELIVERY_MAX_AGE_SECONDS)
    max_attempts: int = defaults.ALERT_DELIVERY_MAX_ATTEMPTS

    def __post_init__(self) -> None:
        if self.lease <= self.timeout:
            raise UserError(f"[alerts.delivery] lease ({self.lease}) must be longer than timeout ({self.timeout}), "
                            "or a slow delivery would have its row claimed twice")
        if self.max_attempts < 1:
            raise UserError("[alerts.delivery] max_attempts must be at least 1")


@dataclass(frozen=True)
class RetrainPolicy:
    """When to ask for a retrain (see driftline.alerts.retraining).

    Fires when, in each of the last `windows` evaluated windows of a model version, a
    `detectors` result breached on one of `features` (any feature when empty; the
    window-level dataset_drift result counts only when `features` is empty), or when a
    model-quality metric (any, or `quality_metrics`) dropped by at least `quality_drop`
    against the detector's reference, beyond its noise margin. At most one request per
    model per `cooldown`. `rollout` says what the worker does with a retrained version that
    beat production: promote it, or enter it as a shadow or canary rollout plan.
    """

    enabled: bool = True
    windows: int = defaults.RETRAIN_DRIFT_WINDOWS
    features: tuple[str, ...] = ()
    detectors: tuple[str, ...] = (vocabulary.DATA_DRIFT, vocabulary.DATASET_DRIFT)
    quality_drop: float | None = defaults.RETRAIN_QUALITY_DROP
    quality_metrics: tuple[str, ...] = ()
    cooldown: timedelta = timedelta(seconds=defaults.RETRAIN_COOLDOWN_SECONDS)
    rollout: str = defaults.RETRAIN_ROLLOUT

    def __post_init__(self) -> None:
        if self.rollout not in RETRAIN_ROLLOUTS:
            raise UserError(f"[alerts.retrain] rollout must be one of {', '.join(RETRAIN_ROLLOUTS)}, "
                            f"got {self.rollout!r}")
        if self.windows < 1:
            raise UserError("[alerts.retrain] windows must be at least 1")
        if self.quality_drop is not None and self.quality_drop < 0:
            raise UserError("[alerts.retrain] quality_drop cannot be negative")


def _default_rules() -> dict[str, AlertRule]:
    for name in defaults.ALERT_DETECTOR_DEFAULTS:
        _check_detector(name, "defaults.ALERT_DETECTOR_DEFAULTS")
    base = {**defaults.ALERT_DETECTOR_DEFAULTS, vocabulary.ROLLOUT: defaults.ALERT_ROLLOUT_DEFAULTS}
    return {d: AlertRule(detector=d, **{"policy": _default_policy(d), **_rule_fields(base.get(d, {}), f"defaults {d}")})
            for d in DETECTORS}


def _default_policy(detector: str) -> str:
    return defaults.ALERT_POLICY if detector in vocabulary.SEQUENTIAL_FAMILIES else FOR_WINDOWS


@dataclass(frozen=True)
class AlertRules:
    """All alerting configuration; build it with `load_rules` or `AlertRules.from_mapping`."""

    detectors: Mapping[str, AlertRule] = field(default_factory=_default_rules)
    # model -> detector -> rule, for models with overrides.
    models: Mapping[str, Mapping[str, AlertRule]] = field(default_factory=dict)
    inhibit: tuple[InhibitRule, ...] = tuple(InhibitRule(r["source"], tuple(r["targets"]))
                                             for r in defaults.ALERT_INHIBIT_RULES)
    # Configured channel -> lowest severity it receives. A channel without an endpoint is absent.
    channels: Mapping[str, str] = field(default_factory=lambda: dict(defaults.ALERT_CHANNEL_MIN_SEVERITY))
    dashboard_url: str = "http://127.0.0.1:8501"
    delivery: DeliveryPolicy = field(default_factory=DeliveryPolicy)
    retrain: RetrainPolicy = field(default_factory=RetrainPolicy)
    # the stated false-page rate of the sequential policy: globally, and per model
    false_pages_per_month: float = defaults.ALERT_FALSE_PAGES_PER_MODEL_PER_MONTH
    model_false_pages_per_month: Mapping[str, float] = field(default_factory=dict)

    def paging_rate(self, model: str) -> float:
        """Expected false pages a month of one version of `model` under the sequential policy."""
        return self.model_false_pages_per_month.get(model, self.false_pages_per_month)

    def rule_for(self, model: str, detector: str) -> AlertRule:
        per_model = self.models.get(model)
        if per_model is not None and detector in per_model:
            return per_model[detector]
        if detector in self.detectors:
            return self.detectors[detector]
        return AlertRule(detector=detector)  # a detector family this version does not know yet

    def channels_for(self, severity: str) -> list[str]:
        """Configured channels whose lowest severity is at or below `severity`, in a fixed order."""
        return [c for c in NOTIFY_CHANNELS if c in self.channels
                and severity_rank(severity) >= severity_rank(self.channels[c])]

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None, *, channels: Iterable[str] = NOTIFY_CHANNELS,
                     dashboard_url: str = "http://127.0.0.1:8501") -> "AlertRules":
        """Rules from an `[alerts]` TOML table over the defaults.

        `channels` are the channels that have an endpoint; others get no notifications.
        """
        mapping = _table(mapping, "[alerts]", _AlertsSection)
        general = _rule_fields({k: v for k, v in mapping.items() if k in _RULE_KEYS}, "[alerts]")
        detector_tables = _table(mapping.get("detectors"), "[alerts.detectors]")
        for name in detector_tables:
            _check_detector(name, "[alerts.detectors]")
        base = _default_rules()
        detectors = {}
        for name, rule in base.items():
            overrides = _rule_fields(_table(detector_tables.get(name), f"[alerts.detectors.{name}]"),
                                     f"[alerts.detectors.{name}]")
            detectors[name] = _apply(rule, general, overrides, f"[alerts.detectors.{name}]")

        rate = _rate(mapping.get("false_pages_per_model_per_month", defaults.ALERT_FALSE_PAGES_PER_MODEL_PER_MONTH),
                     "[alerts] false_pages_per_model_per_month")
        models: dict[str, dict[str, AlertRule]] = {}
        model_rates: dict[str, float] = {}
        for model, table in _table(mapping.get("models"), "[alerts.models]").items():
            where = f'[alerts.models."{model}"]'
            table = _table(table, where, _ModelSection)
            if "false_pages_per_model_per_month" in table:
                model_rates[model] = _rate(table["false_pages_per_model_per_month"],
                                           f"{where} false_pages_per_model_per_month")
            model_general = _rule_fields({k: v for k, v in table.items() if k in _RULE_KEYS}, where)
            model_detectors = _table(table.get("detectors"), f"{where}.detectors")
            rules = {}
            for name, rule in detectors.items():
                inner = f"{where}.detectors.{name}"
                overrides = _rule_fields(_table(model_detectors.get(name), inner), inner)
                rules[name] = _apply(rule, model_general, overrides, inner)
            for name in model_detectors:
                _check_detector(name, f"{where}.detectors")
            models[model] = rules

        inhibit = tuple(_inhibit_rules(mapping["inhibit"] if "inhibit" in mapping
                                       else [{"source": r["source"], "targets": list(r["targets"])}
                                             for r in defaults.ALERT_INHIBIT_RULES]))
        routes = dict(defaults.ALERT_CHANNEL_MIN_SEVERITY)
        enabled = set(channels)
        for channel, severity in _table(mapping.get("channels"), "[alerts.channels]").items():
            if channel not in NOTIFY_CHANNELS:
                raise UserError(f"[alerts.channels]: unknown channel {channel!r}"
                                f"{did_you_mean(channel, NOTIFY_CHANNELS)}; expected one of "
                                f"{', '.join(NOTIFY_CHANNELS)}")
            if severity == "off":
                routes.pop(channel, None)
                continue
            routes[channel] = _severity(severity, f"[alerts.channels] {channel}")
            if channel not in enabled:  # routed on purpose, yet it would page nobody
                setting = ENDPOINT_SETTINGS[channel]
                raise UserError(f"[alerts.channels] routes {severity!r} alerts to {channel}, but {setting} is not "
                                f"set (DRIFTLINE_{setting.upper()}): set it, or write {channel} = \"off\"")
        routes = {c: s for c, s in routes.items() if c in enabled}
        return cls(detectors=detectors, models=models, inhibit=inhibit, channels=routes,
                   dashboard_url=dashboard_url, false_pages_per_month=rate, model_false_pages_per_month=model_rates,
                   delivery=_delivery(_table(mapping.get("delivery"), "[alerts.delivery]")),
                   retrain=_retrain(_table(mapping.get("retrain"), "[alerts.retrain]")))


def load_rules(settings: Any = None, config_file: str | Path | None = None) -> AlertRules:
    """The rules of a deployment: the `[alerts]` section of `config_file` (or $DRIFTLINE_CONFIG)
    over the defaults; channels are those with an endpoint in `settings`, and the retraining
    policy is off when there is no retraining webhook."""
    from driftline.config import load_settings, load_toml_section

    if settings is None:
        settings = load_settings(config_file)
    enabled = configured_channels(settings)
    rules = AlertRules.from_mapping(load_toml_section(config_file, "alerts"),
                                    channels=[c for c in enabled if c in NOTIFY_CHANNELS],
                                    dashboard_url=settings.dashboard_url)
    if settings.false_pages_per_model_per_month is not None:  # DRIFTLINE_FALSE_PAGES_PER_MODEL_PER_MONTH beats the file
        rules = dataclasses.replace(rules, false_pages_per_month=settings.false_pages_per_model_per_month)
    if RETRAIN not in enabled and rules.retrain.enabled:
        rules = dataclasses.replace(rules, retrain=dataclasses.replace(rules.retrain, enabled=False))
    return rules


# --- parsing helpers ------------------------------------------------------------------

def _check_detector(name: str, where: str) -> None:
    if name not in DETECTORS:
        raise UserError(f"{where}: unknown detector {name!r}; expected one of {', '.join(DETECTORS)}")


def _table(value: Any, where: str, section: type[Section] | None = None) -> dict[str, Any]:
    """`value` as a dict (None: empty); with `section`, its keys checked against that table's."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise UserError(f"{where} must be a table, got {value!r}")
    if section is not None:
        parse_section(section, value, where)
    return dict(value)


def _severity(value: Any, where: str) -> str:
    if value not in SEVERITIES:
        raise UserError(f"{where}: severity must be one of {', '.join(SEVERITIES)}, got {value!r}")
    return value


def _apply(rule: AlertRule, general: Mapping[str, Any], overrides: Mapping[str, Any], where: str) -> AlertRule:
    """`rule` with a table's general values, then its own; a general sequential policy reaches only the
    families that carry evidence, a detector's own one must be one of them."""
    values = {**general, **overrides}
    if values.get("policy") == SEQUENTIAL and rule.detector not in vocabulary.SEQUENTIAL_FAMILIES:
        if overrides.get("policy") == SEQUENTIAL:
            raise UserError(f"{where} policy = \"sequential\": only {', '.join(vocabulary.SEQUENTIAL_FAMILIES)} "
                            "carry sequential evidence; use for_windows")
        values.pop("policy")
    return dataclasses.replace(rule, **values)


def _rate(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise UserError(f"{where} must be a positive number (expected false pages a month), got {value!r}")
    return float(value)


def _positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{where} must be a whole number of at least 1, got {value!r}")
    return value


def _rule_fields(table: Mapping[str, Any], where: str) -> dict[str, Any]:
    parse_section(_RuleSection, table, where)
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key == "severity":
            out[key] = _severity(value, f"{where} severity")
        elif key in ("for_windows", "resolve_after_windows"):
            out[key] = _positive_int(value, f"{where} {key}")
        elif key == "repeat_interval":
            out[key] = parse_duration(value, f"{where} repeat_interval")
            if out[key] <= timedelta(0):
                raise UserError(f"{where} repeat_interval must be positive")
        elif key == "policy":
            if value not in POLICIES:
                raise UserError(f"{where} policy must be one of {', '.join(POLICIES)}, got {value!r}")
            out[key] = value
        elif key == "group":
            if not isinstance(value, str) or not value:
                raise UserError(f"{where} group must be a non-empty string")
            out[key] = value
        elif key == "enabled":
            if not isinstance(value, bool):
                raise UserError(f"{where} enabled must be true or false")
            out[key] = value
    return out


def _inhibit_rules(value: Any) -> list[InhibitRule]:
    if not isinstance(value, list):
        raise UserError("[alerts] inhibit must be an array of tables: [[alerts.inhibit]] source = ..., targets = [...]")
    rules = []
    for i, item in enumerate(value):
        where = f"[[alerts.inhibit]] #{i + 1}"
        item = _table(item, where, _InhibitSection)
        if "source" not in item or "targets" not in item:
            raise UserError(f"{where}: needs source and targets")
        _check_detector(item["source"], where)
        targets = item["targets"]
        if not isinstance(targets, list) or not targets:
            raise UserError(f"{where}: targets must be a non-empty list of detectors")
        for target in targets:
            _check_detector(target, where)
        rules.append(InhibitRule(item["source"], tuple(targets)))
    return rules


def _delivery(table: dict[str, Any]) -> DeliveryPolicy:
    parse_section(_DeliverySection, table, "[alerts.delivery]")
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key == "max_attempts":
            values[key] = _positive_int(value, "[alerts.delivery] max_attempts")
        else:
            values[key] = parse_duration(value, f"[alerts.delivery] {key}")
    return DeliveryPolicy(**values)


def _retrain(table: dict[str, Any]) -> RetrainPolicy:
    parse_section(_RetrainSection, table, "[alerts.retrain]")
    values: dict[str, Any] = {}
    for key, value in table.items():
        where = f"[alerts.retrain] {key}"
        if key == "enabled":
            if not isinstance(value, bool):
                raise UserError(f"{where} must be true or false")
            values[key] = value
        elif key == "windows":
            values[key] = _positive_int(value, where)
        elif key in ("features", "detectors", "quality_metrics"):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise UserError(f"{where} must be a list of strings")
            if key == "detectors":
                for name in value:
                    _check_detector(name, where)
            if key == "quality_metrics":
                for name in value:
                    if name not in vocabulary.QUALITY_METRICS:
                        raise UserError(f"{where}: {vocabulary.MODEL_QUALITY} emits no metric {name!r} that is "
                                        f"compared with a reference; expected one of "
                                        f"{', '.join(sorted(vocabulary.QUALITY_METRICS))}")
            values[key] = tuple(value)
        elif key == "quality_drop":
            if value is False:
                values[key] = None
            elif isinstance(value, bool) or not isinstance(value, (int, float)):
                raise UserError(f"{where} must be a number (or false to disable the quality trigger)")
            else:
                values[key] = float(value)
        elif key == "cooldown":
            values[key] = parse_duration(value, where)
        elif key == "rollout":
            values[key] = value
    return RetrainPolicy(**values)
