"""The Rollouts page's pure shaping: plans in words, arm roles, per-arm figures."""
from __future__ import annotations

import pandas as pd
import pytest

from driftline.dashboard import rollout_presentation
from driftline.rollouts import ab_plan, canary_plan, shadow_plan
from driftline.vocabulary import ERROR_RATE, P99_MS


@pytest.mark.parametrize("plan, words", [
    (canary_plan("m", "3", 5), ["canary", "v3", "5 %"]),
    (shadow_plan("m", "3", 0.5), ["shadow", "v3", "50 %"]),
    (ab_plan("m", [("2", 50), ("3", 50)]), ["A/B", "v2 50 %", "v3 50 %"]),
])
def test_plan_text_names_mode_versions_and_weights(plan, words):
    text = rollout_presentation.plan_text(plan.to_dict())
    assert all(w in text for w in words), text
    assert rollout_presentation.plan_text(None) == "production only"


def test_arm_roles_mark_production_and_the_candidates():
    assert rollout_presentation.arm_roles(canary_plan("m", "3", 5).to_dict(), "2") == {"2": "production",
                                                                                 "3": "canary candidate"}
    roles = rollout_presentation.arm_roles(ab_plan("m", [("2", 40), ("3", 60)]).to_dict(), "2")
    assert roles["2"].startswith("production") and "40 %" in roles["2"] and "60 %" in roles["3"]


def test_arm_table_pools_the_error_rate_by_events_with_an_interval_around_it():
    traffic = pd.DataFrame({"version": ["1", "1", "2"], "window_start_ms": [0, 60_000, 0], "events": [100, 300, 50]})
    rates = {("1", 0): 0.1, ("1", 60_000): 0.2, ("2", 0): 0.3}
    p99 = {0: 10.0, 60_000: 30.0}
    serving = pd.DataFrame(
        [{"version": v, "window_start_ms": w, "metric": ERROR_RATE, "value": r} for (v, w), r in rates.items()]
        + [{"version": "1", "window_start_ms": w, "metric": P99_MS, "value": p} for w, p in p99.items()])
    roles = {"1": "production", "2": "canary candidate"}
    table = rollout_presentation.arm_table(traffic, serving, roles, 0.05).set_index("version")
    events = traffic.groupby("version")["events"].sum()
    expected = sum(rates[("1", w)] * e for w, e in zip([0, 60_000], [100, 300])) / events["1"]
    assert table.loc["1", "events"] == events["1"] and table.loc["1", "windows"] == 2
    assert table.loc["1", "error_rate"] == pytest.approx(expected)
    assert table.loc["1", "error_low"] < expected < table.loc["1", "error_high"]
    # fewer events, wider interval
    width = lambda v: table.loc[v, "error_high"] - table.loc[v, "error_low"]  # noqa: E731
    assert width("2") > width("1")
    assert table.loc["1", "p99_ms"] == pytest.approx(sum(p99.values()) / len(p99)) and pd.isna(table.loc["1", "p50_ms"])
    assert pd.isna(table.loc["2", "p99_ms"])
