"""A replay scenario judged at the evaluation level: the verdict `driftline up` would reach, without the stack.

`judge_scenario(home, "skew", windows=10, sink=sink)` sends the scenario's traffic (`build_traffic`, the
replay's own rows and labels, with the scenario's worker fault from `driftline.worker.faults`) through
the production version loaded as the worker loads it, logs each answer as the worker's event (inputs,
served features, prediction, latency), folds the encoded events with the collector's `InferenceFolder`
into window states (with their labels, as the label join does), and after each window runs the
scheduler's jobs: the real evaluation, rules, lifecycle and outbox, delivered to the local `Sink`
(`/slack`, `/pagerduty`). What an e2e run checks through the store and the sink is then in the store at
`home / "driftline.db"` and in the sink. No broker, no processes, no waiting on a clock: each window is
evaluated at its own close, so a slow machine makes the run slower, never different.

`trained_home(path)` migrates a store there and publishes the production version `driftline train
--model credit-default --size small` publishes (same rows, seed and size).
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from driftline.collector.folding import FolderSetup, InferenceFolder
from driftline.collector.labels import fold_pairs
from driftline.config import TOPIC_INFERENCE, load_settings
from driftline.scheduler.jobs import SchedulerJobs
from driftline.segments import SegmentSpec
from driftline.store import db
from driftline.store.db import session_scope
from driftline.store.models import WindowStateRecord
from driftline.worker.activations import ACTIVATIONS, activations
from driftline.worker.dataset import generate
from driftline.worker.faults import Faults
from driftline.worker.feature_transform import transform_row
from driftline.worker.online_features import FeatureClock, freshness_table
from driftline.worker.publish import train_and_publish
from driftline.worker.registry import Registry
from driftline.worker.replay import build_traffic
from driftline.worker.scenarios import SCENARIOS
from driftline.worker.server import load_version
from driftline.worker.training import TrainConfig

MODEL = "credit-default"
ROUTING_KEY = "R0UT1NGKEY0000000000000000000000"
# `driftline up`'s lateness for short windows: min(the default, max(2, window_seconds // 3)).
LATENESS_SECONDS = 2


def trained_home(home: Path) -> Path:
    """A migrated SQLite store and model registry at `home` with `driftline train --size small`'s version 1."""
    home.mkdir(parents=True, exist_ok=True)
    db_url = f"sqlite:///{home / 'driftline.db'}"
    db.upgrade(db_url)
    inputs, labels = generate(20_000, 7)
    train_and_publish(Registry(db_url, home / "models"), MODEL, inputs, labels, TrainConfig(size="small", seed=7),
                      promote=True)
    db.get_engine(db_url).dispose()
    return home


@dataclass
class Judged:
    """Where a judged scenario left its results."""

    db_url: str
    windows: list[int]  # the window starts, in order
    events: int


