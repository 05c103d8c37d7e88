"""Alert rules from the [alerts] TOML section over the documented defaults."""
from __future__ import annotations

from datetime import timedelta

import pytest

from driftline.alerts.rules import AlertRules, load_rules
from driftline.alerts.times import parse_duration
from driftline import defaults
from driftline.errors import UserError
from driftline.vocabulary import DATASET_DRIFT, DATA_DRIFT, LATENCY, PREDICTION_DRIFT, SKEW


def test_defaults_come_from_driftline_defaults():
    rules = AlertRules.from_mapping({})
    latency = rules.rule_for("any-model", LATENCY)
    assert latency.severity == defaults.ALERT_DETECTOR_DEFAULTS[LATENCY]["severity"] == "critical"
    assert latency.for_windows == defaults.ALERT_DETECTOR_DEFAULTS[LATENCY]["for_windows"]
    drift = rules.rule_for("any-model", DATA_DRIFT)
    assert drift.for_windows == defaults.ALERT_FOR_WINDOWS
    assert drift.resolve_after_windows == defaults.ALERT_RESOLVE_AFTER_WINDOWS
    assert drift.repeat_interval == timedelta(seconds=defaults.ALERT_REPEAT_INTERVAL_SECONDS)
    assert drift.group_name == DATA_DRIFT and latency.group_name == LATENCY
    assert rules.channels_for("info") == ["slack", "webhook", "alertmanager", "teams"]
    assert rules.channels_for("warning") == ["slack", "webhook", "alertmanager", "teams", "email"]
    assert rules.channels_for("error") == ["slack", "pagerduty", "webhook", "alertmanager", "teams", "email"]
    assert [(r.source, r.targets) for r in rules.inhibit] == [(DATASET_DRIFT, (DATA_DRIFT,))]
    assert rules.retrain.windows == defaults.RETRAIN_DRIFT_WINDOWS


def test_toml_overrides_general_then_detector_then_model():
    rules = AlertRules.from_mapping({
        "for_windows": 4, "resolve_after_windows": 5, "repeat_interval": "1h",
        "detectors": {LATENCY: {"for_windows": 1, "group": "slo"}, SKEW: {"enabled": False}},
        "models": {"fraud": {"for_windows": 6, "detectors": {DATA_DRIFT: {"severity": "error"}}}},
        "channels": {"pagerduty": "critical", "slack": "warning"},
        "inhibit": [{"source": DATASET_DRIFT, "targets": [DATA_DRIFT, PREDICTION_DRIFT]}],
        "delivery": {"max_age": "30m", "backoff_initial": 2, "max_attempts": 3},
        "retrain": {"windows": 2, "features": ["income"], "cooldown": "1d", "quality_drop": False},
    })
    # general beats every built-in, including per-detector ones
    assert rules.rule_for("credit", DATASET_DRIFT).for_windows == 4
    assert rules.rule_for("credit", LATENCY).for_windows == 1
    assert rules.rule_for("credit", LATENCY).group_name == "slo"
    assert rules.rule_for("credit", LATENCY).resolve_after_windows == 5
    assert rules.rule_for("credit", DATA_DRIFT).repeat_interval == timedelta(hours=1)
    assert rules.rule_for("credit", SKEW).enabled is False
    fraud = rules.rule_for("fraud", DATA_DRIFT)
    assert (fraud.for_windows, fraud.severity) == (6, "error")
    assert rules.rule_for("fraud", LATENCY).for_windows == 6  # a model's table beats every global one
    assert rules.channels_for("error") == ["slack", "webhook", "alertmanager", "teams", "email"]
    assert rules.channels_for("critical") == ["slack", "pagerduty", "webhook", "alertmanager", "teams", "email"]
    assert rules.channels_for("info") == ["webhook", "alertmanager", "teams"]
    assert rules.inhibit[0].targets == (DATA_DRIFT, PREDICTION_DRIFT)
    assert rules.delivery.max_age == timedelta(minutes=30) and rules.delivery.max_attempts == 3
    assert rules.delivery.backoff_initial == timedelta(seconds=2)
    assert rules.retrain.features == ("income",) and rules.retrain.quality_drop is None
    assert rules.retrain.cooldown == timedelta(days=1)


