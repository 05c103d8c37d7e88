"""Alert rules: what fires, how soon, how loud, who hears it; from the `[alerts]` TOML section.

Semantics follow Prometheus Alertmanager, with evaluated windows as the clock:

- a rule per detector family, with a severity (info < warning < error < critical);
- ``policy``: how a window's results become a page. ``"sequential"`` (the default for the
  drift families, `vocabulary.SEQUENTIAL_FAMILIES`) fires when the evidence accumulated over
  windows crosses the line that ``false_pages_per_model_per_month`` sets (written in `[alerts]`, parsed with
  the evaluation's thresholds: driftline.scheduler.evaluation_config; `driftline.detectors.families.evidence`); ``"for_windows"`` (every other family's):
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

from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Iterable, Mapping

from pydantic import Field, field_validator, model_validator

from driftline import defaults, vocabulary
from driftline.errors import UserError
from driftline.toml_sections import Table, as_written, by_name, did_you_mean, parse_section

from driftline.alerts.channels.registry import CHANNEL_TYPES, NOTIFY_CHANNELS, configured_channels, default_routes
from driftline.alerts.channels.retrain import RETRAIN
from driftline.alerts.severities import SEVERITIES, severity_rank
from driftline.alerts.times import parse_duration

# Rules, inhibit rules and the retraining policy may only name what a detector emits.
# the families an alert can belong to: the window detectors', and the rollout analysis' own
DETECTORS = vocabulary.ALERT_FAMILIES
RETRAIN_ROLLOUTS = vocabulary.RETRAIN_ROLLOUTS
SEQUENTIAL = "sequential"
FOR_WINDOWS = "for_windows"
POLICIES = (SEQUENTIAL, FOR_WINDOWS)

_Windows = Annotated[int, Field(ge=1)]


def _duration(value: Any) -> Any:
    """A duration as written ("2h", a number of seconds) as a timedelta; its own words when it is none."""
    if isinstance(value, timedelta):
        return value
    try:
        return parse_duration(value, "duration")
    except UserError as exc:
        raise ValueError(str(exc).removeprefix("duration: ")) from None


def _listed(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value  # TOML arrays are lists


def _one_of(value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"must be one of {', '.join(choices)}")
    return value


def _known(names: tuple[str, ...]) -> tuple[str, ...]:
    for name in names:
        if name not in DETECTORS:
            raise ValueError(f"unknown detector {name!r}; expected one of {', '.join(DETECTORS)}")
    return names


class AlertRule(Table):
    """One detector family's rule (`[alerts.detectors.NAME]`, over `[alerts]`' and a model's general keys)."""

    WHERE = "[alerts.detectors.NAME]"

    detector: str
    severity: str = "warning"
    for_windows: _Windows = defaults.ALERT_FOR_WINDOWS
    resolve_after_windows: _Windows = defaults.ALERT_RESOLVE_AFTER_WINDOWS
    repeat_interval: timedelta = timedelta(seconds=defaults.ALERT_REPEAT_INTERVAL_SECONDS)
    group: Annotated[str, Field(min_length=1)] = ""  # "" means: the detector's name
    enabled: bool = True
    policy: str = FOR_WINDOWS

    @field_validator("severity")
    @classmethod
    def _severity(cls, value: str) -> str:
        return _one_of(value, SEVERITIES)

    @field_validator("policy")
    @classmethod
    def _policy(cls, value: str) -> str:
        return _one_of(value, POLICIES)

    @field_validator("repeat_interval", mode="before")
    @classmethod
    def _read_interval(cls, value: Any) -> Any:
        return _duration(value)

    @field_validator("repeat_interval")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be positive")
        return value

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


