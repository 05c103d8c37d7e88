"""The scheduler's /metrics: the latest evaluated window of each live model version, read from the store, so
every scheduler on one store exports the same values; bounded cardinality; Prometheus naming."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from driftline.broker import free_port
from driftline.config import load_settings
from driftline.store.db import session_scope
from driftline.store.models import (Alert, DeadLetter, DetectorResult, PartitionWatermark, WindowEvaluation,
                                    WindowQuarantine, utcnow)
from driftline.scheduler.metrics import SchedulerMetrics
from tests.support.drift_store import T0, WINDOW_MS, evaluate_drift_scenario, jobs_for, register, write_window
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
# The names the contract promises (docs/contract.md); the exporter may add others.
CONTRACT_NAMES = ("driftline_feature_drift_score", "driftline_feature_drifted", "driftline_drifted_features",
                  "driftline_dataset_drifted", "driftline_prediction_drifted", "driftline_data_quality_issues",
                  "driftline_estimated_quality", "driftline_realized_quality", "driftline_alerts_firing",
                  "driftline_window_end_timestamp_seconds", "driftline_windows_quarantined",
                  "driftline_dead_letters_total", "driftline_rollout_verdict", "driftline_evidence_e_value",
                  "driftline_evidence_paging_line")


def exposition(db_url: str, **options) -> str:
    return generate_latest(SchedulerMetrics(db_url, **options).registry).decode()


def samples(text: str) -> dict[tuple[str, tuple], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict, name: str, **labels) -> float:
    return found[(name, tuple(sorted(labels.items())))]


def test_the_drifted_feature_of_the_latest_window_is_exported_with_its_scores(db_url):
    evaluate_drift_scenario(db_url)
    text = exposition(db_url, detail_models=("cred*",))
    found = samples(text)
    window = {"model": "credit", "version": "1"}
    assert value(found, "driftline_feature_drifted", feature="income", **window) == 1
    assert value(found, "driftline_feature_drifted", feature="age", **window) == 0
    assert value(found, "driftline_drifted_features", **window) == 1
    assert value(found, "driftline_dataset_drifted", **window) in (0, 1)
    assert value(found, "driftline_window_end_timestamp_seconds", **window) == (T0 + 2 * WINDOW_MS) / 1000
    assert value(found, "driftline_window_events", **window) == 400
    scores = {dict(labels)["test"]: v for (name, labels), v in found.items()
              if name == "driftline_feature_drift_score" and dict(labels)["feature"] == "income"}
    assert "psi" in scores and scores["psi"] > 0.2 and "ks" in scores
    assert value(found, "driftline_dead_letters_total") == 0
    assert value(found, "driftline_windows_quarantined") == 0
    # data-quality checks are counted in the store, one series per check: income's shift left its training range
    checks = {dict(labels)["check"]: v for (name, labels), v in found.items() if name == "driftline_data_quality_issues"}
    assert checks["out_of_range_share"] == 1 and checks["missing_rate"] == 0
    # the sequential evidence of each stream against its paging line: income's drift pages, age's does not
    income = {"stream": "data_drift/income/psi", **window}
    assert value(found, "driftline_evidence_e_value", **income) >= value(found, "driftline_evidence_paging_line", **income)
    age = {"stream": "data_drift/age/psi", **window}
    assert value(found, "driftline_evidence_e_value", **age) < value(found, "driftline_evidence_paging_line", **age)
    for name in CONTRACT_NAMES:  # every promised family is declared, with or without samples
        assert re.search(rf"(?m)^# TYPE {name.removesuffix('_total')}(_total)? ", text), name


def test_a_statistic_turned_on_in_the_drift_section_is_judged_and_exported(sqlite_url, tmp_path):
    """The scheduler judges windows with the registry's statistics that the configuration turns on; /metrics
    exports each as one more test of the feature."""
    config = tmp_path / "driftline.toml"
    config.write_text("[drift]\nhellinger = 0.1\n[drift.features.region]\nhellinger = 0.5\n")
    evaluate_drift_scenario(sqlite_url, config_file=config)
    found = samples(exposition(sqlite_url, detail_models=("*",)))
    scores = {dict(labels)["feature"]: v for (name, labels), v in found.items()
              if name == "driftline_feature_drift_score" and dict(labels)["test"] == "hellinger"}
    assert set(scores) == {"income", "age", "region"}
    assert scores["income"] > 0.5 and scores["age"] < 0.1
    with session_scope(sqlite_url) as s:
        region = next(r for r in s.query(DetectorResult).filter_by(detector="data_drift", feature="region")
                      .order_by(DetectorResult.id.desc()))
        assert region.details["tests"]["hellinger"]["threshold"] == 0.5


def test_two_exporters_on_one_store_and_a_restart_export_the_same_values(db_url):
    evaluate_drift_scenario(db_url)
    with session_scope(db_url) as s:
        s.add(DeadLetter(topic="driftline.inference", reason="not JSON"))
        s.add(Alert(fingerprint="f1", model="credit", version="1", detector="data_drift", feature="income",
                    severity="warning", state="firing"))
    # the judging lag is measured against the wall clock: one clock for both
    first, second = (exposition(db_url, wall_clock=lambda: (T0 + 60_000) / 1000) for _ in range(2))
    strip = lambda text: re.sub(r"(?m)^driftline_metrics_store_read_seconds .*$", "", text)  # noqa: E731
    assert strip(first) == strip(second)
    found = samples(first)
    assert value(found, "driftline_dead_letters_total") == 1
    # income's 2.5-sd shift fires on its first window (the sequential policy), beside the alert added here
    assert value(found, "driftline_alerts_firing", model="credit", severity="warning") == 2


def test_judging_lag_per_model_and_the_collectors_low_watermark(sqlite_url):
    """The judging lag is now less the latest judged window's end over the model's versions; the low watermark is
    exported once collectors record one, and is absent while a partition has stored nothing."""
    from datetime import datetime, timezone

    from driftline.config import TOPIC_INFERENCE

    now = T0 + 60 * WINDOW_MS
    at = lambda ms: datetime.fromtimestamp(ms / 1000, tz=timezone.utc)  # noqa: E731
    with session_scope(sqlite_url) as s:
        for model, version, end in (("credit", "1", T0 + WINDOW_MS), ("credit", "1", T0 + 2 * WINDOW_MS),
                                    ("credit", "2", T0 + 5 * WINDOW_MS), ("fraud", "1", T0 + WINDOW_MS)):
            s.add(WindowEvaluation(model=model, version=version, window_start_ms=end - WINDOW_MS, window_end_ms=end,
                                   events=5, status="ok"))
    scrape = lambda: exposition(sqlite_url, wall_clock=lambda: now / 1000, idle_ms=30_000)  # noqa: E731
    text = scrape()
    found = samples(text)
    lags = {dict(labels)["model"]: v for (name, labels), v in found.items()
            if name == "driftline_scheduler_judging_lag_seconds"}
    assert lags == {"credit": (now - T0 - 5 * WINDOW_MS) / 1000, "fraud": (now - T0 - WINDOW_MS) / 1000}
    # no collector has recorded a watermark: the family is declared, without a series
    assert re.search(r"(?m)^# TYPE driftline_stream_watermark_timestamp_seconds gauge$", text)
    assert not any(name == "driftline_stream_watermark_timestamp_seconds" for name, _ in found)
    with session_scope(sqlite_url) as s:
        for partition, event_ms in ((0, now - 20_000), (1, now - 45_000)):
            s.add(PartitionWatermark(group_id="g", topic=TOPIC_INFERENCE, partition=partition, event_time_ms=event_ms,
                                     updated_at=at(now - 1_000)))
    assert value(samples(scrape()), "driftline_stream_watermark_timestamp_seconds") == (now - 45_000) / 1000
    with session_scope(sqlite_url) as s:  # a partition assigned, nothing stored yet: it holds every window back
        s.add(PartitionWatermark(group_id="g", topic=TOPIC_INFERENCE, partition=2, updated_at=at(now - 1_000)))
    assert not any(name == "driftline_stream_watermark_timestamp_seconds" for name, _ in samples(scrape()))


def test_a_scrape_within_the_cache_interval_does_not_read_the_store_again(sqlite_url):
    evaluate_drift_scenario(sqlite_url)
    now = [100.0]
    metrics = SchedulerMetrics(sqlite_url, cache_seconds=5.0, clock=lambda: now[0])
    before = samples(generate_latest(metrics.registry).decode())
    with session_scope(sqlite_url) as s:
        s.add(WindowQuarantine(model="credit", version="1", window_start_ms=0, window_end_ms=1, error_type="E",
                               error="boom", next_retry_at=utcnow()))
    now[0] += 4.9
    assert samples(generate_latest(metrics.registry).decode()) == before
    now[0] += 0.2
    assert value(samples(generate_latest(metrics.registry).decode()), "driftline_windows_quarantined") == 1


def test_features_per_version_are_capped_drifted_first_and_the_count_covers_them_all(sqlite_url):
    evaluate_drift_scenario(sqlite_url, shifts={"income": 25.0, "age": 30.0})
    found = samples(exposition(sqlite_url, max_features=1, detail_models=("*",)))
    drifted = {dict(labels)["feature"] for (name, labels) in found if name == "driftline_feature_drifted"}
    assert len(drifted) == 1 and drifted <= {"income", "age"}
    assert value(found, "driftline_drifted_features", model="credit", version="1") == 2
    scored = {dict(labels)["feature"] for (name, labels) in found if name == "driftline_feature_drift_score"}
    assert scored == drifted


def test_only_serving_versions_are_exported(sqlite_url):
    """v1's last window would read as an ever-growing lag once v2 is production; it is left out."""
    evaluate_drift_scenario(sqlite_url)
    rng = np.random.default_rng(7)
    baseline = register(sqlite_url, "credit", "2", rng)  # promoted: production moves to v2
    write_window(sqlite_url, "credit", "2", baseline, T0 + 5 * WINDOW_MS, rng)
    jobs_for(sqlite_url).evaluate_due_windows(now_ms=T0 + 7 * WINDOW_MS)
    found = samples(exposition(sqlite_url))
    versions = {dict(labels)["version"] for (name, labels) in found if name == "driftline_window_end_timestamp_seconds"}
    assert versions == {"2"}


