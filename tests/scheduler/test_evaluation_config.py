"""The evaluation's configuration: the paging rate is parsed there under its one name, and every threshold is
parsed once per configuration, not once per window."""
from __future__ import annotations

import pytest

from driftline import defaults
from driftline.alerts.rules import AlertRules
from driftline.config import load_settings
from driftline.detectors.families import window as window_module
from driftline.errors import UserError
from driftline.scheduler.evaluation_config import PAGING_KEY, EvaluationConfig, PagingSettings

TOML = """
[drift]
psi = 0.3
[drift.models."fraud"]
psi = 0.4
[alerts]
false_pages_per_model_per_month = 4
[alerts.models."fraud"]
false_pages_per_model_per_month = 0.5
"""


def _config(tmp_path, text: str = TOML) -> EvaluationConfig:
    path = tmp_path / "driftline.toml"
    path.write_text(text)
    return EvaluationConfig.from_settings(load_settings(path))


def test_the_paging_rate_is_the_evaluations_setting_under_one_name(tmp_path, monkeypatch):
    config = _config(tmp_path)
    assert (config.paging.rate_for("m"), config.paging.rate_for("fraud")) == (4.0, 0.5)
    assert config.paging_for("fraud").false_pages_per_model_per_month == 0.5
    assert config.paging_for("m").false_pages_per_model_per_month == 4.0
    assert not hasattr(AlertRules.from_mapping({PAGING_KEY: 4}), "false_pages_per_month")  # not the rules' to parse
    assert PagingSettings.from_mapping({}).rate_for("m") == defaults.ALERT_FALSE_PAGES_PER_MODEL_PER_MONTH
    # DRIFTLINE_FALSE_PAGES_PER_MODEL_PER_MONTH beats the file's global rate, never a model's own
    monkeypatch.setenv("DRIFTLINE_FALSE_PAGES_PER_MODEL_PER_MONTH", "0.25")
    config = _config(tmp_path)
    assert (config.paging.rate_for("m"), config.paging.rate_for("fraud")) == (0.25, 0.5)


@pytest.mark.parametrize("alerts, message", [
    ({PAGING_KEY: 0}, r"\[alerts\] false_pages_per_model_per_month: input should be greater than 0"),
    ({"models": {"m": {PAGING_KEY: "often"}}}, r"\[alerts\] models.m.false_pages_per_model_per_month: input should "
                                                r"be a valid number"),
])
def test_a_bad_paging_rate_is_a_user_error_naming_its_key(alerts, message):
    with pytest.raises(UserError, match=message):
        PagingSettings.from_mapping(alerts)


def test_thresholds_are_parsed_once_per_configuration_not_per_window(tmp_path, monkeypatch):
    config = _config(tmp_path)
    parsed = []
    real = window_module.WindowThresholds.from_mapping

    def counting(mapping, model=None):
        parsed.append(model)
        return real(mapping, model=model)

    monkeypatch.setattr(window_module.WindowThresholds, "from_mapping", counting)
    for _ in range(50):  # fifty windows of two models
        assert config.thresholds_for("fraud").drift.psi == 0.4
        assert config.thresholds_for("m").drift.psi == 0.3
        config.slo_for("m"), config.freshness_for("m"), config.paging_for("m")
    # "fraud" has tables of its own, parsed at start-up; "m" once, at its first window
    assert parsed == ["m"]
    assert config.thresholds_for("m") is config.thresholds_for("m")
    # the same content is the same version; a changed configuration is parsed anew
    assert _config(tmp_path).version == config.version
    changed = _config(tmp_path, TOML.replace("psi = 0.3", "psi = 0.35"))
    assert changed.version != config.version and changed.thresholds_for("m").drift.psi == 0.35
