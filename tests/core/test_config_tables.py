"""Every TOML table is one pydantic model with its bounds: a wrong type, a value out of bounds, NaN or an unknown key
is a `UserError` naming the table and the key (with a "did you mean" for a typo); a valid per-model override
is read over the table's own values."""
from __future__ import annotations

from datetime import timedelta
from typing import Any, Callable

import pytest

from driftline.alerts.rules import AlertRules
from driftline.detectors.thresholds.decision import DriftThresholds
from driftline.detectors.thresholds.freshness import FreshnessThresholds
from driftline.detectors.thresholds.levels import WindowThresholds
from driftline.errors import UserError
from driftline.latency_slo import LatencySLO
from driftline.policies import RolloutPolicy
from driftline.scheduler.evaluation_config import PagingSettings
from driftline.segments import SegmentSpec
from driftline.worker.serving_signals import SignalsConfig

NAN = float("nan")


def _window(mapping: dict[str, Any], model: str | None = None) -> WindowThresholds:
    return WindowThresholds.from_mapping(mapping, model=model)


# table -> how it is read (mapping, model)
READ: dict[str, Callable[..., Any]] = {
    "drift": DriftThresholds.from_mapping,
    "data_quality": lambda m, model=None: _window({"data_quality": m}, model),
    "skew": lambda m, model=None: _window({"skew": m}, model),
    "model_quality": lambda m, model=None: _window({"model_quality": m}, model),
    "estimated_quality": lambda m, model=None: _window({"estimated_quality": m}, model),
    "embedding_drift": lambda m, model=None: _window({"embedding_drift": m}, model).embedding,
    "multivariate_drift": lambda m, model=None: _window({"multivariate_drift": m}, model).multivariate,
    "freshness": FreshnessThresholds.from_mapping,
    "segments": lambda m, model=None: SegmentSpec.from_mapping(m),
    "cost": lambda m, model=None: SignalsConfig.from_sections(m, None),
    "capacity": lambda m, model=None: SignalsConfig.from_sections(None, m),
    # [alerts] holds the alert rules and the evaluation's paging rate, each parsed by the stage that owns it
    "alerts": lambda m, model=None: (AlertRules.from_mapping(m), PagingSettings.from_mapping(m)),
    "alerts.delivery": lambda m, model=None: AlertRules.from_mapping({"delivery": m}).delivery,
    "alerts.retrain": lambda m, model=None: AlertRules.from_mapping({"retrain": m}).retrain,
    "rollouts": RolloutPolicy.from_mapping,
    "latency": LatencySLO.from_mapping,
}

