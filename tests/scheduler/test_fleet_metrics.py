"""The scheduler's /metrics for a fleet: drift summed up per model version by default, per-feature series only for
the models `scheduler_metrics_detail_models` names, and a store read of a fixed number of queries."""
from __future__ import annotations

import shutil

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import event

from driftline.config import load_settings
from driftline.scheduler.metrics import SchedulerMetrics, detail_filter, detail_patterns
from driftline.store import db as store_db
from tests.support.fleet_store import clone_fleet

MODELS = 120


@pytest.fixture(scope="module")
def fleet(_drift_scenario_template, tmp_path_factory):
    """A store of MODELS copies of an evaluated 3-feature model (income drifted in every seventh copy)."""
    path = tmp_path_factory.mktemp("fleet") / "fleet.db"
    shutil.copyfile(_drift_scenario_template, path)
    url = f"sqlite:///{path}"
    found = clone_fleet(url, MODELS)
    yield url, found
    store_db.dispose_engines()


def scrape(url: str, **options) -> list[tuple[str, dict[str, str], float]]:
    text = generate_latest(SchedulerMetrics(url, cache_seconds=0.0, **options).registry).decode()
    return [(s.name, s.labels, s.value) for family in text_string_to_metric_families(text) for s in family.samples]


def test_by_default_a_fleet_gets_per_version_drift_and_no_per_feature_series(fleet):
    url, found = fleet
    series = scrape(url)
    assert not [labels for _, labels, _ in series if "feature" in labels]
    assert not [labels for name, labels, _ in series
                if name == "driftline_evidence_e_value" and labels["stream"].startswith("data_drift/")]
    per_version = lambda name: {labels["model"]: value for n, labels, value in series if n == name}  # noqa: E731
    fleet_models = {m for m in per_version("driftline_drifted_features") if m.startswith("fleet-")}
    assert fleet_models == set(found.models)
    drifted = per_version("driftline_drifted_features")
    assert {m for m in found.models if drifted[m] > 0} == set(found.drifting)
    assert {per_version("driftline_judged_features")[m] for m in found.models} == {3}
    worst = {(labels["model"], labels["test"]): value for name, labels, value in series
             if name == "driftline_max_feature_drift_score"}
    assert worst[(found.drifting[0], "psi")] > 0.2  # income's +25 shift, whatever the decision says
    # the series grow with the models, not with models x features: a fixed number per version beside the
    # per-model lag and alerts
    assert len(series) < 30 * (MODELS + 1)
    # the detail models' features come back, every test's score beside the decision, and nobody else's
    detail = scrape(url, detail_models=detail_patterns("fleet-000*, credit"))
    featured = {labels["model"] for name, labels, _ in detail if name == "driftline_feature_drifted"}
    assert featured == {"credit", *(f"fleet-000{i}" for i in range(10))}
    tests = {labels["test"] for name, labels, _ in detail
             if name == "driftline_feature_drift_score" and labels["model"] == "fleet-0000"}
    assert {"psi", "ks", "wasserstein", "jensenshannon"} <= tests
    assert [s for s in detail if s[0] == "driftline_drifted_features"] == \
        [s for s in series if s[0] == "driftline_drifted_features"]


def test_a_scrape_reads_the_store_in_a_fixed_number_of_queries(fleet):
    """However many models: one query per part of the snapshot, never one per model."""
    url, _ = fleet
    statements: list[str] = []
    engine = store_db.get_engine(url)
    listener = lambda *args: statements.append(args[2])  # noqa: E731 - (conn, cursor, statement, ...)
    event.listen(engine, "before_cursor_execute", listener)
    try:
        scrape(url, detail_models=("fleet-00*",))
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    assert 0 < len(statements) <= 15, statements


def test_the_detail_setting_is_a_list_of_names_and_globs(monkeypatch):
    monkeypatch.setenv("DRIFTLINE_SCHEDULER_METRICS_DETAIL_MODELS", " credit ,fraud-*,")
    patterns = detail_patterns(load_settings().scheduler_metrics_detail_models)
    assert patterns == ("credit", "fraud-*")
    accepts = detail_filter(patterns)
    assert [accepts(m) for m in ("credit", "credit-2", "fraud-eu", "fraud")] == [True, False, True, False]
    assert not detail_filter(())("credit") and detail_filter(("*",))("anything")
    assert detail_filter("credit, fraud-*")("fraud-eu") and not detail_filter("credit")("c")  # not its letters


def test_up_exports_every_models_features_unless_told_otherwise():
    """`driftline up` runs a few demo models: its scheduler exports their features' series (README's curl)."""
    from driftline.commands.up import component_env

    setting = "DRIFTLINE_SCHEDULER_METRICS_DETAIL_MODELS"
    assert component_env(load_settings(), 15, "http://127.0.0.1:8000")[setting] == "*"
    own = load_settings(scheduler_metrics_detail_models="credit")
    assert component_env(own, 15, "http://127.0.0.1:8000")[setting] == "credit"