def test_the_setting_and_the_server_serve_metrics_on_loopback(sqlite_url, monkeypatch):
    monkeypatch.setenv("DRIFTLINE_SCHEDULER_METRICS_PORT", "9321")
    assert load_settings().scheduler_metrics_port == 9321
    monkeypatch.delenv("DRIFTLINE_SCHEDULER_METRICS_PORT")
    assert load_settings().scheduler_metrics_port == 0  # off unless asked for
    evaluate_drift_scenario(sqlite_url)
    metrics = SchedulerMetrics(sqlite_url, detail_models=("credit",))
    port = metrics.serve(0)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            body = response.read().decode()
    finally:
        metrics.stop()
    assert 'driftline_feature_drifted{feature="income",model="credit",version="1"} 1.0' in body


def test_the_exposition_follows_prometheus_naming_conventions(sqlite_url):
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: run scripts/install-system-deps.sh (Debian package prometheus)"
    evaluate_drift_scenario(sqlite_url)
    result = subprocess.run([promtool, "check", "metrics"], input=exposition(sqlite_url), capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and not result.stdout.strip() and not result.stderr.strip(), \
        result.stdout + result.stderr


def test_driftline_scheduler_metrics_port_serves_the_store_until_stopped(sqlite_url, tmp_path):
    evaluate_drift_scenario(sqlite_url)
    port = free_port()
    log = open(tmp_path / "scheduler.log", "wb")
    env = {**os.environ, "DRIFTLINE_SCHEDULER_METRICS_DETAIL_MODELS": "fraud, cred*"}  # the setting, as globs
    proc = subprocess.Popen([str(Path(sys.executable).with_name("driftline")), "scheduler", "--db", sqlite_url,
                             "--metrics-port", str(port)], stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        def scraped():
            assert proc.poll() is None, (tmp_path / "scheduler.log").read_text()[-2000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                    return response.read().decode()
            except OSError:
                return ""
        body = wait_until(scraped, timeout=120, interval=0.2, message="the scheduler's /metrics")
        assert 'driftline_feature_drifted{feature="income",model="credit",version="1"} 1.0' in body
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        log.close()
    assert f"metrics at http://127.0.0.1:{port}/metrics" in (tmp_path / "scheduler.log").read_text()


def test_up_serves_the_scheduler_metrics_and_prints_the_url():
    from driftline.commands import up

    lines: list[str] = []
    supervisor = type("Log", (), {"log": lambda self, who, line: lines.append(line)})()
    settings = load_settings()
    up._print_ready(supervisor, settings, "http://127.0.0.1:8000", True, "none", None, None, None)
    assert any("http://127.0.0.1:9109/metrics" in line for line in lines)
    assert up._scheduler_metrics_port(load_settings(scheduler_metrics_port=9400)) == 9400


def test_quality_checks_estimates_and_verdicts_become_one_series_per_label_set():
    from prometheus_client.core import CollectorRegistry

    from driftline.scheduler.metrics import families
    from driftline.store.monitoring import LatestResult, MonitoringSnapshot, VersionWindow

    results = [LatestResult("estimated_quality", "", "roc_auc", 0.71, 0.8, True,
                            {"lower": 0.68, "upper": 0.74, "training": 0.85}),
               LatestResult("model_quality", "", "accuracy", 0.81, None, False, {}),
               LatestResult("model_quality", "", "f1", None, None, False, {"insufficient_data": True}),
               LatestResult("prediction_drift", "", "psi", 0.4, 0.2, True, {}),
               LatestResult("prediction_drift", "p1", "psi", 0.01, 0.2, False, {})]
    breaches = {("data_quality", "missing_rate"): 2, ("data_quality", "unseen_category_share"): 0}
    snapshot = MonitoringSnapshot([VersionWindow("m", "2", 0, 60_000, 10, "ok", results, breaches)], {}, 0, 7,
                                  [("m", "3", "fail")])
    registry = CollectorRegistry()
    registry.register(type("Fixed", (), {"collect": lambda self: families(snapshot, 100)})())
    found = samples(generate_latest(registry).decode())
    mv = {"model": "m", "version": "2"}
    assert value(found, "driftline_data_quality_issues", check="missing_rate", **mv) == 2
    assert value(found, "driftline_data_quality_issues", check="unseen_category_share", **mv) == 0
    assert [value(found, "driftline_estimated_quality", metric="roc_auc", bound=b, **mv)
            for b in ("lower", "value", "upper")] == [0.68, 0.71, 0.74]
    assert value(found, "driftline_estimated_quality_threshold", metric="roc_auc", **mv) == 0.8
    assert value(found, "driftline_training_quality", metric="roc_auc", **mv) == 0.85
    assert value(found, "driftline_realized_quality", metric="accuracy", **mv) == 0.81
    assert not any(name == "driftline_realized_quality" and dict(labels)["metric"] == "f1" for name, labels in found)
    assert value(found, "driftline_prediction_drifted", **mv) == 1  # two outputs judged: one series
    assert {dict(labels)["verdict"]: v for (name, labels), v in found.items() if name == "driftline_rollout_verdict"} \
        == {"pass": 0, "fail": 1, "inconclusive": 0}
    assert value(found, "driftline_dead_letters_total") == 7


def test_segment_drift_is_exported_only_when_asked_for(db_url, monkeypatch):
    from driftline.store.models import DetectorResult

    evaluate_drift_scenario(db_url)
    start = T0 + WINDOW_MS  # the latest window
    with session_scope(db_url) as s:
        for segment, feature, breached in (("region=north", "income", True), ("region=north", "age", True),
                                           ("region=south", "income", False)):
            s.add(DetectorResult(model="credit", version="1", window_start_ms=start, window_end_ms=start + WINDOW_MS,
                                 detector="data_drift", feature=feature, segment=segment, metric="psi", value=0.3,
                                 threshold=0.2, breached=breached, details={}))
        s.add(DetectorResult(model="credit", version="1", window_start_ms=start, window_end_ms=start + WINDOW_MS,
                             detector="dataset_drift", feature="", segment="region=north", metric="drifted_share",
                             value=1.0, threshold=0.5, breached=True, details={}))
    plain = samples(exposition(db_url))
    assert not any(name.startswith("driftline_segment_") for name, _ in plain)
    # the whole population's series ignore segment rows
    assert value(plain, "driftline_drifted_features", model="credit", version="1") == 1
    found = samples(exposition(db_url, segments=True))
    window = {"model": "credit", "version": "1"}
    assert value(found, "driftline_segment_drifted_features", segment="region=north", **window) == 2
    assert value(found, "driftline_segment_drifted_features", segment="region=south", **window) == 0
    assert value(found, "driftline_segment_dataset_drifted", segment="region=north", **window) == 1
    monkeypatch.setenv("DRIFTLINE_SCHEDULER_METRICS_SEGMENTS", "true")
    assert load_settings().scheduler_metrics_segments is True


def test_a_store_that_cannot_be_read_is_a_gauge_and_a_log_line_not_a_failed_scrape(tmp_path, caplog):
    metrics = SchedulerMetrics(f"sqlite:///{tmp_path / 'missing' / 'driftline.db'}", cache_seconds=0.0)
    found = samples(generate_latest(metrics.registry).decode())
    assert found == {("driftline_metrics_store_up", ()): 0.0}
    assert "metrics: cannot read the store (OperationalError" in caplog.text


def test_a_rollout_candidate_is_exported_beside_production_with_its_latest_verdict(sqlite_url):
    from driftline.rollouts import canary_plan
    from driftline.store.rollouts import record_verdict, set_plan

    evaluate_drift_scenario(sqlite_url)
    rng = np.random.default_rng(9)
    baseline = register(sqlite_url, "credit", "2", rng, production=False)
    write_window(sqlite_url, "credit", "2", baseline, T0 + 5 * WINDOW_MS, rng)
    jobs_for(sqlite_url).evaluate_due_windows(now_ms=T0 + 7 * WINDOW_MS)
    with session_scope(sqlite_url) as s:
        set_plan(s, canary_plan("credit", "2", 25))
        record_verdict(s, "credit", "2", T0 + 5 * WINDOW_MS, T0 + 6 * WINDOW_MS, "pass")
        record_verdict(s, "credit", "2", T0 + 6 * WINDOW_MS, T0 + 7 * WINDOW_MS, "fail", ["p99 worse"])
    found = samples(exposition(sqlite_url))
    versions = {dict(labels)["version"] for (name, labels) in found if name == "driftline_window_end_timestamp_seconds"}
    assert versions == {"1", "2"}
    assert {dict(labels)["verdict"]: v for (name, labels), v in found.items() if name == "driftline_rollout_verdict"} \
        == {"pass": 0, "fail": 1, "inconclusive": 0}


def test_an_ended_rollout_keeps_its_final_verdict_for_the_visibility_period(sqlite_url):
    """A canary rolled back overnight still shows `verdict="fail"` in the morning; after
    ROLLOUT_ENDED_VISIBLE_SECONDS its series are gone."""
    from datetime import timedelta

    from sqlalchemy import update

    from driftline import defaults
    from driftline.rollouts import canary_plan
    from driftline.store.models import RolloutStep
    from driftline.store.rollouts import BY_POLICY, clear_plan, record_verdict, set_plan

    evaluate_drift_scenario(sqlite_url)
    register(sqlite_url, "credit", "2", np.random.default_rng(9), production=False)
    with session_scope(sqlite_url) as s:
        set_plan(s, canary_plan("credit", "2", 25))
        record_verdict(s, "credit", "2", T0 + 5 * WINDOW_MS, T0 + 6 * WINDOW_MS, "fail", ["p99 worse"])
        clear_plan(s, "credit", by=BY_POLICY, reason="rollback: fail")
    verdicts = lambda: {(dict(labels)["candidate"], dict(labels)["verdict"]): v  # noqa: E731
                        for (name, labels), v in samples(exposition(sqlite_url)).items()
                        if name == "driftline_rollout_verdict"}
    assert verdicts() == {("2", "pass"): 0, ("2", "fail"): 1, ("2", "inconclusive"): 0}
    with session_scope(sqlite_url) as s:  # the rollout ended just over the visibility period ago
        s.execute(update(RolloutStep).values(
            at=utcnow() - timedelta(seconds=defaults.ROLLOUT_ENDED_VISIBLE_SECONDS + 60)))
    assert verdicts() == {}


def test_up_refuses_a_scheduler_metrics_port_in_use_in_one_line(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {**os.environ, "DRIFTLINE_HOME": str(tmp_path / "home"), "DRIFTLINE_SCHEDULER_METRICS_PORT": str(port)}
        result = subprocess.run([str(Path(sys.executable).with_name("driftline")), "up", "--duration", "1"],
                                capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode != 0
    assert f"port {port} (the scheduler's /metrics) is in use" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "home").exists()
