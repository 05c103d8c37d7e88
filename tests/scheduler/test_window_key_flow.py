"""One window key from the collector's fold to the alerts: the fold's `WindowKey` is the key the store row is
written under, the key the scheduler lists, judges and quarantines by, and the key the alert lifecycle and the
retraining policy advance on (equal, and of the one type)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from driftline.baseline import compute_baseline
from driftline.collector import store as collector_store
from driftline.collector.flush import FlushSetup, PartitionFlush, flush
from driftline.collector.windows import PartitionWindows
from driftline.config import TOPIC_INFERENCE, load_settings
from driftline.scheduler import jobs as jobs_module
from driftline.scheduler.jobs import SchedulerJobs
from driftline.store import db as store_db
from driftline.store.models import Alert, BaselineRecord, ModelVersion
from driftline.window_state import EventBatch
from driftline.windows import WindowKey

WINDOW_MS = 10_000
T0 = 1_796_040_000_000  # a window boundary


def _frame(rng, n: int, shift: float = 0.0) -> pd.DataFrame:
    return pd.DataFrame({"income": rng.normal(50 + shift, 10, n), "region": rng.choice(["north", "south"], n)})


def _events(rng, n: int) -> list[dict]:
    rows = _frame(rng, n, shift=40.0).to_dict(orient="records")  # a drift that pages in one window
    return [{"event_id": f"e{i}", "ts_ms": T0 + i * WINDOW_MS // n, "model": "m", "version": "1", "features": row,
             "prediction": float(rng.uniform()), "latency_ms": {"total": 10.0}, "status": "ok"}
            for i, row in enumerate(rows)]


def _spy(monkeypatch, module, name: str, seen: list, key_at: int) -> None:
    real = getattr(module, name)

    def spied(*args, **kwargs):
        seen.append(args[key_at])
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spied)


def test_the_folded_window_key_reaches_the_store_the_scheduler_and_the_alerts(sqlite_url, monkeypatch):
    db_url = sqlite_url  # the key, not the dialect, is under test (both dialects run the flush and the scheduler)
    rng = np.random.default_rng(3)
    baseline = compute_baseline(_frame(rng, 2_000), predictions=rng.uniform(size=2_000))
    with store_db.session_scope(db_url) as s:
        s.add(ModelVersion(model="m", version="1"))
        s.add(BaselineRecord(model="m", version="1", rows=2_000, summary=baseline.to_dict()))

    windows = PartitionWindows(WINDOW_MS, 2_000)
    windows.fold("m", "1", EventBatch.from_events(_events(rng, 400)), baseline, None)
    (folded,) = windows.windows
    assert folded == WindowKey("m", "1", T0, T0 + WINDOW_MS)

    seen: dict[str, list] = {"store": [], "judged": [], "alerts": [], "retrain": []}
    _spy(monkeypatch, collector_store, "merge_window_row", seen["store"], 1)
    _spy(monkeypatch, jobs_module, "evaluate", seen["judged"], 1)
    _spy(monkeypatch, jobs_module, "process_window", seen["alerts"], 1)
    _spy(monkeypatch, jobs_module, "apply_retrain_policy", seen["retrain"], 1)
    part = PartitionFlush(TOPIC_INFERENCE, 0, 0, None, 400, "tid-1", windows.windows, [], {}, {})
    flush(FlushSetup(store_db.get_engine(db_url), "g", WINDOW_MS, lambda m, v: baseline), [part],
          now_ms=T0 + WINDOW_MS)
    jobs = SchedulerJobs(load_settings(db=db_url, window_seconds=10, allowed_lateness_seconds=2))
    assert jobs.evaluate_due_windows(now_ms=T0 + WINDOW_MS + 5_000) == 1

    for stage, keys in seen.items():
        assert keys == [folded], stage
        assert type(keys[0]) is WindowKey, stage
    with store_db.session_scope(db_url) as s:  # the alert the key advanced names that window
        alert = s.query(Alert).filter(Alert.detector == "data_drift", Alert.feature == "income").one()
        assert (alert.details["window_start_ms"], alert.details["window_end_ms"]) == (T0, T0 + WINDOW_MS)
        assert alert.fired_window_start_ms == folded.window_start_ms


def test_every_stage_names_the_one_window_key():
    """Defined once, at the bottom layer; each stage that reads a window imports that type."""
    import importlib
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    definitions = sorted(str(path.relative_to(root)) for folder in ("driftline", "collector", "scheduler", "alerts",
                                                                    "detectors", "dashboard", "worker")
                         for path in (root / folder).rglob("*.py")
                         if re.search(r"^(class WindowKey\b|WindowKey\s*=)", path.read_text(encoding="utf-8"), re.M))
    assert definitions == ["driftline/windows.py"]
    for name in ("collector.windows", "collector.flush", "collector.labels", "collector.store", "scheduler.evaluation",
                 "scheduler.claims", "scheduler.evidence", "scheduler.quarantine", "scheduler.jobs", "alerts.lifecycle",
                 "alerts.retraining", "alerts.messages", "alerts.rollouts"):
        assert importlib.import_module(f"driftline.{name}").WindowKey is WindowKey, name
