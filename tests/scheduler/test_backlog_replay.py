"""Replay equivalence: the same stream judged live and as a backlog gives the same results, evidence and pages.

Three models (drift from window 15: +0.5 sd on two features, +0.15 sd on one, none), 30 one-second windows,
four partitions, two collectors in one group, the real scheduler job. Run 1 produces the stream at live pace
while the collectors and the scheduler run; run 2 produces the same events (same event times) to a fresh
broker first, starts the scheduler, and only then the collectors, as after an outage. Both runs must judge
every window exactly once, in event-time order per version, with identical detector results (floats to the
merged sums' rounding), identical evidence and identical alert windows. On SQLite and PostgreSQL.
"""
from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections import defaultdict

import numpy as np
import pytest
from kafka import KafkaProducer
from sqlalchemy import select

from driftline.collector.config import CollectorConfig
from driftline.config import TOPIC_INFERENCE, load_settings
from driftline.events import INFERENCE_SCHEMA, encode_event
from driftline.store.db import session_scope
from driftline.store.models import Alert, DetectorResult, WindowEvaluation
from tests.support.baselines import assert_same
from tests.support.collector_helpers import collector_thread
from tests.support.drift_store import register, training_frame
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

WINDOWS = 30
DRIFT_FROM = 15
PER_WINDOW = 300
WINDOW_MS = 1_000
FLOAT_REL = 1e-6
# model -> feature shifts from window DRIFT_FROM on (training sd: income 10, age 8)
MODELS = {"replay-a": {"income": 5.0, "age": 4.0}, "replay-b": {"income": 1.5}, "replay-c": {}}


def _stream(base_ms: int) -> list[list[dict]]:
    """The events of each window (all models), in event-time order."""
    rng = np.random.default_rng(11)
    windows = []
    for w in range(WINDOWS):
        docs = []
        for model, shifts in MODELS.items():
            frame = training_frame(rng, PER_WINDOW)
            if w >= DRIFT_FROM:
                for name, shift in shifts.items():
                    frame[name] += shift
            for i, row in enumerate(frame.to_dict(orient="records")):
                docs.append({"schema": INFERENCE_SCHEMA, "event_id": uuid.uuid4().hex,
                             "ts": base_ms + w * WINDOW_MS + i * WINDOW_MS // PER_WINDOW, "model": model,
                             "version": "1", "features": row, "prediction": float(rng.uniform()),
                             "latency_ms": {"total": float(rng.uniform(5, 20))}, "status": "ok"})
        docs.sort(key=lambda d: d["ts"])
        windows.append(docs)
    return windows


def _settings(db_url: str):
    return load_settings(db=db_url, window_seconds=WINDOW_MS // 1000, allowed_lateness_seconds=1,
                         idle_partition_seconds=2)


@contextlib.contextmanager
def _scheduler(db_url: str, calls: list[tuple[str, int]]):
    """The scheduler's evaluation job every 0.2 s in a thread; `calls` gets (model, window start) per evaluation."""
    from driftline.scheduler import jobs as jobs_module

    jobs = jobs_module.SchedulerJobs(_settings(db_url))
    stop, errors = threading.Event(), []

    def loop():
        while not stop.is_set():
            try:
                jobs.evaluate_due_windows()
            except Exception as exc:  # noqa: BLE001 - re-raised below
                errors.append(exc)
                return
            stop.wait(0.2)

    thread = threading.Thread(target=loop, daemon=True)
    real = jobs_module.evaluate

    def counting(session, key, *args, **kwargs):
        calls.append((key.model, key.window_start_ms))
        return real(session, key, *args, **kwargs)

    jobs_module.evaluate = counting
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(60)
        jobs_module.evaluate = real
    assert not errors, errors


def _collectors(bootstrap: str, db_url: str, group: str) -> contextlib.ExitStack:
    stack = contextlib.ExitStack()
    for name in ("a", "b"):
        config = CollectorConfig.from_settings(_settings(db_url), bootstrap_servers=bootstrap, group_id=group,
                                               client_id=f"replay-{name}", session_timeout_ms=2000,
                                               heartbeat_interval_ms=500, flush_interval_s=0.2, metrics_port=0)
        stack.enter_context(collector_thread(config))
    return stack


def _produce(producer: KafkaProducer, docs: list[dict]) -> None:
    for doc in docs:
        producer.send(TOPIC_INFERENCE, key=doc["event_id"].encode(), value=encode_event(doc))
    producer.flush(30)


def _judged(db_url: str) -> int:
    with session_scope(db_url) as s:
        return len(s.scalars(select(WindowEvaluation.id)).all())