def judge_scenario(home: Path, scenario_name: str, *, windows: int, sink=None, window_seconds: int = 4,  # noqa: ANN001
                   rate: float = 60.0, warmup_windows: int = 2, seed: int = 1, config: str = "",
                   log_embeddings: bool = False) -> Judged:
    """The scenario's traffic (after `warmup_windows` of `none`) folded into windows and judged one by one.

    `log_embeddings`: each event carries the model's activations, as the worker logs them with
    `worker_log_embeddings` on (driftline.worker.activations)."""
    scenario = SCENARIOS[scenario_name]
    db_url = f"sqlite:///{home / 'driftline.db'}"
    text = config
    if scenario.segments and "[segments]" not in config:  # as `up` configures the scenario's run
        text += "\n[segments]\ncolumns = [" + ", ".join(f'"{c}"' for c in scenario.segments) + "]\n"
    clock = None
    if scenario.stale_feature is not None:  # the replay's online features, with their times (as `up` runs it)
        clock = FeatureClock(seed=seed)
        if "[freshness]" not in config:
            text += freshness_table(scenario_name)
    path = home / "driftline.toml"
    path.write_text(text)
    channels = {} if sink is None else {"slack_webhook_url": f"{sink.url}/slack", "pagerduty_url": f"{sink.url}/pagerduty",
                                        "pagerduty_routing_key": ROUTING_KEY}
    settings = load_settings(path, db=db_url, window_seconds=window_seconds,
                             allowed_lateness_seconds=LATENESS_SECONDS, **channels)
    jobs = SchedulerJobs(settings)
    registry = Registry(db_url, home / "models")
    version = registry.alias(MODEL)
    loaded = load_version(registry, MODEL, version, "cpu")
    per_window = int(rate * window_seconds)
    warmup_rows = warmup_windows * per_window
    traffic = build_traffic(scenario, warmup_rows, (windows - warmup_windows) * per_window, seed)
    faults, clean = Faults(), Faults()
    faults.update(scenario.faults)  # switched on for the scenario's part, as the replay does
    window_ms = window_seconds * 1000
    # Windows that closed just before now: the collector refuses events stamped far in the future.
    first = (int(time.time() * 1000) // window_ms - windows - 1) * window_ms
    with session_scope(db_url) as session:
        baseline = jobs.cache.baseline(session, MODEL, version)
    setup = FolderSetup(window_ms, LATENESS_SECONDS * 1000, 100_000, segments=SegmentSpec.from_settings(settings))
    folder = InferenceFolder(TOPIC_INFERENCE, 0, setup, baseline_for=lambda m, v: baseline,
                             stored_watermark=lambda m, v: None)
    rng = random.Random(seed)
    starts = []
    for window in range(windows):
        start = first + window * window_ms
        rows = range(window * per_window, (window + 1) * per_window)
        fault = faults if window >= warmup_windows else clean
        if clock is not None and window == warmup_windows:
            clock.stop_updating(scenario.stale_feature, start)
        inputs = [traffic.records[i] for i in rows]
        features = [fault.serving_features(row) if fault.skew else transform_row(row) for row in inputs]
        predictions = loaded.predict(features)
        vectors = activations(loaded.net, loaded.transform, features).tolist() if log_embeddings else None
        events = []
        for offset, (i, row, served, prediction) in enumerate(zip(rows, inputs, features, predictions)):
            compute = rng.uniform(2.0, 9.0) + fault.extra_latency_s(version) * 1000.0
            queue = rng.uniform(0.2, 3.0)
            ts = start + offset * window_ms // per_window
            freshness = {} if clock is None else {"feature_ts": clock.computed_at(ts)}
            events.append({**freshness, "schema": "driftline.inference/v1", "event_id": f"e-{i}", "request_id": f"r-{i}",
                           "ts": ts, "model": MODEL, "version": version,
                           "features": served, "inputs": row, "prediction": prediction,
                           "latency_ms": {"total": round(queue + compute, 3), "queue": round(queue, 3),
                                          "compute": round(compute, 3)}, "status": "ok"})
            if vectors is not None:
                events[-1]["embeddings"] = {ACTIVATIONS: vectors[offset]}
        folder.process(list(rows), [orjson.dumps(e, option=orjson.OPT_SERIALIZE_NUMPY) for e in events])
        delta = folder.take()
        with session_scope(db_url) as session:
            for key, partial in delta.windows.items():
                # the labels of this window's requests, joined into the prediction's window
                fold_pairs(partial.state, predictions, [int(traffic.labels[i]) for i in rows])
                session.add(WindowStateRecord(model=key.model, version=key.version, window_start_ms=key.window_start_ms,
                                              window_end_ms=key.window_end_ms, partition=0,
                                              events=partial.events, state=partial.state.to_bytes()))
        starts.append(start)
        jobs.evaluate_and_analyse(now_ms=start + window_ms + LATENESS_SECONDS * 1000)
        jobs.deliver_notifications()
    db.get_engine(db_url).dispose()
    return Judged(db_url, starts, windows * per_window)
