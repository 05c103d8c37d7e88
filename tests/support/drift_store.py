"""A store where a drift scenario was evaluated by the real scheduler: `evaluate_drift_scenario(db_url)`.

A model version is registered with its training baseline; closed windows of events are written as the
collector would (one partial state per partition), the last ones with chosen features shifted; the
scheduler's evaluation job (driftline.scheduler.jobs) judges them with the real detectors and alert rules.
The scheduler's /metrics tests, its Prometheus test and bench/scheduler_metrics.py build their stores here.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from driftline.baseline import compute_baseline
from driftline.config import load_settings
from driftline.store.aliases import move_alias
from driftline.store.db import session_scope
from driftline.store.models import BaselineRecord, ModelVersion, WindowStateRecord
from driftline.window_state import EventBatch, WindowState

WINDOW_MS = 10_000
T0 = 1_796_040_000_000  # a window boundary


def training_frame(rng: np.random.Generator, n: int, features: int = 3) -> pd.DataFrame:
    """`income`, `age`, `region`, then numeric `f3`, `f4`, ... up to `features` columns."""
    columns = {"income": rng.normal(50, 10, n), "age": rng.normal(40, 8, n),
               "region": rng.choice(["north", "south"], n, p=[0.6, 0.4])}
    for i in range(3, features):
        columns[f"f{i}"] = rng.normal(0, 1, n)
    return pd.DataFrame(dict(list(columns.items())[:features]))


def register(db_url: str, model: str, version: str, rng: np.random.Generator, features: int = 3,
             production: bool = True, rows: int = 3000):
    train = training_frame(rng, rows, features)
    baseline = compute_baseline(train, predictions=rng.uniform(size=rows))
    with session_scope(db_url) as s:
        s.add(ModelVersion(model=model, version=version))
        s.add(BaselineRecord(model=model, version=version, rows=rows, summary=baseline.to_dict()))
        if production:
            s.flush()
            move_alias(s, model, version, "promote", "test")
    return baseline


def write_window(db_url: str, model: str, version: str, baseline, start_ms: int, rng: np.random.Generator,
                 n: int = 400, shifts: dict[str, float] | None = None, features: int = 3) -> None:
    frame = training_frame(rng, n, features)
    for name, shift in (shifts or {}).items():
        frame[name] += shift
    events = [{"event_id": f"{model}-{start_ms}-{i}", "ts_ms": start_ms + int(i * WINDOW_MS / n), "model": model,
               "version": version, "features": row, "prediction": float(rng.uniform()),
               "latency_ms": {"total": float(rng.uniform(5, 20))}, "status": "ok"}
              for i, row in enumerate(frame.to_dict(orient="records"))]
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(events))
    with session_scope(db_url) as s:
        s.add(WindowStateRecord(model=model, version=version, window_start_ms=start_ms,
                                window_end_ms=start_ms + WINDOW_MS, partition=0, events=len(events),
                                state=state.to_bytes()))


def jobs_for(db_url: str, config_file: Path | None = None):
    from driftline.scheduler.jobs import SchedulerJobs

    return SchedulerJobs(load_settings(config_file, db=db_url, window_seconds=WINDOW_MS // 1000,
                                       allowed_lateness_seconds=2))


def evaluate_drift_scenario(db_url: str, model: str = "credit", version: str = "1", windows: int = 2,
                            shifts: dict[str, float] | None = None, seed: int = 5,
                            config_file: Path | None = None) -> int:
    """Register `model` `version` as production, write `windows` closed windows (the last shifted by `shifts`,
    default: income by +25) and evaluate them (with `config_file`'s thresholds); returns the evaluation time (epoch
    ms)."""
    rng = np.random.default_rng(seed)
    baseline = register(db_url, model, version, rng)
    for w in range(windows):
        last = w == windows - 1
        write_window(db_url, model, version, baseline, T0 + w * WINDOW_MS, rng,
                     shifts=(shifts if shifts is not None else {"income": 25.0}) if last else None)
    now_ms = T0 + windows * WINDOW_MS + 5_000
    jobs_for(db_url, config_file).evaluate_due_windows(now_ms=now_ms)
    return now_ms