# (table, mapping, what the message must hold): each a wrong type, a bound, NaN and an unknown key with its hint
BAD = [
    ("drift", {"psi": "0.2"}, r"\[drift\] psi: input should be a valid number"),
    ("drift", {"alpha": 1.5}, r"\[drift\] alpha: input should be less than 1"),
    ("drift", {"wasserstein": NAN}, r"\[drift\] wasserstein: input should be a finite number"),
    ("drift", {"psi_threshold": 0.2}, r"\[drift\]: unknown key 'psi_threshold' \(did you mean 'psi'\?\)"),
    ("drift", {"features": {"age": {"min_rows": -1}}}, r"\[drift\] features.age.min_rows: input should be greater"),
    ("drift", {"models": {"m": {"thersholds": "fixed"}}}, r"unknown key 'models.m.thersholds' \(did you mean 'thresholds'"),
    ("data_quality", {"out_of_range_share": "high"}, r"data_quality.out_of_range_share: input should be a valid number"),
    ("data_quality", {"out_of_range_share": 1.5}, r"data_quality.out_of_range_share: input should be less than or equal to 1"),
    ("data_quality", {"missing_rate_increase": NAN}, r"data_quality.missing_rate_increase: input should be a finite"),
    ("data_quality", {"out_of_range": 0.1}, r"unknown key 'data_quality.out_of_range' \(did you mean 'out_of_range_share'"),
    ("skew", {"parity_min_sample": 1.5}, r"skew.parity_min_sample: input should be a valid integer"),
    ("skew", {"parity_mismatch_rate": -0.1}, r"skew.parity_mismatch_rate: input should be greater than or equal to 0"),
    ("skew", {"skew_distribution_psi": NAN}, r"skew.skew_distribution_psi: input should be a finite number"),
    ("model_quality", {"quality_compared_with": "yesterday"}, r"model_quality.quality_compared_with: must be 'calibration'"),
    ("model_quality", {"quality_z": float("inf")}, r"model_quality.quality_z: input should be a finite number"),
    ("model_quality", {"quality_min_label": 5}, r"did you mean 'quality_min_labels'"),
    ("estimated_quality", {"estimated_quality_max_drop": -0.1}, r"estimated_quality.estimated_quality_max_drop: input"),
    ("estimated_quality", {"estimated_quality_min_rows": "100"}, r"estimated_quality.estimated_quality_min_rows: input "
                                                                  r"should be a valid integer"),
    ("estimated_quality", {"estimated_quality_z": NAN}, r"estimated_quality.estimated_quality_z: input should be a finite"),
    ("estimated_quality", {"estimated_quality_zz": 2.0}, r"unknown key 'estimated_quality.estimated_quality_zz' \(did "
                                                         r"you mean 'estimated_quality_z'"),
    ("skew", {"parity_tolerance": 0.1}, r"did you mean 'parity_relative_tolerance'"),
    ("embedding_drift", {"alpha": "small"}, r"\[embedding_drift\] alpha: input should be a valid number"),
    ("embedding_drift", {"min_rows": 1}, r"\[embedding_drift\] min_rows: input should be greater than or equal to 2"),
    ("embedding_drift", {"classifier_z": NAN}, r"\[embedding_drift\] classifier_z: input should be a finite number"),
    ("embedding_drift", {"classifier_aucc": 0.7}, r"\[embedding_drift\]: unknown key 'classifier_aucc' \(did you mean 'classifier_auc'"),
    ("multivariate_drift", {"folds": 1}, r"\[multivariate_drift\] folds: input should be greater than or equal to 2"),
    ("multivariate_drift", {"trees": "many"}, r"\[multivariate_drift\] trees: input should be a valid integer"),
    ("multivariate_drift", {"learning_rate": NAN}, r"\[multivariate_drift\] learning_rate: input should be a finite"),
    ("multivariate_drift", {"fold": 3}, r"\[multivariate_drift\]: unknown key 'fold' \(did you mean 'folds'\?\)"),
    ("freshness", {"stale_share": "1%"}, r"\[freshness\] stale_share: input should be a valid number"),
    ("freshness", {"max_age": {"score": 0}}, r"\[freshness\] max_age.score: input should be greater than 0"),
    ("freshness", {"stale_share": NAN}, r"\[freshness\] stale_share: input should be a finite number"),
    ("freshness", {"max_ages": {}}, r"\[freshness\]: unknown key 'max_ages' \(did you mean 'max_age'\?\)"),
    ("freshness", {"models": {"m": {"stale_share": 2}}}, r"\[freshness\] models.m.stale_share: input should be less"),
    ("segments", {"columns": "region"}, r"\[segments\] columns: input should be a valid tuple"),
    ("segments", {"max_values": 0}, r"\[segments\] max_values: input should be greater than or equal to 1"),
    ("segments", {"max_values": NAN}, r"\[segments\] max_values: input should be a valid integer"),
    ("segments", {"column": ["region"]}, r"\[segments\]: unknown key 'column' \(did you mean 'columns'\?\)"),
    ("cost", {"price_per_replica_hour": {"cpu": "1"}}, r"\[cost\] price_per_replica_hour.cpu: input should be a valid"),
    ("cost", {"price_per_replica_hour": {"cpu": -1}}, r"\[cost\] price_per_replica_hour.cpu: input should be greater"),
    ("cost", {"price_per_replica_hour": {"cuda": NAN}}, r"\[cost\] price_per_replica_hour.cuda: input should be a finite"),
    ("cost", {"price_per_hour": {}}, r"\[cost\]: unknown key 'price_per_hour' \(did you mean 'price_per_replica_hour'"),
    ("capacity", {"window_seconds": "1m"}, r"\[capacity\] window_seconds: input should be a valid number"),
    ("capacity", {"target_utilization": 0}, r"\[capacity\] target_utilization: input should be greater than 0"),
    ("capacity", {"target_utilization": NAN}, r"\[capacity\] target_utilization: input should be a finite number"),
    ("capacity", {"target_utilisation": 0.5}, r"unknown key 'target_utilisation' \(did you mean 'target_utilization'"),
    ("alerts", {"for_windows": "3"}, r"\[alerts\] for_windows: input should be a valid integer"),
    ("alerts", {"models": {"m": {"resolve_after_windows": 0}}}, r"\[alerts\] models.m.resolve_after_windows: input"),
    ("alerts", {"false_pages_per_model_per_month": NAN}, r"\[alerts\] false_pages_per_model_per_month: input should "
                                                          r"be a finite number"),
    ("alerts", {"detectors": {"latency": {"for_window": 2}}}, r"unknown key 'detectors.latency.for_window' \(did you "
                                                               r"mean 'for_windows'"),
    ("alerts.delivery", {"max_attempts": "3"}, r"\[alerts.delivery\] max_attempts: input should be a valid integer"),
    ("alerts.delivery", {"max_attempts": 0}, r"\[alerts.delivery\] max_attempts: input should be greater than"),
    ("alerts.delivery", {"lease": "soon"}, r"\[alerts.delivery\] lease: cannot read 'soon' as a duration"),
    ("alerts.delivery", {"timout": "5s"}, r"\[alerts.delivery\]: unknown key 'timout' \(did you mean 'timeout'\?\)"),
    ("alerts.retrain", {"enabled": "yes"}, r"\[alerts.retrain\] enabled: input should be a valid boolean"),
    ("alerts.retrain", {"quality_drop": -0.1}, r"\[alerts.retrain\] quality_drop: input should be greater than"),
    ("alerts.retrain", {"quality_drop": NAN}, r"\[alerts.retrain\] quality_drop: input should be a finite number"),
    ("alerts.retrain", {"cooldwn": "1d"}, r"\[alerts.retrain\]: unknown key 'cooldwn' \(did you mean 'cooldown'\?\)"),
    ("rollouts", {"windows": 2.5}, r"\[rollouts\] windows: input should be a valid integer"),
    ("rollouts", {"models": {"m": {"max_flip_rate": 2}}}, r"\[rollouts\] models.m.max_flip_rate: input should be less"),
    ("rollouts", {"alpha": NAN}, r"\[rollouts\] alpha: input should be a finite number"),
    ("rollouts", {"window": 3}, r"\[rollouts\]: unknown key 'window' \(did you mean 'windows'\?\)"),
    ("latency", {"p99_ms": "100ms"}, r"\[latency\] p99_ms: input should be a valid number"),
    ("latency", {"error_rate": 2}, r"\[latency\] error_rate: input should be less than or equal to 1"),
    ("latency", {"models": {"m": {"p95_ms": NAN}}}, r"\[latency\] models.m.p95_ms: input should be a finite number"),
    ("latency", {"p99": 100}, r"\[latency\]: unknown key 'p99' \(did you mean 'p99_ms'\?\)"),
]


