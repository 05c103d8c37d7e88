"""The overview at fleet size: versions ranked by what needs attention (firing alerts, then drift, then estimated
quality), a table for all and cards for the first, and a search by model name; on a store of cloned models."""
from __future__ import annotations

import shutil
import time

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from driftline import defaults
from driftline.dashboard import attention, queries
from driftline.store import db as store_db
from tests.dashboard.test_app import APP, TIMEOUT, assert_clean
from tests.support.fleet_store import clone_fleet, model_name

MODELS = 40  # more than OVERVIEW_CARDS: the ranked table is drawn; firing: 0, 15, 30; drifting: every 7th
# firing first (the drifting one, then the lower estimate), then drift (lowest estimate first), then estimates
EXPECTED = [0, 30, 15, 35, 28, 21, 14, 7, 39, 38]


@pytest.fixture(scope="module")
def fleet_url(_drift_scenario_template, tmp_path_factory):
    path = tmp_path_factory.mktemp("fleet-overview") / "fleet.db"
    shutil.copyfile(_drift_scenario_template, path)
    url = f"sqlite:///{path}"
    minute = 60_000
    clone_fleet(url, MODELS, start_ms=int(time.time() * 1000) // minute * minute - 30 * minute, firing_every=15)
    yield url
    store_db.dispose_engines()


def fleet_order(models) -> list[str]:
    return [m for m in models if m.startswith("fleet-")]


def test_the_ranking_puts_firing_alerts_then_drift_then_estimated_quality_first(fleet_url):
    end = int(time.time() * 1000) + 60_000
    start = end - 86_400_000
    versions = queries.model_versions(fleet_url, start, end)
    ranked = attention.ranking(versions, queries.version_activity(fleet_url, start, end),
                               queries.version_health(fleet_url, start, end), queries.alert_counts(fleet_url))
    assert fleet_order(ranked["model"])[:len(EXPECTED)] == [model_name(i) for i in EXPECTED]
    first = ranked.set_index("model").loc[model_name(0)]
    assert first["firing"] == 1 and first["drifted_features"] == 1 and first["colour"] == "red"
    assert ranked.set_index("model").loc[model_name(35), "status"].startswith("breaching: ")
    assert list(attention.matching(ranked, " FLEET-003")["model"]) == [model_name(i) for i in (30, 35, 39, 38, 37, 36,
                                                                                               34, 33, 32, 31)]
    # the cards' rows: one query for the versions asked for, nothing of the others
    latest = queries.latest_results(fleet_url, start, end, ((model_name(3), "1"), (model_name(7), "1")))
    assert set(latest["model"]) == {model_name(3), model_name(7)}
    assert set(latest.loc[latest["breached"] & (latest["detector"] == "data_drift"), "model"]) == {model_name(7)}


def test_the_overview_ranks_the_fleet_and_searches_it_by_model(fleet_url, monkeypatch):
    monkeypatch.setenv("DRIFTLINE_DB", fleet_url)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert_clean(at)
    [table] = at.dataframe
    ranked = table.value
    assert len(ranked) == MODELS + 1  # and the template, production without windows in range
    assert fleet_order(ranked["model"])[:len(EXPECTED)] == [model_name(i) for i in EXPECTED]
    headers = [m.value for m in at.markdown if m.value.startswith("#### ")]
    assert len(headers) == defaults.OVERVIEW_CARDS and model_name(0) in headers[0]
    at.text_input(key="search").set_value("fleet-003").run()
    assert_clean(at)
    headers = [m.value for m in at.markdown if m.value.startswith("#### ")]
    assert [h.split("#### ")[1].split(" ·")[0] for h in headers] == [model_name(i) for i in (30, 35, 39, 38, 37, 36,
                                                                                                 34, 33, 32, 31)]
    assert not at.dataframe  # ten cards: no table needed
    at.text_input(key="search").set_value("no-such-model").run()
    assert_clean(at)
    assert "no-such-model" in at.info[0].value and not [m for m in at.markdown if m.value.startswith("#### ")]


def test_a_version_without_results_ranks_after_those_with_an_estimate_and_breaches_are_counted_by_family():
    versions = pd.DataFrame({"model": ["a", "b", "c"], "version": ["1", "1", "1"], "production": [True] * 3})
    health_rows = pd.DataFrame({"model": ["a", "b"], "version": ["1", "1"], "window_start_ms": [0, 0],
                                "breached": [(), ("estimated_quality",)], "quality_margin": [0.1, -0.05]})
    none = pd.DataFrame(columns=["model", "version", "firing", "pending", "windows", "events", "last_update"])
    ranked = attention.ranking(versions, none, health_rows, none)
    assert list(ranked["model"]) == ["b", "a", "c"]
    # b breached its estimate; a and c had no windows in the activity frame
    assert ranked["status"][0].startswith("breaching: ") and list(ranked["status"][1:]) == ["no traffic in range"] * 2
    health_rows["breached"] = [("data_drift:x", "data_drift:y", "data_quality:x", "dataset_drift", "latency:total"), ()]
    first = attention.ranking(versions, none, health_rows, none).iloc[0]
    assert (first["model"], first["drifted_features"], first["drift"]) == ("a", 2, 3)
    assert first["breached_detectors"] == ("data_drift", "dataset_drift", "data_quality", "latency")
