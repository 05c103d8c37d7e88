"""Every page with Streamlit's AppTest, on a seeded store, an empty store and a store that is not there.

The sidebar selectors live in the entry script; AppTest only shows them on the first
page it runs, so after `switch_page` they are driven through `session_state` (as a
click on them would set it) and page-level selectors are clicked directly.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from sqlalchemy import update
from streamlit.testing.v1 import AppTest

from driftline.store.db import session_scope
from driftline.store.models import BaselineRecord, WindowStateRecord
from driftline.vocabulary import LATENCY
from tests.support.demo_store import CREDIT, FRAUD

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")

TIMEOUT = 90  # seconds per script run: generous on a shared two-core machine


def open_app(page: str | None = None, **state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert_clean(at)
    if page:
        at.switch_page(f"views/{page}.py")
        for key, value in state.items():
            at.session_state[key] = value
        at.run()
        assert_clean(at)
    return at


def assert_clean(at: AppTest) -> None:
    """No exception, and no error box other than a detector's breach (the drill-down's red verdict)."""
    assert not at.exception, [e.message for e in at.exception]
    problems = [e.value for e in at.error if not e.value.startswith("**Breached**")]
    assert not problems, problems


def charts(at: AppTest) -> int:
    return len(at.get("vega_lite_chart"))


def metric(at: AppTest, label: str) -> str:
    values = [m.value for m in at.metric if m.label == label]
    assert values, f"no metric {label!r} in {[m.label for m in at.metric]}"
    return values[0]


# --- empty and missing stores --------------------------------------------------------------

def test_empty_store_overview_says_how_to_get_started(sqlite_url, monkeypatch):
    monkeypatch.setenv("DRIFTLINE_DB", sqlite_url)
    at = open_app()
    text = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.code)
    assert "Get started" in [s.value for s in at.subheader]
    for command in ("driftline up", "driftline train", "driftline worker", "driftline replay"):
        assert command in text
    assert not at.selectbox(key="range").value is None
    assert [s.label for s in at.selectbox] == ["Time range", "Auto-refresh"]  # no model to choose


@pytest.mark.parametrize("page", ["model", "feature", "alerts", "retraining", "report"])
def test_empty_store_every_page_renders(sqlite_url, monkeypatch, page):
    monkeypatch.setenv("DRIFTLINE_DB", sqlite_url)
    at = open_app(page)
    if page in ("model", "feature", "report"):
        assert "No models in the store yet" in at.info[0].value
    else:
        assert at.title[0].value.lower() == page


def test_a_store_without_tables_says_to_run_the_migrations(tmp_path, monkeypatch):
    monkeypatch.setenv("DRIFTLINE_DB", f"sqlite:///{tmp_path / 'new.db'}")
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception
    assert "driftline db upgrade" in at.error[0].value


# --- the seeded store ------------------------------------------------------------------------

def test_overview_shows_every_version_and_reacts_to_the_selectors(seeded):
    url, summary = seeded
    at = open_app()
    assert at.title[0].value == "Overview"
    assert metric(at, "Firing alerts") == str(len(summary.firing))
    headers = [m.value for m in at.markdown if m.value.startswith("#### ")]
    for model, version in summary.windows:
        assert any(f"{model} · v{version}" in h for h in headers), headers
    production = [h for h in headers if "production" in h]
    assert len(production) == len(summary.production)
    assert charts(at) == 2
    # v1 drifted in its last windows: the card lists the features drifting now.
    last_v1 = summary.windows[(CREDIT, "1")][-1]
    drifting = summary.drifted_windows[(CREDIT, "1")].get(last_v1, [])
    if drifting:
        assert any(all(f"`{f}`" in m.value for f in drifting) for m in at.markdown)
    # The time range selector re-runs the page with the new range.
    at.selectbox(key="range").set_value("1h").run()
    assert_clean(at)
    assert any(m.label == "Events (1h)" for m in at.metric)
    assert int(metric(at, "Events (1h)").replace(",", "")) < int(metric(at, "Models")) * 10**6
    at.selectbox(key="model").set_value(FRAUD).run()
    assert_clean(at)
    assert at.selectbox(key="version").value == summary.production[FRAUD]


def test_overview_says_how_far_results_are_judged_and_names_a_stalled_partition(seeded, monkeypatch):
    import time
    from datetime import datetime, timezone

    from driftline import progress
    from driftline.config import TOPIC_INFERENCE
    from driftline.store.models import PartitionWatermark

    url, summary = seeded
    # partitions heard from within 5 minutes are not stalled, however slowly the page renders here
    monkeypatch.setenv("DRIFTLINE_IDLE_PARTITION_SECONDS", "300")
    at = open_app()
    [line] = [c.value for c in at.caption if c.value.startswith("Judged up to")]
    now = int(time.time() * 1000)
    judged = summary.last_window_ms + summary.window_seconds * 1000
    assert line == f"Judged up to {progress.clock(judged, now, seconds=False)} · no collector has recorded a watermark"
    stamp = lambda ms: datetime.fromtimestamp(ms / 1000, tz=timezone.utc)  # noqa: E731
    with session_scope(url) as s:  # partition 1's collector went quiet 10 minutes ago
        s.add(PartitionWatermark(group_id="g", topic=TOPIC_INFERENCE, partition=0, event_time_ms=now - 5_000,
                                 updated_at=stamp(now - 1_000)))
        s.add(PartitionWatermark(group_id="g", topic=TOPIC_INFERENCE, partition=1, event_time_ms=now - 600_000,
                                 updated_at=stamp(now - 600_000)))
    st.cache_data.clear()  # the page's read is cached for DASHBOARD_CACHE_TTL_SECONDS
    at = open_app()
    [warning] = [w.value for w in at.warning if w.value.startswith("Judged up to")]
    assert " · collectors 10 min behind · stalled: partition 1" in warning and "`driftline status`" in warning


def test_model_page_draws_every_detector_family(seeded):
    url, summary = seeded
    at = open_app("model", model=CREDIT, version="2")
    assert at.title[0].value == f"{CREDIT} · v2"
    headers = [h.value for h in at.header]
    for section in ("Serving", "Feature drift", "Prediction drift", "Data quality", "Training-serving skew",
                    "Estimated quality (before labels)", "Model quality", "Versions"):
        assert section in headers
    # Estimated vs realized with bands: the caption says how to read them, no generic metric grid instead.
    assert any("estimated from the window's scores" in c.value for c in at.caption)
    assert metric(at, "Windows (24h)") == str(len(summary.windows[(CREDIT, "2")]))
    assert charts(at) >= 10
    assert metric(at, "Firing alerts") == str(sum(a["version"] == "2" for a in summary.firing))
    # The data-quality heatmap points at the feature with nulls.
    assert any("`credit_score`" in m.value for m in at.markdown if m.value.startswith("Breached"))
    # Colour the data-quality heatmap by one of its metrics only.
    control = at.button_group(key="colour_data_quality")
    assert "missing_rate" in control.options
    control.set_value("missing_rate").run()
    assert_clean(at)
    # Version 1 drifted: the page says so.
    at.session_state["version"] = "1"
    at.run()
    assert_clean(at)
    assert at.title[0].value == f"{CREDIT} · v1"
    assert int(metric(at, "Features drifting (any window)")) == len(
        {f for fs in summary.drifted_windows[(CREDIT, "1")].values() for f in fs})


def test_quarantined_windows_are_announced_on_the_overview_and_their_model_page(seeded):
    from datetime import datetime, timezone

    from driftline.store.models import WindowQuarantine

    url, summary = seeded
    start = summary.windows[(CREDIT, "1")][-1]
    with session_scope(url) as s:
        s.add(WindowQuarantine(model=CREDIT, version="1", window_start_ms=start, window_end_ms=start + 60_000,
                               error_type="ValueError", error="unsupported window state format None", attempts=3,
                               next_retry_at=datetime.now(timezone.utc)))
    at = open_app()
    [notice] = [w.value for w in at.warning if "quarantined" in w.value]
    assert "1 window(s) quarantined" in notice and f"{CREDIT} v1 (1)" in notice
    table = at.dataframe[0].value
    assert list(table["error"]) == ["unsupported window state format None"] and list(table["attempts"]) == [3]
    at = open_app("model", model=CREDIT, version="1")
    assert any("1 window(s) quarantined" in w.value for w in at.warning)
    at.session_state["version"] = "2"
    at.run()
    assert_clean(at)
    assert not any("quarantined" in w.value for w in at.warning)


def test_model_page_for_a_range_without_windows(seeded):
    at = open_app("model", model=CREDIT, version="1", range="1h")
    assert "No evaluated windows" in at.info[0].value


def test_feature_drill_down_shows_distributions_statistics_and_decision(seeded):
    url, summary = seeded
    drifted = summary.drifted_windows[(CREDIT, "1")]
    window, features = max(drifted.items())
    at = open_app("feature", model=CREDIT, version="1")
    windows = at.selectbox(key="window")
    assert len(windows.options) == len(summary.windows[(CREDIT, "1")])
    windows.set_value(window).run()
    assert_clean(at)
    feature = at.selectbox(key="feature")
    assert feature.value in features  # the most breached feature comes first
    verdict = at.error[0].value
    assert verdict.startswith("**Breached** for " + feature.value) and "threshold" in verdict
    assert charts(at) >= 4  # histogram, ECDF, history, evidence
    # the sequential evidence of the feature against its paging line
    assert f"Evidence of drift on {feature.value}" in [h.value for h in at.subheader]
    # The verdict's row, then the tests behind it (with the p-value corrected across features).
    table = at.dataframe[0].value
    assert table["statistic"].iloc[0] == "psi" and table["flagged"].iloc[0]
    assert {"↳ psi", "↳ ks", "↳ wasserstein", "↳ missing"} <= set(table["statistic"])
    assert table.loc[table["statistic"] == "↳ ks", "p_value"].iloc[0] < 0.05
    # A categorical feature draws category shares; the prediction has its own view.
    feature.set_value("region").run()
    assert_clean(at)
    assert any(m.label == "Unseen in training" for m in at.metric)
    at.selectbox(key="feature").set_value("__prediction__").run()
    assert_clean(at)
    assert any(m.label == "Rows in window" for m in at.metric)


def test_alerts_page_lists_alerts_notifications_and_silences(seeded):
    url, summary = seeded
    at = open_app("alerts")
    assert metric(at, "Firing") == str(len(summary.firing))
    assert metric(at, "Failed notifications") == "1"
    assert any("failed after 8 attempts" in w.value for w in at.warning)
    assert charts(at) == 2  # timeline and delivery status
    table = at.dataframe[0].value  # the active alerts, with the event-time windows they began and fired in
    firing = table[table["state"] == "firing"]
    assert len(firing) and firing["first_window_start"].notna().all() and firing["fired_window_start"].notna().all()
    assert (firing["first_window_start"] <= firing["fired_window_start"]).all()
    at.button_group(key="alert_filter").set_value("resolved").run()
    assert_clean(at)
    assert set(at.dataframe[0].value["state"]) == {"resolved"}
    picker = at.selectbox(key="alert_pick")
    picker.set_value(next(o for o in picker.options if LATENCY in o and CREDIT in o)).run()
    assert_clean(at)
    notes = at.dataframe[1].value
    assert len(notes) == 2 and set(notes["channel"]) == {"slack", "pagerduty"}
    silences = at.dataframe[-1].value
    assert "active" in set(silences["status"])


def test_retraining_page_shows_requests_and_rollbacks(seeded):
    at = open_app("retraining")
    assert metric(at, "Requests (24h)") == "4"
    assert metric(at, "Rollbacks") == "1"
    requests = at.dataframe[0].value
    assert set(requests["status"]) == {"succeeded", "failed", "requested"}
    assert "promoted v2" in set(requests["outcome"])
    at.button_group(key="retrain_scope").set_value("selected model").run()
    assert_clean(at)


def test_report_page_builds_an_evidently_report(seeded):
    url, summary = seeded
    at = open_app("report", model=CREDIT, version="2")
    frames = at.get("iframe")
    assert len(frames) == 1
    html = frames[0].proto.srcdoc
    # Evidently's drift summary over the baseline's columns (14 features and the prediction).
    assert '{"value": "15", "label": "Columns"}' in html
    assert "Dataset Drift" in html and "annual_income" in html
    assert len(at.download_button) == 1
    assert len(at.selectbox(key="report_window").options) == len(summary.windows[(CREDIT, "2")])


# --- bad data in the store ----------------------------------------------------------------------

def test_a_corrupt_window_state_is_reported_not_raised(seeded):
    url, summary = seeded
    window = summary.windows[(CREDIT, "2")][-1]
    with session_scope(url) as session:
        session.execute(update(WindowStateRecord).where(WindowStateRecord.window_start_ms == window,
                                                        WindowStateRecord.partition == 1)
                        .values(state=b"garbage"))
    at = open_app("feature", model=CREDIT, version="2", window=window)
    assert any("partition state 1" in w.value for w in at.warning)
    assert any(m.label == "Rows in window" for m in at.metric)  # the other partition still shows


def test_a_malformed_baseline_is_reported_not_raised(seeded):
    url, _ = seeded
    with session_scope(url) as session:
        session.execute(update(BaselineRecord).where(BaselineRecord.model == CREDIT, BaselineRecord.version == "2")
                        .values(summary={"format": 99}))
    at = open_app("feature", model=CREDIT, version="2")
    assert any("baseline" in w.value for w in at.warning)


def test_the_segment_filter_shows_a_segments_results_and_defaults_to_the_whole_population(seeded):
    from sqlalchemy import select

    from driftline.store.db import session_scope
    from driftline.store.models import DetectorResult

    url, summary = seeded
    with session_scope(url) as s:  # the seeded results again, as the segment region=north's, with age breached
        rows = s.scalars(select(DetectorResult).where(DetectorResult.model == CREDIT, DetectorResult.version == "1",
                                                      DetectorResult.segment == "")).all()
        s.add_all(DetectorResult(model=r.model, version=r.version, window_start_ms=r.window_start_ms,
                                 window_end_ms=r.window_end_ms, detector=r.detector, feature=r.feature, metric=r.metric,
                                 value=r.value, threshold=r.threshold, details=r.details, segment="region=north",
                                 breached=r.breached or (r.detector == "data_drift" and r.feature == "age"))
                  for r in rows)
    at = open_app("model", model=CREDIT, version="1")
    segment = at.selectbox(key="segment")
    assert segment.options == ["Whole population", "region=north"] and segment.value == ""
    segment.set_value("region=north").run()
    assert_clean(at)
    at = open_app("feature", model=CREDIT, version="1", segment="region=north")
    assert at.selectbox(key="segment").value == "region=north"
    at.selectbox(key="feature").set_value("age").run()  # breached in every window of the segment
    assert_clean(at)
    assert at.error[0].value.startswith("**Breached** for age")
    at.selectbox(key="segment").set_value("").run()  # the whole population's own verdict is back
    assert_clean(at)
    assert at.selectbox(key="segment").value == ""


def test_model_page_shows_feature_freshness_and_the_live_worker(seeded, monkeypatch, tmp_path):
    """The ages folded into the seeded window states, and a worker's real /metrics (its `WorkerMetrics`, served
    by a local HTTP server) in "Worker now"; without a worker answering, the panel says so instead."""
    import http.server
    import threading

    from prometheus_client import generate_latest

    from driftline.broker import free_port
    from driftline.config import load_settings
    from driftline.worker.metrics import WorkerMetrics

    nobody = f"http://127.0.0.1:{free_port()}/metrics"  # a free port: no worker there
    monkeypatch.setenv("DRIFTLINE_DASHBOARD_WORKER_METRICS_URL", nobody)
    at = open_app("model", model=CREDIT, version="2")
    assert any(m.value.startswith("**Feature freshness**") for m in at.markdown)
    assert any("no worker answered" in c.value for c in at.caption)

    config = tmp_path / "worker.toml"
    config.write_text("[cost]\nprice_per_replica_hour = {cpu = 0.36}\n")
    metrics = WorkerMetrics(lambda: None, lambda: 0, load_settings(config))
    metrics.set_model(CREDIT, "2", "cpu")
    for _ in range(50):
        metrics.observe_batch(1, 0.01)
        metrics.latency_predict.observe(12.0, 1.0, 10.0, "2", 1)
    body = generate_latest(metrics.registry)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("DRIFTLINE_DASHBOARD_WORKER_METRICS_URL",
                           f"http://127.0.0.1:{server.server_address[1]}/metrics")
        at = open_app("model", model=CREDIT, version="2")
        assert metric(at, "GPU") == "none"  # a CPU worker: no GPU figures, not zeros
        assert metric(at, "Utilisation").endswith("%")
        assert float(metric(at, "Cost / 1 000 predictions")) > 0
    finally:
        server.shutdown()
        server.server_close()


def test_model_page_marks_the_estimates_unreliable_after_estimation_invalid(seeded):
    from sqlalchemy import func, select

    from driftline.store.models import DetectorResult
    from driftline.vocabulary import ESTIMATED_QUALITY, ESTIMATION_INVALID

    url, _ = seeded
    at = open_app("model", model=CREDIT, version="2")
    assert not [w for w in at.warning if "Estimates unreliable" in w.value]  # no check breached in the demo
    checks = (DetectorResult.model == CREDIT, DetectorResult.version == "2",
              DetectorResult.detector == ESTIMATED_QUALITY, DetectorResult.metric == ESTIMATION_INVALID)
    with session_scope(url) as session:
        starts = sorted(session.scalars(select(DetectorResult.window_start_ms).where(*checks)))
        assert starts, "the demo store's estimates carry their check"
        since = starts[-2]  # the last two windows: realized left the bands too often
        session.execute(update(DetectorResult).where(*checks, DetectorResult.window_start_ms >= since)
                        .values(breached=True, details={"missed": ["accuracy"], "p_value": 0.001, "alpha": 0.01}))
        assert session.scalar(select(func.count()).select_from(DetectorResult).where(*checks, DetectorResult.breached))
    st.cache_data.clear()  # the page's queries are cached: read the store again
    at = open_app("model", model=CREDIT, version="2")
    notes = [w.value for w in at.warning if "Estimates unreliable since" in w.value]
    assert len(notes) == 1 and "estimation_invalid" in notes[0], [w.value for w in at.warning]