@pytest.mark.parametrize("table, mapping, message", BAD, ids=[f"{t}-{next(iter(m))}-{i}" for i, (t, m, _) in
                                                             enumerate(BAD)])
def test_a_bad_value_is_a_user_error_naming_the_table_and_the_key(table, mapping, message):
    with pytest.raises(UserError, match=message):
        READ[table](mapping, model="m")


def test_every_table_has_each_kind_of_bad_value():
    tables = {table for table, _, _ in BAD}
    assert tables == set(READ)
    for table in tables:
        messages = [message for t, _, message in BAD if t == table]
        assert any("unknown key" in m or "did you mean" in m for m in messages), table


# (table, mapping, model, what it reads): a per-model override over the table's own values, the rest kept
GOOD = [
    ("drift", {"psi": 0.3, "models": {"m": {"psi": 0.4, "features": {"age": {"psi": 0.5}}}}}, "m",
     lambda t: (t.psi, t.for_feature("age").psi, t.for_feature("income").psi) == (0.4, 0.5, 0.4)),
    ("drift", {"psi": 0.3, "models": {"m": {"psi": 0.4}}}, "other", lambda t: t.psi == 0.3),
    ("skew", {"parity_mismatch_rate": 0.1}, "m", lambda t: t.parity_mismatch_rate == 0.1),
    ("freshness", {"max_age": {"score": 60}, "models": {"m": {"stale_share": 0.5}}}, "m",
     lambda t: (t.max_age_s, t.stale_share) == ({"score": 60}, 0.5)),
    ("segments", {"columns": ["region"], "max_values": 3}, None, lambda t: (t.columns, t.track) == (("region",), 9)),
    ("cost", {"price_per_replica_hour": {"cpu": 0.5}}, None, lambda t: t.price_per_replica_hour == {"cpu": 0.5}),
    ("capacity", {"window_seconds": 30}, None, lambda t: (t.window_seconds, t.target_utilization) == (30, 0.65)),
    ("alerts.delivery", {"lease": "2m", "max_attempts": 3}, None,
     lambda t: (t.lease, t.max_attempts) == (timedelta(minutes=2), 3)),
    ("alerts.retrain", {"quality_drop": False, "features": ["income"]}, None,
     lambda t: (t.quality_drop, t.features) == (None, ("income",))),
    ("rollouts", {"windows": 2, "models": {"m": {"windows": 5, "canary_steps": [10, 50]}}}, "m",
     lambda t: (t.windows, t.canary_steps) == (5, (10, 50))),
    ("latency", {"p99_ms": 100, "models": {"m": {"p99_ms": 40}}}, "m", lambda t: t.p99_ms == 40),
]


