"""The scheduler's /metrics for many models: `python bench/scheduler_metrics.py [--models 50] [--features 30]`.

Writes a SQLite store (or `--db URL`, migrated and empty) with `--models` production model versions of
`--features` features each, one closed window per model evaluated by the real scheduler (a third of the
features shifted), then measures the exposition's size and series, the time of a scrape that reads the
store (cache expired) and of one served from the cache. Prints figures; asserts nothing.

Seeding runs the real detectors on every window (about 4 minutes on two busy cores); `--db` naming a store an
earlier run seeded (its URL is printed) measures that store again without seeding.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from prometheus_client import generate_latest
from sqlalchemy import func, select

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support, from the repository root
from tests.support.drift_store import T0, WINDOW_MS, jobs_for, register, write_window  # noqa: E402

from driftline.scheduler.metrics import SchedulerMetrics  # noqa: E402
from driftline.store import db as store_db  # noqa: E402
from driftline.store.models import WindowEvaluation  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--features", type=int, default=30)
    parser.add_argument("--scrapes", type=int, default=10)
    parser.add_argument("--db", default=None)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="driftline-bench-metrics-")
    db_url = args.db or f"sqlite:///{Path(folder) / 'bench.db'}"
    store_db.upgrade(db_url)
    with store_db.session_scope(db_url) as session:
        seeded = session.scalar(select(func.count()).select_from(WindowEvaluation))
    if seeded:
        print(f"store: {seeded} evaluated windows already ({store_db.redacted_url(db_url)})")
    else:
        seed(db_url, args.models, args.features)
    metrics = SchedulerMetrics(db_url, cache_seconds=0.0)
    cold = []
    for _ in range(args.scrapes):
        t = time.perf_counter()
        body = generate_latest(metrics.registry)
        cold.append(time.perf_counter() - t)
    cached = SchedulerMetrics(db_url, cache_seconds=3600.0)
    generate_latest(cached.registry)
    warm = []
    for _ in range(args.scrapes):
        t = time.perf_counter()
        generate_latest(cached.registry)
        warm.append(time.perf_counter() - t)
    series = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
    print(f"/metrics: {len(body) / 1024:.0f} KiB, {series} series")
    print(f"scrape reading the store: median {statistics.median(cold) * 1000:.0f} ms, max {max(cold) * 1000:.0f} ms "
          f"({args.scrapes} scrapes)")
    print(f"scrape from the cache: median {statistics.median(warm) * 1000:.1f} ms, max {max(warm) * 1000:.1f} ms")


def seed(db_url: str, models: int, features: int) -> None:
    rng = np.random.default_rng(1)
    started = time.perf_counter()
    shifted = {f"f{i}": 3.0 for i in range(3, 3 + features // 3)}
    for m in range(models):
        model = f"model-{m:03d}"
        baseline = register(db_url, model, "1", rng, features=features, rows=2000)
        write_window(db_url, model, "1", baseline, T0, rng, n=300, shifts=shifted, features=features)
    evaluated = jobs_for(db_url).evaluate_due_windows(now_ms=T0 + 2 * WINDOW_MS)
    print(f"store: {models} models x {features} features, {evaluated} windows evaluated "
          f"in {time.perf_counter() - started:.1f} s ({store_db.redacted_url(db_url)})")


if __name__ == "__main__":
    main()
