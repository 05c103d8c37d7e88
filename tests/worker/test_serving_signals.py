"""Capacity, cost and device signals, scraped from a running worker (real uvicorn, real batcher and model).

The worker serves on CPU here: the GPU's series must be absent (not zero), its events must say the device,
and a request's `feature_ts` must reach its event on Kafka. The figures themselves are checked against what
the test can count from outside: the requests it sent, the worker's own batch histogram, and the price.
"""
from __future__ import annotations

import math
import re
import uuid

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from driftline.config import load_settings
from driftline.errors import UserError
from driftline.worker.serving_signals import ServingSignals, SignalsConfig, device_kind
from driftline.worker.server import Worker, WorkerConfig

from tests.support.worker_helpers import MODEL, make_settings, read_topic, registry_with_versions, serving

pytestmark = pytest.mark.timeout(300)
PRICE_CPU = 0.36  # per replica-hour: 0.0001 per second


@pytest.fixture(scope="module")
def running(broker, tiny_results, tmp_path_factory):
    home = tmp_path_factory.mktemp("signals")
    config = home / "driftline.toml"
    config.write_text(f"[cost]\nprice_per_replica_hour = {{cpu = {PRICE_CPU}, cuda = 2.5}}\n"
                      "[capacity]\ntarget_utilization = 0.5\n")
    base = make_settings(home, broker)
    settings = load_settings(config, home=str(base.home), db=base.db_url, bootstrap_servers=broker)
    registry_with_versions(settings, tiny_results[:1])
    worker = Worker(settings, WorkerConfig(model=MODEL, device="cpu", listen_for_labels=False, alias_poll_s=0))
    with serving(worker) as url:
        yield url, worker