class InhibitRule(Table):
    """While an alert of `source` fires, alerts of `targets` (same model and version) stay quiet."""

    WHERE = "[[alerts.inhibit]]"

    source: str
    targets: Annotated[tuple[str, ...], Field(min_length=1)]

    @field_validator("targets", mode="before")
    @classmethod
    def _listed(cls, value: Any) -> Any:
        return _listed(value)

    @field_validator("source")
    @classmethod
    def _known_source(cls, value: str) -> str:
        return _known((value,))[0]

    @field_validator("targets")
    @classmethod
    def _known_targets(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _known(value)


class DeliveryPolicy(Table):
    """How the outbox retries (see driftline.alerts.delivery): `[alerts.delivery]`."""

    WHERE = "[alerts.delivery]"

    timeout: timedelta = timedelta(seconds=defaults.ALERT_HTTP_TIMEOUT_SECONDS)
    lease: timedelta = timedelta(seconds=defaults.ALERT_DELIVERY_LEASE_SECONDS)
    backoff_initial: timedelta = timedelta(seconds=defaults.ALERT_BACKOFF_INITIAL_SECONDS)
    backoff_max: timedelta = timedelta(seconds=defaults.ALERT_BACKOFF_MAX_SECONDS)
    max_age: timedelta = timedelta(seconds=defaults.ALERT_DELIVERY_MAX_AGE_SECONDS)
    max_attempts: _Windows = defaults.ALERT_DELIVERY_MAX_ATTEMPTS

    @field_validator("timeout", "lease", "backoff_initial", "backoff_max", "max_age", mode="before")
    @classmethod
    def _read(cls, value: Any) -> Any:
        return _duration(value)

    @model_validator(mode="after")
    def _lease_outlasts_timeout(self) -> "DeliveryPolicy":
        if self.lease <= self.timeout:
            raise ValueError(f"lease ({self.lease}) must be longer than timeout ({self.timeout}), "
                             "or a slow delivery would have its row claimed twice")
        return self


class RetrainPolicy(Table):
    """When to ask for a retrain (see driftline.alerts.retraining): `[alerts.retrain]`.

    Fires when, in each of the last `windows` evaluated windows of a model version, a
    `detectors` result breached on one of `features` (any feature when empty; the
    window-level dataset_drift result counts only when `features` is empty), or when a
    model-quality metric (any, or `quality_metrics`) dropped by at least `quality_drop`
    against the detector's reference, beyond its noise margin (false: no quality trigger). At most one
    request per model per `cooldown`. `rollout` says what the worker does with a retrained version that
    beat production: promote it, or enter it as a shadow or canary rollout plan.
    """

    WHERE = "[alerts.retrain]"

    enabled: bool = True
    windows: _Windows = defaults.RETRAIN_DRIFT_WINDOWS
    features: tuple[str, ...] = ()
    detectors: tuple[str, ...] = (vocabulary.DATA_DRIFT, vocabulary.DATASET_DRIFT)
    quality_drop: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = defaults.RETRAIN_QUALITY_DROP
    quality_metrics: tuple[str, ...] = ()
    cooldown: timedelta = timedelta(seconds=defaults.RETRAIN_COOLDOWN_SECONDS)
    rollout: str = defaults.RETRAIN_ROLLOUT

    @field_validator("features", "detectors", "quality_metrics", mode="before")
    @classmethod
    def _listed(cls, value: Any) -> Any:
        return _listed(value)

    @field_validator("detectors")
    @classmethod
    def _known_detectors(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _known(value)

    @field_validator("quality_metrics")
    @classmethod
    def _compared(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if name not in vocabulary.QUALITY_METRICS:
                raise ValueError(f"{vocabulary.MODEL_QUALITY} emits no metric {name!r} that is compared with a "
                                 f"reference; expected one of {', '.join(sorted(vocabulary.QUALITY_METRICS))}")
        return value

    @field_validator("quality_drop", mode="before")
    @classmethod
    def _off(cls, value: Any) -> Any:
        return None if value is False else value  # false: no quality trigger

    @field_validator("cooldown", mode="before")
    @classmethod
    def _read(cls, value: Any) -> Any:
        return _duration(value)

    @field_validator("rollout")
    @classmethod
    def _rollout(cls, value: str) -> str:
        return _one_of(value, RETRAIN_ROLLOUTS)


def _default_rules() -> dict[str, AlertRule]:
    for name in defaults.ALERT_DETECTOR_DEFAULTS:
        _check_detector(name, "defaults.ALERT_DETECTOR_DEFAULTS")
    base = {**defaults.ALERT_DETECTOR_DEFAULTS, vocabulary.ROLLOUT: defaults.ALERT_ROLLOUT_DEFAULTS}
    return {d: AlertRule(detector=d, **{"policy": _default_policy(d), **base.get(d, {})}) for d in DETECTORS}


def _default_policy(detector: str) -> str:
    return defaults.ALERT_POLICY if detector in vocabulary.SEQUENTIAL_FAMILIES else FOR_WINDOWS


def _default_inhibit() -> tuple[InhibitRule, ...]:
    return tuple(_inhibit_rules([dict(r) for r in defaults.ALERT_INHIBIT_RULES]))


# The tables of [alerts] as written, derived from the rule's keys: what a rule may set at the top of [alerts] or
# of a model's table, and one detector's rule (its group too); values are checked as the rule checks them.
_GENERAL = ("detector", "group")
_DetectorTable = as_written(AlertRule, "_DetectorTable", exclude=("detector",))
# the sequential policy's stated rate is the evaluation's setting (driftline.scheduler.evaluation_config), written here
_PAGING = (Any, None)
_ModelTable = as_written(AlertRule, "_ModelTable", exclude=_GENERAL, detectors=by_name(_DetectorTable),
                         false_pages_per_model_per_month=_PAGING)
# channels, inhibit, delivery and retrain are read by their own tables, each named in its errors
_AlertsTable = as_written(AlertRule, "_AlertsTable", exclude=_GENERAL, detectors=by_name(_DetectorTable),
                          false_pages_per_model_per_month=_PAGING, models=by_name(_ModelTable), channels=(Any, None),
                          inhibit=(Any, None), delivery=(Any, None), retrain=(Any, None))
_RULE_KEYS = frozenset(AlertRule.model_fields) - {"detector"}


class AlertRules(Table):
    """All alerting configuration; build it with `load_rules` or `AlertRules.from_mapping`."""

    WHERE = "[alerts]"

    detectors: dict[str, AlertRule] = Field(default_factory=_default_rules)
    # model -> detector -> rule, for models with overrides.
    models: dict[str, dict[str, AlertRule]] = {}
    inhibit: tuple[InhibitRule, ...] = Field(default_factory=_default_inhibit)
    # Configured channel -> lowest severity it receives. A channel without an endpoint is absent.
    channels: dict[str, str] = Field(default_factory=default_routes)
    dashboard_url: str = "http://127.0.0.1:8501"
    delivery: DeliveryPolicy = Field(default_factory=DeliveryPolicy)
    retrain: RetrainPolicy = Field(default_factory=RetrainPolicy)

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
        section = parse_section(_AlertsTable, mapping, cls.WHERE)
        general = _rule_values(section)
        for name in section.detectors or {}:
            _check_detector(name, "[alerts.detectors]")
        detectors = {name: _apply(rule, general, _rule_values((section.detectors or {}).get(name)),
                                  f"[alerts.detectors.{name}]")
                     for name, rule in _default_rules().items()}
        models: dict[str, dict[str, AlertRule]] = {}
        for model, table in (section.models or {}).items():
            where = f'[alerts.models."{model}"]'
            for name in table.detectors or {}:
                _check_detector(name, f"{where}.detectors")
            model_general = _rule_values(table)
            models[model] = {name: _apply(rule, model_general, _rule_values((table.detectors or {}).get(name)),
                                          f"{where}.detectors.{name}")
                             for name, rule in detectors.items()}

        inhibit = (tuple(_inhibit_rules(section.inhibit)) if section.inhibit is not None else _default_inhibit())
        routes = default_routes()
        enabled = set(channels)
        for channel, severity in _table(section.channels, "[alerts.channels]").items():
            if channel not in NOTIFY_CHANNELS:
                raise UserError(f"[alerts.channels]: unknown channel {channel!r}"
                                f"{did_you_mean(channel, NOTIFY_CHANNELS)}; expected one of "
                                f"{', '.join(NOTIFY_CHANNELS)}")
            if severity == "off":
                routes.pop(channel, None)
                continue
            if severity not in SEVERITIES:
                raise UserError(f"[alerts.channels] {channel}: severity must be one of {', '.join(SEVERITIES)} "
                                f"or \"off\", got {severity!r}")
            routes[channel] = severity
            if channel not in enabled:  # routed on purpose, yet it would page nobody
                setting = CHANNEL_TYPES[channel].settings[0]
                raise UserError(f"[alerts.channels] routes {severity!r} alerts to {channel}, but {setting} is not "
                                f"set (DRIFTLINE_{setting.upper()}): set it, or write {channel} = \"off\"")
        routes = {c: s for c, s in routes.items() if c in enabled}
        return cls(detectors=detectors, models=models, inhibit=inhibit, channels=routes,
                   dashboard_url=dashboard_url,
                   delivery=parse_section(DeliveryPolicy, section.delivery, DeliveryPolicy.WHERE),
                   retrain=parse_section(RetrainPolicy, section.retrain, RetrainPolicy.WHERE))


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
    if RETRAIN not in enabled and rules.retrain.enabled:
        rules = rules.replace(retrain=rules.retrain.replace(enabled=False))
    return rules


# --- parsing helpers ------------------------------------------------------------------

def _check_detector(name: str, where: str) -> None:
    if name not in DETECTORS:
        raise UserError(f"{where}: unknown detector {name!r}; expected one of {', '.join(DETECTORS)}")


def _table(value: Any, where: str) -> dict[str, Any]:
    """`value` as a dict (None: empty)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise UserError(f"{where} must be a table, got {value!r}")
    return dict(value)


def _rule_values(table: Any) -> dict[str, Any]:
    """The rule keys a table as written sets (none when there is no table)."""
    if table is None:
        return {}
    return {key: getattr(table, key) for key in table.model_fields_set if key in _RULE_KEYS}


def _apply(rule: AlertRule, general: Mapping[str, Any], overrides: Mapping[str, Any], where: str) -> AlertRule:
    """`rule` with a table's general values, then its own; a general sequential policy reaches only the
    families that carry evidence, a detector's own one must be one of them."""
    values = {**general, **overrides}
    if values.get("policy") == SEQUENTIAL and rule.detector not in vocabulary.SEQUENTIAL_FAMILIES:
        if overrides.get("policy") == SEQUENTIAL:
            raise UserError(f"{where} policy = \"sequential\": only {', '.join(vocabulary.SEQUENTIAL_FAMILIES)} "
                            "carry sequential evidence; use for_windows")
        values.pop("policy")
    return rule.replace(**values)


def _inhibit_rules(value: Any) -> list[InhibitRule]:
    if not isinstance(value, list):
        raise UserError("[alerts] inhibit must be an array of tables: [[alerts.inhibit]] source = ..., targets = [...]")
    return [parse_section(InhibitRule, item, f"[[alerts.inhibit]] #{i + 1}") for i, item in enumerate(value)]
