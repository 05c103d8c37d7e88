"""The Rollouts page (AppTest) and its queries (SQLite and PostgreSQL): a canary's plan, steps and verdicts; the
comparisons and shadow disagreements stored behind verdicts; no rollout."""
from __future__ import annotations

import time

from driftline.dashboard import rollout_queries
from driftline.rollouts import ab_plan, canary_plan, shadow_plan
from driftline.store import db as store_db
from driftline.store.aliases import PRODUCTION, move_alias
from driftline.store.models import ModelAlias, ModelVersion, WindowStateRecord
from driftline.store.rollouts import BY_POLICY, CLEAR, FAIL, PASS, clear_plan, record_verdict, set_plan
from tests.dashboard.test_app import metric, open_app
from tests.support.demo_store import CREDIT

MODEL = "credit"
WINDOW_MS = 60_000
# events per window of each version, and a label-only partition (negative) that carries none
TRAFFIC = {"1": 300, "2": 20}


def _seed(url: str) -> tuple[list[int], str]:
    """A canary of v2 at 5 %, stepped up to 25 % by the policy after a passing window, then a failing window."""
    now = int(time.time() * 1000)
    starts = [(now // WINDOW_MS - 20 + i) * WINDOW_MS for i in range(3)]
    failure = "error rate +3.1 points (interval 1.2 to 5.0) > 1.0"
    with store_db.session_scope(url) as s:
        for version in ("1", "2"):
            s.add(ModelVersion(model=MODEL, version=version))
        s.flush()
        move_alias(s, MODEL, "1", "promote", None)
        set_plan(s, canary_plan(MODEL, "2", 5), reason="first look at v2")
        for start in starts:
            for version, events in TRAFFIC.items():
                s.add(WindowStateRecord(model=MODEL, version=version, window_start_ms=start,
                                        window_end_ms=start + WINDOW_MS, partition=0, events=events, state=b""))
                s.add(WindowStateRecord(model=MODEL, version=version, window_start_ms=start,
                                        window_end_ms=start + WINDOW_MS, partition=-1, events=999, state=b""))
    with store_db.session_scope(url) as s:
        record_verdict(s, MODEL, "2", starts[0], starts[0] + WINDOW_MS, PASS, [])
        set_plan(s, canary_plan(MODEL, "2", 25), by=BY_POLICY, reason="step up (window: pass)")
    with store_db.session_scope(url) as s:
        record_verdict(s, MODEL, "2", starts[1], starts[1] + WINDOW_MS, FAIL, [failure])
    return starts, failure


def test_rollouts_page_shows_the_plan_arms_verdicts_and_steps(sqlite_url, monkeypatch):
    monkeypatch.setenv("DRIFTLINE_DB", sqlite_url)
    starts, failure = _seed(sqlite_url)
    at = open_app("rollouts")
    assert at.title[0].value == "Rollouts"
    assert metric(at, "Mode") == "canary" and metric(at, "Candidate") == "v2" and metric(at, "Production") == "v1"
    text = " ".join(m.value for m in at.markdown)
    assert "canary: v2 on 25 % of requests" in text
    assert f"Latest verdict: {FAIL}" in text and failure in text

    arms, verdicts, steps = (d.value for d in at.dataframe)
    by_version = arms.set_index("version")
    for version, events in TRAFFIC.items():  # label partitions are not traffic
        assert by_version.loc[version, "events"] == events * len(starts)
        assert by_version.loc[version, "windows"] == len(starts)
    assert by_version.loc["2", "role"] == "canary candidate"
    assert list(verdicts["verdict"]) == [FAIL, PASS]  # newest first
    assert verdicts["reasons"].iloc[0] == failure
    assert list(steps["by"]) == [BY_POLICY, "cli"]
    assert list(steps["reason"]) == ["step up (window: pass)", "first look at v2"]
    assert steps["change"].iloc[0] == "canary: v2 on 5 % of requests → canary: v2 on 25 % of requests"


def test_rollouts_page_without_rollouts_says_how_to_start_one(sqlite_url, monkeypatch):
    monkeypatch.setenv("DRIFTLINE_DB", sqlite_url)
    at = open_app("rollouts")
    assert "No rollouts yet" in at.info[0].value
    assert "driftline rollout canary --model M --version V --weight 5" in [c.value for c in at.code]
    assert not at.dataframe


def test_rollout_queries_read_plans_steps_verdicts_and_traffic(db_url):
    starts, failure = _seed(db_url)
    assert rollout_queries.rollout_models(db_url) == [MODEL]
    plans = rollout_queries.plans(db_url)
    assert list(plans["candidate"]) == ["2"] and plans["plan"].iloc[0]["weight"] == 25
    assert plans["updated_at"].iloc[0] >= plans["started_at"].iloc[0]
    assert list(rollout_queries.steps(db_url, MODEL)["by"]) == ["cli", BY_POLICY]
    verdicts = rollout_queries.verdicts(db_url, MODEL)
    assert list(verdicts["window_start_ms"]) == starts[:2] and verdicts["reasons"].iloc[1] == [failure]
    traffic = rollout_queries.arm_traffic(db_url, MODEL, ("1", "2"), starts[0], starts[-1] + WINDOW_MS)
    assert traffic.groupby("version")["events"].sum().to_dict() == {v: e * len(starts) for v, e in TRAFFIC.items()}
    assert rollout_queries.production_version(db_url, MODEL) == "1"


def test_a_finished_rollout_keeps_its_history_and_compares_the_versions_it_judged(sqlite_url, monkeypatch):
    monkeypatch.setenv("DRIFTLINE_DB", sqlite_url)
    starts, failure = _seed(sqlite_url)
    with store_db.session_scope(sqlite_url) as s:
        clear_plan(s, MODEL, by=BY_POLICY, reason="roll back (window: fail)")
    at = open_app("rollouts")
    assert "**Plan:** production only (no rollout in progress)" in [m.value for m in at.markdown]
    arms, verdicts, steps = (d.value for d in at.dataframe)
    assert dict(zip(arms["version"], arms["role"])) == {"1": "production", "2": "was candidate"}
    assert len(verdicts) == 2
    assert steps["action"].iloc[0] == CLEAR and steps["change"].iloc[0].endswith("→ production only")


def test_arms_read_the_real_detectors_latency_and_error_results(seeded):
    url, summary = seeded
    with store_db.session_scope(url) as s:
        production = s.get(ModelAlias, (CREDIT, PRODUCTION)).version
        candidate = next(v for v in ("1", "2", "3") if v != production)
        set_plan(s, canary_plan(CREDIT, candidate, 5))
    at = open_app("rollouts")
    arms = at.dataframe[0].value.set_index("version")
    for version in (production, candidate):
        assert arms.loc[version, "events"] > 0
        assert arms.loc[version, "p50_ms"] <= arms.loc[version, "p95_ms"] <= arms.loc[version, "p99_ms"]
        assert arms.loc[version, "error_low"] <= arms.loc[version, "error_rate"] <= arms.loc[version, "error_high"]
    assert len(at.get("vega_lite_chart")) == 3  # events, p99 and error rate per arm


def _comparison(arm, metric, value, lower, upper, count=400):
    return {"arm": arm, "metric": metric, "value": value, "lower": lower, "upper": upper, "count": count,
            "insufficient_data": False}


def _seed_details(url: str) -> list[int]:
    """A shadow of v2 judged over two windows (flip rate, examples), then a three-arm A/B test naming v3."""
    now = int(time.time() * 1000)
    starts = [(now // WINDOW_MS - 10 + i) * WINDOW_MS for i in range(3)]
    with store_db.session_scope(url) as s:
        for version in ("1", "2", "3"):
            s.add(ModelVersion(model=MODEL, version=version))
        s.flush()
        move_alias(s, MODEL, "1", "promote", None)
        set_plan(s, shadow_plan(MODEL, "2"))
        for i, start in enumerate(starts[:2]):
            examples = [{"arm": "2", "request_id": f"req-{i}-{k}", "production": 0.1 * k, "candidate": 0.9,
                         "difference": 0.9 - 0.1 * k} for k in range(3)]
            record_verdict(s, MODEL, "2", start, start + WINDOW_MS, PASS, [], {
                "reference": "1", "alpha": 0.05, "examples": examples,
                "comparisons": [_comparison("2", "flip_rate", 0.1 + i / 10, 0.05 + i / 10, 0.15 + i / 10, 200),
                                _comparison("2", "error_rate_delta", 0.001, -0.01, 0.012)]})
    with store_db.session_scope(url) as s:
        set_plan(s, ab_plan(MODEL, [("1", 34), ("2", 33), ("3", 33)]))
        record_verdict(s, MODEL, "1,2,3", starts[2], starts[2] + WINDOW_MS, PASS, ["A/B test: arm 3 is the winner"], {
            "reference": "1", "alpha": 0.025, "winner": "3", "examples": [],
            "comparisons": [_comparison("2", "quality_delta", 0.01, -0.03, 0.05),
                            _comparison("3", "quality_delta", 0.12, 0.07, 0.17)]})
    return starts


def test_rollouts_page_draws_the_comparisons_behind_the_verdicts_and_the_disagreements(sqlite_url, monkeypatch):
    monkeypatch.setenv("DRIFTLINE_DB", sqlite_url)
    starts = _seed_details(sqlite_url)
    at = open_app("rollouts")
    assert "A/B winner: v3" in " ".join(c.value for c in at.caption)
    [chooser] = [s for s in at.selectbox if s.label == "Metric"]
    assert chooser.options == ["flip_rate", "error_rate_delta", "quality_delta"]  # the vocabulary's order
    arms, verdicts, latest, disagreements, steps = (d.value for d in at.dataframe)
    assert list(verdicts["candidate"]) == ["1,2,3", "2", "2"]
    assert dict(zip(latest["arm"], latest["value"])) == {"2": 0.01, "3": 0.12}  # the newest window only
    assert list(latest["lower"]) == [-0.03, 0.07] and list(latest["upper"]) == [0.05, 0.17]
    assert len(disagreements) == 6 and list(disagreements["request_id"][:3]) == ["req-1-0", "req-1-1", "req-1-2"]
    assert disagreements["production"].iloc[1] == "0.1" and disagreements["difference"].iloc[0] == 0.9
    assert len(at.get("vega_lite_chart")) == 1  # no window states here: the comparisons' chart only
    chooser.set_value("quality_delta").run()
    assert not at.exception
    [*_, latest_again, _, _] = (d.value for d in at.dataframe)
    assert list(latest_again["arm"]) == ["2", "3"]


def test_comparisons_are_derived_from_the_stored_details(db_url):
    from driftline.dashboard import rollout_presentation

    starts = _seed_details(db_url)
    verdicts = rollout_queries.verdicts(db_url, MODEL)
    frame = rollout_presentation.comparisons(verdicts)
    assert len(frame) == 6 and list(frame["window_start_ms"].unique()) == starts
    series = rollout_presentation.delta_series(frame, "flip_rate")
    assert list(series["value"]) == [0.1, 0.2] and list(series["series"]) == ["v2", "v2"]
    assert (series["lower"] < series["value"]).all() and (series["value"] < series["upper"]).all()
    quality = rollout_presentation.delta_series(frame, "quality_delta")
    assert list(quality["series"]) == ["v2", "v3"]
    examples = rollout_presentation.examples(verdicts, limit=4)
    assert list(examples["request_id"]) == ["req-1-0", "req-1-1", "req-1-2", "req-0-0"]
    assert rollout_presentation.winner_text(verdicts["details"].iloc[-1]) == "A/B winner: v3"
    # verdicts stored without details (or with foreign ones) add nothing
    bare = verdicts.assign(details=[{}, None, {"comparisons": None}])
    assert rollout_presentation.comparisons(bare).empty and rollout_presentation.examples(bare).empty
    assert rollout_presentation.compared_metrics(rollout_presentation.comparisons(bare)) == []
