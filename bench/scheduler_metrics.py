"""The scheduler's /metrics at fleet size: `python bench/scheduler_metrics.py [--models 50 200 1000] [--features 30]`.

One model of `--features` features (3 named, the rest numeric `f3`...; a third of them shifted in its last
window) is judged by the real scheduler, then copied to each fleet size (tests/support/fleet_store.py: every
seventh copy keeps the drift, every fiftieth has a firing alert). For each size it measures, on the same store
and in the same run, the exposition by default (drift summed up per model version) and with every model's
per-feature detail (`scheduler_metrics_detail_models = "*"`, what every scrape exported before): its size and
series, the time of a scrape that reads the store (cache expired) and of one served from the cache. Prints
figures; asserts nothing.

`--evaluate-all` has the scheduler judge every model instead of copying one (about 5 s a model on two busy
cores). bench/fleet.py imports `fleet_store` and `measure`.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from prometheus_client import generate_latest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support, from the repository root
from tests.support.drift_store import T0, WINDOW_MS, jobs_for, register, write_window  # noqa: E402
from tests.support.fleet_store import clone_fleet, evaluate_template  # noqa: E402

from driftline.scheduler.metrics import SchedulerMetrics  # noqa: E402
from driftline.store import db as store_db  # noqa: E402


@dataclass(frozen=True)
class Scrape:
    """One exposition measured: its size, its series, and the scrape times (ms): wall clock, and this process' CPU
    (what a scrape costs on a machine shared with others, less the waiting for a core)."""

    kib: float
    series: int
    read_median_ms: float
    read_max_ms: float
    read_cpu_median_ms: float
    cached_median_ms: float


def measure(db_url: str, detail_models: Sequence[str] = (), scrapes: int = 5) -> Scrape:
    """Scrape the scheduler's registry `scrapes` times reading the store, and as often from the cache."""
    metrics = SchedulerMetrics(db_url, cache_seconds=0.0, detail_models=detail_models)
    cold, cpu = [], []
    for _ in range(scrapes):
        started, started_cpu = time.perf_counter(), time.process_time()
        body = generate_latest(metrics.registry)
        cold.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    cached = SchedulerMetrics(db_url, cache_seconds=3600.0, detail_models=detail_models)
    generate_latest(cached.registry)
    warm = []
    for _ in range(scrapes):
        started = time.perf_counter()
        generate_latest(cached.registry)
        warm.append(time.perf_counter() - started)
    series = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
    return Scrape(len(body) / 1024, series, statistics.median(cold) * 1000, max(cold) * 1000,
                  statistics.median(cpu) * 1000, statistics.median(warm) * 1000)


def fleet_store(folder: Path, models: int, features: int = 30, template: Path | None = None) -> str:
    """A SQLite store of `models` copies of one judged model (its file beside `template`'s, reused when given)."""
    template = template or folder / f"template-{features}.db"
    if not template.exists():
        url = f"sqlite:///{template}"
        store_db.upgrade(url)
        evaluate_template(url, features=features)
        store_db.dispose_engines()
    path = folder / f"fleet-{models}.db"
    shutil.copyfile(template, path)
    url = f"sqlite:///{path}"
    clone_fleet(url, models, template="template")
    return url


def seed(db_url: str, models: int, features: int) -> None:
    """Every model judged by the real scheduler (`--evaluate-all`)."""
    rng = np.random.default_rng(1)
    shifted = {f"f{i}": 3.0 for i in range(3, 3 + features // 3)}
    for m in range(models):
        model = f"model-{m:03d}"
        baseline = register(db_url, model, "1", rng, features=features, rows=2000)
        write_window(db_url, model, "1", baseline, T0, rng, n=300, shifts=shifted, features=features)
    jobs_for(db_url).evaluate_due_windows(now_ms=T0 + 2 * WINDOW_MS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, nargs="+", default=[50, 200, 1000])
    parser.add_argument("--features", type=int, default=30)
    parser.add_argument("--scrapes", type=int, default=5)
    parser.add_argument("--evaluate-all", action="store_true")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="driftline-bench-metrics-"))
    print(f"{'models':>7} {'mode':<22} {'KiB':>7} {'series':>8} {'series/model':>13} {'read ms (med/max)':>18} "
          f"{'read CPU ms':>12} {'cached ms':>10}")
    try:
        for models in args.models:
            started = time.perf_counter()
            if args.evaluate_all:
                url = f"sqlite:///{folder / f'all-{models}.db'}"
                store_db.upgrade(url)
                seed(url, models, args.features)
            else:
                url = fleet_store(folder, models, args.features)
            print(f"# {models} models x {args.features} features stored in {time.perf_counter() - started:.0f} s "
                  f"(load average {os.getloadavg()[0]:.1f})")
            runs = {}
            for mode, detail in (("fleet (default)", ()), ("every model's detail", ("*",))):
                runs[mode] = found = measure(url, detail, args.scrapes)
                print(f"{models:>7} {mode:<22} {found.kib:>7.0f} {found.series:>8,} {found.series / models:>13.1f} "
                      f"{found.read_median_ms:>8.0f} / {found.read_max_ms:<7.0f} {found.read_cpu_median_ms:>12.0f} "
                      f"{found.cached_median_ms:>10.1f}")
            fleet, detail = runs["fleet (default)"], runs["every model's detail"]
            print(f"{models:>7} {'detail / fleet':<22} {detail.kib / fleet.kib:>6.1f}x {detail.series / fleet.series:>7.1f}x"
                  f" {'':>13} {detail.read_median_ms / fleet.read_median_ms:>8.1f}x {'':>9} "
                  f"{detail.read_cpu_median_ms / fleet.read_cpu_median_ms:>11.1f}x")
            store_db.dispose_engines()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
