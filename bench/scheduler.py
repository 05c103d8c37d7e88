"""How many models one scheduler watches: `python bench/scheduler.py [--models 10,100,1000] [--features 30]`.

For each store (`--stores sqlite,postgresql`; PostgreSQL: a fresh database on `--pg-admin`, dropped after) and
each model count, writes that many production model versions of `--features` features (one training baseline,
stored once per version), then two closed 5-minute windows per version as the collector writes them (one partial
state per partition, `--partitions`; a third of the features shifted in one version in four). The real
scheduler's evaluation job (`SchedulerJobs.evaluate_due_windows`: claim, merge, every detector, results, alert
lifecycle, retraining policy) evaluates the first window of every version (cold: baselines decoded; up to
`--cold-max` models), then the second (warm: a scheduler's steady state, one new window per version per window
length; beyond `--cold-max`, one window with the baselines decoded beforehand). Prints per-window wall
and CPU time, and the share of one core one scheduler needs to keep up with the models at `--window-seconds`.

Then, on PostgreSQL, `--schedulers 1,2` scheduler processes share one more round of windows (each window
claimed once, driftline.scheduler.claims): windows per second for N processes against one, measured in the
same run. Prints figures; asserts nothing.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support, from the repository root
from tests.support.drift_store import training_frame  # noqa: E402

from driftline.baseline import compute_baseline  # noqa: E402
from driftline.config import load_settings  # noqa: E402
from driftline.store import db as store_db  # noqa: E402
from driftline.store.models import (BaselineRecord, ModelAlias, ModelVersion,  # noqa: E402
                                    WindowEvaluation, WindowStateRecord)
from driftline.window_state import EventBatch, WindowState  # noqa: E402

T0 = 1_796_040_000_000  # a window boundary
LATENESS_S = 2


def window_states(baseline, features: int, events: int, partitions: int, window_ms: int, rng) -> list[list[bytes]]:
    """Partial states (one per partition) of a clean window and of a shifted one; every version reuses them."""
    variants = []
    for shifts in ({}, {f"f{i}": 3.0 for i in range(3, 3 + features // 3)}):
        parts = []
        for p in range(partitions):
            n = events // partitions
            frame = training_frame(rng, n, features)
            for name, shift in shifts.items():
                frame[name] += shift
            batch = [{"event_id": f"{p}-{i}", "ts_ms": T0 + int(i * window_ms / n), "model": "m", "version": "1",
                      "features": row, "prediction": float(rng.uniform()),
                      "latency_ms": {"total": float(rng.uniform(5, 20))}, "status": "ok"}
                     for i, row in enumerate(frame.to_dict(orient="records"))]
            parts.append(WindowState.empty(baseline).add_batch(EventBatch.from_events(batch)).to_bytes())
        variants.append(parts)
    return variants


def seed(db_url: str, models: int, features: int, summary: dict, variants: list[list[bytes]], events: int,
         window_ms: int, rounds: int) -> None:
    """`models` production versions, each with `rounds` closed windows of partial states."""
    with store_db.session_scope(db_url) as s:
        for m in range(models):
            model = f"model-{m:04d}"
            s.add(ModelVersion(model=model, version="1", stage="production"))
            s.add(ModelAlias(model=model, alias="production", version="1"))
            s.add(BaselineRecord(model=model, version="1", rows=3000, summary=summary))
        s.flush()
        for w in range(rounds):
            for m in range(models):
                parts = variants[1 if m % 4 == 3 and w > 0 else 0]
                for p, blob in enumerate(parts):
                    s.add(WindowStateRecord(model=f"model-{m:04d}", version="1", window_start_ms=T0 + w * window_ms,
                                            window_end_ms=T0 + (w + 1) * window_ms, partition=p,
                                            events=events // len(parts), state=blob))
            s.flush()


def jobs_for(db_url: str, window_seconds: int):
    from driftline.scheduler.jobs import SchedulerJobs

    return SchedulerJobs(load_settings(db=db_url, window_seconds=window_seconds,
                                       allowed_lateness_seconds=LATENESS_S))


def evaluate_round(jobs, db_url: str, window_ms: int, round_index: int) -> tuple[int, float, float]:
    """Evaluate every due window up to round `round_index`; (windows, wall s, CPU s of this process)."""
    now = T0 + (round_index + 1) * window_ms + LATENESS_S * 1000 + 1
    wall, cpu = time.perf_counter(), time.process_time()
    done = 0
    while True:  # the job takes 500 windows per run, like the scheduler's interval does
        n = jobs.evaluate_due_windows(now_ms=now)
        done += n
        if n == 0:
            break
    return done, time.perf_counter() - wall, time.process_time() - cpu


def warm_cache(jobs, db_url: str, models: int) -> None:
    with store_db.session_scope(db_url) as session:
        for m in range(models):
            jobs.cache.baseline(session, f"model-{m:04d}", "1")


def _scheduler_process(db_url: str, window_seconds: int, round_index: int, models: int, ready, go, out) -> None:
    jobs = jobs_for(db_url, window_seconds)
    warm_cache(jobs, db_url, models)  # a running scheduler has its baselines decoded already
    ready.put(os.getpid())
    go.wait()
    done, wall, cpu = evaluate_round(jobs, db_url, window_seconds * 1000, round_index)
    out.put((done, time.perf_counter(), cpu))


def shared_round(db_url: str, n: int, window_seconds: int, round_index: int, models: int) -> tuple[int, float, float]:
    """`n` scheduler processes evaluate one round together; (windows, wall s until the last finished, CPU s)."""
    ctx = multiprocessing.get_context("spawn")  # no SQLAlchemy engine crosses a fork
    ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_scheduler_process, args=(db_url, window_seconds, round_index, models, ready, go, out))
             for _ in range(n)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=600)
    started = time.perf_counter()
    go.set()
    results = [out.get(timeout=3600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    return sum(r[0] for r in results), max(r[1] for r in results) - started, sum(r[2] for r in results)


class Store:
    """A fresh migrated store: a SQLite file, or a PostgreSQL database dropped on exit."""

    def __init__(self, kind: str, pg_admin: str):
        self.kind, self.pg_admin, self.name = kind, pg_admin, None

    def __enter__(self) -> str:
        if self.kind == "sqlite":
            self.url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='driftline-bench-sched-')) / 'bench.db'}"
        else:
            import psycopg

            self.name = f"driftline_bench_{uuid.uuid4().hex[:10]}"
            with psycopg.connect(self.pg_admin, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{self.name}"')
            self.url = (self.pg_admin.replace("postgresql://", "postgresql+psycopg://", 1).rsplit("/", 1)[0]
                        + f"/{self.name}")
        store_db.upgrade(self.url)
        return self.url

    def __exit__(self, *exc) -> None:
        store_db.dispose_engines()
        if self.name:
            import psycopg

            with psycopg.connect(self.pg_admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def count_evaluations(db_url: str) -> int:
    from sqlalchemy import func, select

    with store_db.session_scope(db_url) as s:
        return s.scalar(select(func.count()).select_from(WindowEvaluation))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="10,100,1000", help="model counts, comma-separated")
    parser.add_argument("--features", type=int, default=30)
    parser.add_argument("--events", type=int, default=2000, help="events per window (all partitions)")
    parser.add_argument("--partitions", type=int, default=2, help="partial states per window")
    parser.add_argument("--window-seconds", type=int, default=300)
    parser.add_argument("--cold-max", type=int, default=100,
                        help="measure the first (cold) window too up to this many models")
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--schedulers", default="1,2", help="scheduler processes sharing a round on PostgreSQL")
    parser.add_argument("--shared-models", type=int, default=200, help="models in the shared-evaluation rounds")
    parser.add_argument("--pg-admin", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    window_ms = args.window_seconds * 1000
    rng = np.random.default_rng(1)
    train = training_frame(rng, 3000, args.features)
    baseline = compute_baseline(train, predictions=rng.uniform(size=3000))
    summary = baseline.to_dict()
    variants = window_states(baseline, args.features, args.events, args.partitions, window_ms, rng)
    print(f"{args.features} features, {args.events} events per window in {args.partitions} partial states "
          f"({sum(map(len, variants[0])) / 1024:.0f} KiB), {args.window_seconds}-second windows; "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("| store | models | cold: ms/window (wall / CPU) | warm: ms/window (wall / CPU) | "
          f"core share at {args.window_seconds} s windows |")
    print("|---|---|---|---|---|")
    for kind in args.stores.split(","):
        for models in map(int, args.models.split(",")):
            with Store(kind, args.pg_admin) as url:
                cold_too = models <= args.cold_max
                seed(url, models, args.features, summary, variants, args.events, window_ms, rounds=2 if cold_too else 1)
                jobs = jobs_for(url, args.window_seconds)
                if cold_too:
                    cold = evaluate_round(jobs, url, window_ms, 0)
                    cold_text = f"{cold[1] / models * 1000:.1f} / {cold[2] / models * 1000:.1f}"
                else:  # a running scheduler's baselines are decoded already
                    warm_cache(jobs, url, models)
                    cold_text = "-"
                warm = evaluate_round(jobs, url, window_ms, 1 if cold_too else 0)
                assert warm[0] == models, warm
                share = warm[2] / args.window_seconds  # CPU seconds per window length, for every model's window
                print(f"| {kind} | {models} | {cold_text} | {warm[1] / models * 1000:.1f} / "
                      f"{warm[2] / models * 1000:.1f} | {share:.2f} (load {os.getloadavg()[0]:.1f}) |", flush=True)
    if "postgresql" not in args.stores.split(","):
        return
    print(f"\nshared evaluation on PostgreSQL: {args.shared_models} models, one round of windows each")
    print("| schedulers | windows | wall s | windows/s | ratio to 1 | CPU s (all processes) |")
    print("|---|---|---|---|---|---|")
    base = None
    for n in map(int, args.schedulers.split(",")):
        with Store("postgresql", args.pg_admin) as url:
            seed(url, args.shared_models, args.features, summary, variants, args.events, window_ms, rounds=1)
            done, wall, cpu = shared_round(url, n, args.window_seconds, 0, args.shared_models)
            stored = count_evaluations(url)
            assert done == stored == args.shared_models, (done, stored)  # each window evaluated exactly once
            rate = done / wall
            base = base or rate
            print(f"| {n} | {done} | {wall:.1f} | {rate:.1f} | {rate / base:.2f} | {cpu:.1f} "
                  f"(load {os.getloadavg()[0]:.1f}) |", flush=True)


if __name__ == "__main__":
    main()