@pytest.mark.parametrize("table, mapping, model, check", GOOD, ids=[f"{g[0]}-{i}" for i, g in enumerate(GOOD)])
def test_a_valid_table_and_its_per_model_override_are_read(table, mapping, model, check):
    assert check(READ[table](mapping, model=model))


def test_per_model_tables_of_the_window_levels_and_alerts():
    thresholds = WindowThresholds.from_mapping({"data_quality": {"out_of_range_share": 0.2},
                                                "models": {"m": {"data_quality": {"out_of_range_share": 0.3}}}},
                                               model="m")
    assert thresholds.out_of_range_share == 0.3 and thresholds.type_change_share == WindowThresholds().type_change_share
    rules = AlertRules.from_mapping({"for_windows": 2, "models": {"m": {"for_windows": 4, "repeat_interval": "1h"}}})
    assert rules.rule_for("other", "latency").for_windows == 2
    assert rules.rule_for("m", "latency").for_windows == 4
    assert rules.rule_for("m", "latency").repeat_interval == timedelta(hours=1)


def test_tables_built_in_code_are_checked_too():
    with pytest.raises(UserError, match=r"\[drift\] psi: input should be greater than or equal to 0"):
        DriftThresholds(psi=-1)
    with pytest.raises(UserError, match=r"\[segments\] max_values"):
        SegmentSpec(max_values=0)
    with pytest.raises(UserError, match=r"\[freshness\] stale_share"):
        FreshnessThresholds(stale_share=NAN)
    with pytest.raises(UserError, match=r"\[drift\] min_rows"):
        DriftThresholds(features={"age": {"psi": 0.5}}).replace(min_rows=-1)


def test_the_old_name_of_quality_compared_with_is_read_with_a_warning():
    # quality_reference names the baseline's quality rows (training rows, holdout); the setting was called so too
    for mapping in ({"model_quality": {"quality_reference": "training"}}, {"quality_reference": "training"},
                    {"models": {"m": {"model_quality": {"quality_reference": "training"}}}}):
        with pytest.warns(FutureWarning, match="quality_reference is now called quality_compared_with"):
            assert WindowThresholds.from_mapping(mapping, model="m").quality_compared_with == "training"
    with pytest.warns(FutureWarning), pytest.raises(UserError, match="quality_compared_with: must be 'calibration'"):
        WindowThresholds.from_mapping({"quality_reference": "yesterday"})
    both = {"model_quality": {"quality_reference": "training", "quality_compared_with": "calibration"}}
    with pytest.warns(FutureWarning):  # the new name wins
        assert WindowThresholds.from_mapping(both).quality_compared_with == "calibration"