@pytest.mark.parametrize("mapping, message", [
    ({"for": 3}, "unknown key 'for'"),
    ({"detectors": {"drift": {}}}, "unknown detector 'drift'"),
    ({"detectors": {LATENCY: {"severity": "page"}}}, "severity: must be one of"),
    ({"for_windows": 0}, r"\[alerts\] for_windows: input should be greater than or equal to 1"),
    ({"policy": "cusum"}, r"\[alerts\] policy: must be one of sequential, for_windows"),
    ({"detectors": {LATENCY: {"policy": "sequential"}}}, r"\[alerts.detectors.latency\] policy = \"sequential\""),
    ({"detectors": {DATA_DRIFT: {"false_pages_per_model_per_month": 2}}}, "unknown key"),
    ({"repeat_interval": "soon"}, "cannot read 'soon' as a duration"),
    ({"channels": {"sms": "info"}}, "unknown channel 'sms'"),
    ({"inhibit": {"source": DATASET_DRIFT}}, "array of tables"),
    ({"delivery": {"lease": "5s", "timeout": "10s"}}, "lease"),
    ({"retrain": {"windows": "five"}}, r"\[alerts.retrain\] windows: input should be a valid integer"),
    ({"models": {"m": {"group": "x"}}}, "unknown key 'models.m.group'"),
    ({"inhibit": [{"source": DATASET_DRIFT, "targets": ["feature_drift"]}]},
     r"\[\[alerts.inhibit\]\] #1 targets: unknown detector 'feature_drift'"),
    ({"retrain": {"detectors": ["drift"]}}, r"\[alerts.retrain\] detectors: unknown detector 'drift'"),
    ({"retrain": {"quality_metrics": ["auc"]}}, r"\[alerts.retrain\] quality_metrics: model_quality emits no "
                                                r"metric 'auc'"),
])
def test_bad_rules_are_user_errors_naming_the_place(mapping, message):
    with pytest.raises(UserError, match=message):
        AlertRules.from_mapping(mapping)


def test_channels_without_endpoint_get_no_route_and_retrain_is_off_without_webhook(tmp_path, settings_for,
                                                                                   fake_slack):
    config = tmp_path / "driftline.toml"
    config.write_text('[alerts]\nfor_windows = 2\n[alerts.channels]\nslack = "warning"\n')
    rules = load_rules(settings_for(slack=fake_slack), config_file=config)
    assert rules.channels_for("critical") == ["slack"]  # PagerDuty's default route: off without a routing key
    assert rules.channels_for("info") == []
    assert rules.retrain.enabled is False
    assert rules.rule_for("m", DATA_DRIFT).for_windows == 2
    assert rules.dashboard_url == "http://dash.example:8501"
    # routed on purpose without its endpoint: an error, not an alert that pages nobody
    config.write_text('[alerts.channels]\npagerduty = "warning"\n')
    with pytest.raises(UserError, match="pagerduty_routing_key is not set"):
        load_rules(settings_for(slack=fake_slack), config_file=config)


def test_drift_families_page_on_evidence_unless_told_otherwise():
    """The stated rate beside these rules is the evaluation's (tests/scheduler/test_evaluation_config.py)."""
    rules = AlertRules.from_mapping({})
    assert rules.rule_for("m", DATA_DRIFT).sequential and rules.rule_for("m", DATA_DRIFT).windows_to_fire == 1
    assert not rules.rule_for("m", LATENCY).sequential  # no evidence there: K windows in a row
    rules = AlertRules.from_mapping({"policy": "for_windows", "false_pages_per_model_per_month": 4,
                                     "models": {"fraud": {"false_pages_per_model_per_month": 0.5,
                                                          "detectors": {DATA_DRIFT: {"policy": "sequential"}}}}})
    assert rules.rule_for("m", DATA_DRIFT).windows_to_fire == defaults.ALERT_FOR_WINDOWS
    assert rules.rule_for("fraud", DATA_DRIFT).sequential and not rules.rule_for("fraud", PREDICTION_DRIFT).sequential
    # a general "sequential" reaches only the families that carry evidence
    assert not AlertRules.from_mapping({"policy": "sequential"}).rule_for("m", SKEW).sequential


def test_parse_duration():
    assert parse_duration("90s") == timedelta(seconds=90)
    assert parse_duration("1h30m") == timedelta(minutes=90)
    assert parse_duration("2d") == timedelta(days=2)
    assert parse_duration(45) == timedelta(seconds=45)
    for bad in ("", "2 hours", "-5m", True):
        with pytest.raises(UserError):
            parse_duration(bad)


def test_the_defaults_name_only_what_the_detectors_emit(monkeypatch):
    from driftline import defaults, vocabulary

    rules = AlertRules.from_mapping(None)
    named = {r.source for r in rules.inhibit} | {t for r in rules.inhibit for t in r.targets}
    assert named | set(defaults.ALERT_DETECTOR_DEFAULTS) | set(rules.retrain.detectors) <= set(vocabulary.DETECTORS)
    monkeypatch.setattr(defaults, "ALERT_INHIBIT_RULES", ({"source": "drift", "targets": (DATA_DRIFT,)},))
    with pytest.raises(UserError, match="unknown detector 'drift'"):
        AlertRules.from_mapping(None)