def _outcome(db_url: str, base_ms: int) -> tuple[dict, dict, dict]:
    """Results by (model, window, detector, feature, metric, segment), late events per window, alert windows."""
    with session_scope(db_url) as s:
        results = {(r.model, (r.window_start_ms - base_ms) // WINDOW_MS, r.detector, r.feature, r.metric, r.segment):
                   {"value": r.value, "threshold": r.threshold, "breached": r.breached, "details": r.details}
                   for r in s.scalars(select(DetectorResult))}
        late = {(e.model, (e.window_start_ms - base_ms) // WINDOW_MS): (e.events, e.late_events)
                for e in s.scalars(select(WindowEvaluation))}
        alerts = {(a.model, a.detector, a.feature, a.segment): (
            a.state, None if a.first_window_start_ms is None else (a.first_window_start_ms - base_ms) // WINDOW_MS,
            None if a.fired_window_start_ms is None else (a.fired_window_start_ms - base_ms) // WINDOW_MS)
            for a in s.scalars(select(Alert))}
    return results, late, alerts


def _register_models(db_url: str) -> None:
    rng = np.random.default_rng(3)
    for model in MODELS:
        register(db_url, model, "1", rng)


def _assert_judged_once_in_order(calls: list[tuple[str, int]]) -> None:
    per_model = defaultdict(list)
    for model, start in calls:
        per_model[model].append(start)
    assert set(per_model) == set(MODELS)
    for model, starts in per_model.items():
        assert len(starts) == WINDOWS, (model, len(starts))  # each window once: never before it was complete
        assert starts == sorted(starts) and len(set(starts)) == WINDOWS, model  # in event-time order


def test_a_backlog_is_judged_exactly_as_the_live_stream_was(db_url, store_like, embedded_broker_factory):

    base_ms = (int(time.time() * 1000) // WINDOW_MS + 3) * WINDOW_MS
    stream = _stream(base_ms)
    total = WINDOWS * len(MODELS)

    # Run 1: live. Collectors and scheduler first, then the stream at its own pace.
    live_url = db_url
    _register_models(live_url)
    live_broker = embedded_broker_factory()
    live_calls: list[tuple[str, int]] = []
    producer = KafkaProducer(bootstrap_servers=live_broker.bootstrap_servers, linger_ms=5)
    with _scheduler(live_url, live_calls), _collectors(live_broker.bootstrap_servers, live_url, "live"):
        time.sleep(max(base_ms / 1000 - time.time(), 0))
        for w, docs in enumerate(stream):
            time.sleep(max((base_ms + w * WINDOW_MS) / 1000 - time.time(), 0))
            _produce(producer, docs)
        wait_until(lambda: _judged(live_url) == total, timeout=60, message="every live window judged")
    producer.close()
    live = _outcome(live_url, base_ms)

    # Run 2: the same events as a backlog. A second store of the same kind, the scheduler already running.
    backlog_url = store_like(db_url)
    _register_models(backlog_url)
    backlog_broker = embedded_broker_factory()
    producer = KafkaProducer(bootstrap_servers=backlog_broker.bootstrap_servers, linger_ms=20, batch_size=262_144)
    _produce(producer, [doc for docs in stream for doc in docs])
    producer.close()
    backlog_calls: list[tuple[str, int]] = []
    with _scheduler(backlog_url, backlog_calls):
        time.sleep(1.0)  # the scheduler runs on an empty store: nothing may be judged yet
        assert _judged(backlog_url) == 0
        with _collectors(backlog_broker.bootstrap_servers, backlog_url, "backlog"):
            wait_until(lambda: _judged(backlog_url) == total, timeout=120, message="every backlog window judged")
    backlog = _outcome(backlog_url, base_ms)

    _assert_judged_once_in_order(live_calls)
    _assert_judged_once_in_order(backlog_calls)
    live_results, live_late, live_alerts = live
    backlog_results, backlog_late, backlog_alerts = backlog
    assert all(late == 0 for _, late in live_late.values())
    assert live_late == backlog_late  # the same events in every window, none late
    assert sorted(live_results) == sorted(backlog_results)
    # decisions, counts and evidence flags exactly; floats to the rounding of bin sums merged in other groupings
    # (flushes differ between the runs), which the binned Wasserstein's differences of near-equal terms amplify
    assert_same({str(k): v for k, v in sorted(backlog_results.items())},
                {str(k): v for k, v in sorted(live_results.items())}, "results", rel=FLOAT_REL)
    # every window reached the evidence once, in order: each stream's last window has stepped it WINDOWS times
    for model in MODELS:
        last = [r for k, r in live_results.items() if k[0] == model and k[1] == WINDOWS - 1
                and k[2] == "data_drift" and not k[5] and "evidence" in (r["details"] or {})]
        assert last and all(r["details"]["evidence"]["windows"] == WINDOWS for r in last), model
    # the drift paged, in the same window of each run, and the alert says which
    fired = {key: windows for key, windows in live_alerts.items() if windows[2] is not None}
    assert any(key[0] == "replay-a" for key in fired), live_alerts
    assert all(DRIFT_FROM <= windows[2] for windows in fired.values()), fired
    assert backlog_alerts == live_alerts