def samples(url: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics").text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def test_utilisation_capacity_and_cost_are_scraped_from_the_worker(running):
    url, worker = running
    example = httpx.get(f"{url}/model").json()["example"]
    sent = 0
    with httpx.Client(base_url=url) as client:
        for i in range(120):
            features = dict(example, age=20 + i % 50)  # mostly distinct: cache misses reach the batcher
            assert client.post("/predict", json={"features": features}).status_code == 200
            sent += 1
    scraped = samples(url)
    version = worker.current.version
    labels = {"model": "credit-default", "device": "cpu"}
    utilization = scraped["driftline_worker_utilization"][0]
    assert utilization.labels == labels
    # the forward pass's busy time is the batch histogram's sum, over the signal window (the run is shorter)
    busy = scraped["driftline_worker_batch_seconds_sum"][0].value
    window = worker.metrics.signals.figures()["window_seconds"]
    assert 0 < utilization.value <= 1
    assert utilization.value == pytest.approx(busy / window, rel=0.5)
    replicas = scraped["driftline_worker_recommended_replicas"][0].value
    assert replicas == pytest.approx(utilization.value / 0.5, rel=0.25)
    assert scraped["driftline_worker_target_utilization"][0].value == 0.5
    served = scraped["driftline_worker_batch_size_sum"][0].value
    assert scraped["driftline_worker_service_rate"][0].value == pytest.approx(served / busy, rel=0.25)
    arrival = scraped["driftline_worker_arrival_rate"][0].value
    assert arrival > 0
    cost = {s.labels["version"]: s for s in scraped["driftline_worker_cost_per_1000_predictions"]}
    assert set(cost) == {version} and cost[version].labels["device"] == "cpu"
    # one version served: the replica's price per second over its prediction rate, per 1 000
    assert cost[version].value == pytest.approx(PRICE_CPU / 3600 * 1000 / arrival, rel=0.25)
    # Little's law: requests in the worker = arrival rate x mean latency
    latency = scraped["driftline_worker_latency_seconds_sum"]
    total = next(s.value for s in latency if s.labels == {"stage": "total", "protocol": "predict"})
    assert scraped["driftline_worker_requests_in_system"][0].value == pytest.approx(arrival * total / sent, rel=0.25)


def test_gpu_figures_are_absent_on_a_cpu_worker_not_zero(running):
    url, _ = running
    text = httpx.get(f"{url}/metrics").text
    assert "driftline_worker_device_" not in text
    assert re.search(r'^driftline_worker_model_info\{.*device="cpu".*\} 1\.0$', text, re.MULTILINE)


def test_each_event_records_the_device_and_the_features_times(running, broker):
    url, _ = running
    example = httpx.get(f"{url}/model").json()["example"]
    request_id = f"fresh-{uuid.uuid4().hex}"
    stamp = "2026-11-30T12:00:00.000Z"
    answer = httpx.post(f"{url}/predict", json={"features": example, "request_id": request_id,
                                                 "feature_ts": {"credit_score": stamp}})
    assert answer.status_code == 200, answer.text
    event = orjson.loads(read_topic(broker, "driftline.inference", {request_id})[request_id])
    assert event["device"] == "cpu"
    assert event["feature_ts"] == {"credit_score": 1_796_040_000_000}


@pytest.mark.parametrize("feature_ts, field", [
    ({"no_such_feature": 1_764_504_000_000}, "feature_ts.no_such_feature"),
    ({"credit_score": "yesterday"}, "feature_ts.credit_score"),
    ({"credit_score": 1_764_504_000}, "feature_ts.credit_score"),  # seconds, not milliseconds
    ([1, 2], "feature_ts"),
])
def test_a_bad_feature_ts_is_refused_with_the_field(running, feature_ts, field):
    url, _ = running
    example = httpx.get(f"{url}/model").json()["example"]
    answer = httpx.post(f"{url}/predict", json={"features": example, "feature_ts": feature_ts})
    assert answer.status_code == 422
    assert answer.json()["field"] == field


def test_a_slower_version_costs_more_per_prediction():
    now = [1000.0]
    signals = ServingSignals(SignalsConfig(price_per_replica_hour={"cpu": 3.6}, target_utilization=0.65, window_seconds=10.0), clock=lambda: now[0])
    signals.set_model("m", "cpu")
    for i in range(100):
        now[0] += 0.05
        signals.answered("1", 10.0, 4.0, 1)
        signals.answered("2", 30.0, 12.0, 1)  # the canary: three times the forward pass per prediction
        signals.batch(1, 0.004)
        signals.batch(1, 0.012)
    costs = signals.figures()["cost_per_1000_predictions"]
    assert costs["2"] == pytest.approx(3 * costs["1"])
    # both versions' costs add up to the replica's price over the window (0.001 per second)
    span = signals.figures()["window_seconds"]
    assert (costs["1"] + costs["2"]) * 100 / 1000 == pytest.approx(0.001 * span)


def test_without_traffic_or_a_price_the_figures_are_absent():
    signals = ServingSignals(SignalsConfig(target_utilization=0.65, window_seconds=30.0))
    signals.set_model("m", "cuda:0")
    figures = signals.figures()
    assert "cost_per_1000_predictions" not in figures and "arrival_rate" not in figures
    assert device_kind("cuda:0") == "cuda"
    assert not math.isnan(figures.get("utilization", 0.0))


@pytest.mark.parametrize("cost, capacity, message", [
    ({"price_per_replica_hour": {"cpu": -1}}, None, "price_per_replica_hour"),
    ({"price": {"cpu": 1}}, None, "unknown key 'price'"),
    (None, {"target_utilization": 1.5}, "target_utilization"),
    (None, {"target_utilisation": 0.5}, "unknown key"),
])
def test_cost_and_capacity_settings_are_strict(cost, capacity, message):
    with pytest.raises(UserError, match=message):
        SignalsConfig.from_sections(cost, capacity)


def test_gpu_figures_come_from_nvml_or_not_at_all():
    """On a machine without an NVIDIA driver NVML does not load and nothing is yielded; with one, the three
    figures are yielded with values in their ranges (the same test, whichever machine runs it)."""
    from driftline.worker.device_metrics import DeviceMetrics, nvml_handle

    assert nvml_handle("cpu") is None
    families = {f.name: f.samples[0].value for f in DeviceMetrics("cuda:0").collect()}
    if nvml_handle("cuda:0") is None:
        assert families == {}
    else:
        assert 0.0 <= families["driftline_worker_device_utilization_ratio"] <= 1.0
        assert 0 < families["driftline_worker_device_memory_used_bytes"] <= families[
            "driftline_worker_device_memory_total_bytes"]


def test_the_stale_features_replay_sends_feature_times_the_worker_logs(running, broker):
    """`driftline replay --scenario stale_features` against the worker: every event carries the online features'
    times; after the warm-up credit_score's stop moving (its updates stopped), num_late_payments' keep up."""
    import asyncio
    import time

    from driftline.worker.replay import ReplayConfig, run_replay

    url, _ = running
    started_ms = int(time.time() * 1000)
    report = asyncio.run(run_replay(ReplayConfig(worker_url=url, scenario="stale_features", rate=40.0,
                                                 warmup_s=1.0, requests=80, concurrency=4)))
    assert report.ok == report.requests == 120
    events = [orjson.loads(raw) for raw in read_topic(broker, "driftline.inference",
                                                           set(report.request_ids)).values()]
    assert len(events) == 120
    events.sort(key=lambda e: _ms(e["ts"]))
    age = lambda e, name: _ms(e["ts"]) - e["feature_ts"][name]  # noqa: E731
    # warm-up: both online features fresh (refreshed every 2 s; slack for the answer's own latency)
    assert all(age(e, "credit_score") <= 2_500 for e in events[:40])
    # scenario: credit_score's updates stopped at its start, so its times stay within one refresh before it,
    # and the requests sent a second or more after the stop were served values older than that
    stopped = [e["feature_ts"]["credit_score"] for e in events[40:]]
    assert max(stopped) - min(stopped) <= 2_100  # (a warm-up answer may sort among them: 100 ms slack)
    assert min(age(e, "credit_score") for e in events[-40:]) > 1_000
    assert all(age(e, "num_late_payments") <= 2_500 for e in events)
    assert min(e["feature_ts"]["credit_score"] for e in events) >= started_ms - 2_000


def _ms(ts) -> int:
    from driftline.events import parse_timestamp

    return parse_timestamp(ts)
