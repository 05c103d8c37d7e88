"""What a fleet of models costs the store, the scheduler and the dashboard: `python bench/fleet.py [--quick]`.

For each store (`--stores sqlite,postgresql`; PostgreSQL: a fresh database on `--pg-admin`, dropped after):

* **a model-day**: `--day-models` model versions of `--features` features (27 numeric, 3 categorical with
  the default 30), each sending `--events` events per 5-minute window on `--partitions` Kafka partitions,
  event times simulated so that `--hours` of traffic pass in about a minute. Every window goes through the
  product's own paths: the collector's `InferenceFolder` (decode, validate, window, fold) and its `flush`
  (offsets, predictions for the label join, watermarks, window states), then the scheduler's job
  (`SchedulerJobs.evaluate_due_windows`: claim, merge, every detector, results, alerts) once the
  watermark has passed each window, and its retention job (`apply_retention`) every simulated hour. Then
  retention runs at later simulated dates (past the re-evaluation horizon, past the window-state
  retention), as the scheduler would. Reports per model-day: store bytes by table (SQLite: dbstat's
  used bytes; PostgreSQL: pg_total_relation_size over each table's partitions, after VACUUM FULL), rows
  written and deleted, collector and scheduler CPU, and the 30-day footprint per model.
* **the fleet**: `--models` model versions (default 1 000), one window each written and judged the same
  way; then the scheduler's `/metrics` scrape (`scheduler.metrics.SchedulerMetrics`, the store read
  and the exposition) and the dashboard overview's queries (the `dashboard/queries.py` functions
  `dashboard/views/overview.py` calls, caches cleared) over 24 hours and 30 days, timed; with a
  projection to `--project` models (linear in models: rows, bytes and CPU per model).

`--quick`: 20 models, 6 hours, SQLite only. Prints figures; asserts nothing.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support, from the repository root
from tests.support.drift_store import training_frame  # noqa: E402
from tests.support.flushing import FlushingCollector  # noqa: E402
from bench.scheduler import Store as SchedulerBenchStore  # noqa: E402

from driftline.baseline import compute_baseline  # noqa: E402
from driftline.collector.store import prune as prune_predictions  # noqa: E402
from driftline.config import load_settings  # noqa: E402
from driftline.store import db as store_db  # noqa: E402
from driftline.store.models import Base, BaselineRecord, ModelAlias, ModelVersion  # noqa: E402

WINDOW_MS = 300_000
DAY_MS = 86_400_000
T0 = 1_796_040_000_000 // DAY_MS * DAY_MS  # a day boundary (2026-12-01)
LATENESS_S = 2
# the tables a model's traffic grows; the rest (registry, alerts, offsets) are per model, not per day
GROWING = ("window_states", "window_rollups", "detector_results", "result_rollups", "window_evaluations",
           "predictions", "evidence_states")
AGES = (8, 15, 31)  # days after the simulated day at which retention runs again


@dataclass
class Traffic:
    """Encoded events of one model version: a pool of feature rows reused with fresh ids and times."""

    features: list[bytes]
    predictions: np.ndarray
    sequence: int = 0

    def window(self, model: str, start_ms: int, events: int, partitions: int) -> list[list[bytes]]:
        """One window's events, split round-robin over the partitions, in event-time order."""
        out: list[list[bytes]] = [[] for _ in range(partitions)]
        pool = len(self.features)
        for i in range(events):
            n = self.sequence
            self.sequence += 1
            ts = start_ms + i * WINDOW_MS // events
            out[i % partitions].append(
                b'{"schema":"driftline.inference/v1","event_id":"%s-%d","request_id":"%s-%d","ts":%d,"model":"%s",'
                b'"version":"1","features":%s,"prediction":%.4f,"latency_ms":{"total":%.2f},"status":"ok"}' % (
                    model.encode(), n, model.encode(), n, ts, model.encode(), self.features[n % pool],
                    self.predictions[n % pool], 5.0 + (n * 7 % 13)))
        return out


class Store(SchedulerBenchStore):
    """A fresh migrated store (bench/scheduler.py's), with its tables' bytes and rows."""

    def __enter__(self) -> "Store":
        super().__enter__()
        return self

    def table_bytes(self) -> dict[str, int]:
        """Bytes per growing table, its indexes included."""
        engine = store_db.get_engine(self.url)
        present = [t for t in GROWING if t in Base.metadata.tables or _has_table(engine, t)]
        if self.kind == "sqlite":
            with engine.connect() as conn:
                rows = conn.exec_driver_sql(
                    "SELECT m.tbl_name, SUM(d.pgsize - d.unused) FROM dbstat AS d JOIN sqlite_master AS m "
                    "ON d.name = m.name GROUP BY m.tbl_name").all()
            found = {name: int(size or 0) for name, size in rows}
            return {t: found.get(t, 0) for t in present}
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            for t in present:  # live bytes, as SQLite's used bytes: the space deletes free is not counted
                conn.exec_driver_sql(f"VACUUM FULL {t}")
            # a partitioned table's bytes are its partitions'; pg_partition_tree lists none for a plain table
            return {t: int(conn.exec_driver_sql(
                "SELECT COALESCE((SELECT SUM(pg_total_relation_size(relid)) FROM pg_partition_tree(%s::regclass)), "
                "pg_total_relation_size(%s::regclass))", (t, t)).scalar() or 0) for t in present}

    def row_counts(self) -> dict[str, int]:
        engine = store_db.get_engine(self.url)
        with engine.connect() as conn:
            return {t: int(conn.exec_driver_sql(f"SELECT COUNT(*) FROM {t}").scalar() or 0)
                    for t in GROWING if _has_table(engine, t)}


def _has_table(engine: Any, name: str) -> bool:
    from sqlalchemy import inspect

    return inspect(engine).has_table(name)


def register(db_url: str, models: list[str], summary: dict[str, Any]) -> None:
    with store_db.session_scope(db_url) as s:
        for model in models:
            s.add(ModelVersion(model=model, version="1", stage="production"))
            s.add(ModelAlias(model=model, alias="production", version="1"))
            s.add(BaselineRecord(model=model, version="1", rows=3000, summary=summary))


def scheduler_jobs(db_url: str):  # noqa: ANN201 - SchedulerJobs, imported late (the scheduler's settings)
    from driftline.scheduler.jobs import SchedulerJobs

    return SchedulerJobs(load_settings(db=db_url, window_seconds=WINDOW_MS // 1000,
                                       allowed_lateness_seconds=LATENESS_S))


def timed_cpu(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.process_time()
    out = fn()
    return out, time.process_time() - started


def judge_all(jobs: Any, now_ms: int) -> tuple[int, float]:
    """The scheduler's evaluation job until nothing is due; (windows, CPU s)."""
    started, done = time.process_time(), 0
    while True:
        n = jobs.evaluate_due_windows(now_ms=now_ms)
        done += n
        if n == 0:
            return done, time.process_time() - started


def add(into: dict[str, int], counts: dict[str, int]) -> None:
    for table, n in counts.items():
        into[table] = into.get(table, 0) + int(n)


def model_day(store: Store, args: argparse.Namespace, summary: dict[str, Any], baseline: Any,
              traffic: dict[str, Traffic]) -> dict[str, Any]:
    """`--day-models` models through `--hours` of 5-minute windows; then retention at later dates."""
    models = [f"day-{m:02d}" for m in range(args.day_models)]
    register(store.url, models, summary)
    collector = FlushingCollector(store.url, {(m, "1"): baseline for m in models}, WINDOW_MS, LATENESS_S * 1000)
    jobs = scheduler_jobs(store.url)
    windows = args.hours * 3600_000 // WINDOW_MS
    scheduler_cpu = retention_cpu = 0.0
    deleted: dict[str, int] = {}
    wall = time.perf_counter()
    for w in range(windows):
        start = T0 + w * WINDOW_MS
        collector.now_ms = start + WINDOW_MS
        per_partition: dict[int, list[bytes]] = {p: [] for p in range(args.partitions)}
        for model in models:
            for p, values in enumerate(traffic[model].window(model, start, args.events, args.partitions)):
                per_partition[p] += values
        collector.consume(per_partition)
        # the next window's first events move the watermark past this one: judge what closed
        _, cpu = judge_all(jobs, start + WINDOW_MS + LATENESS_S * 1000 + 1)
        scheduler_cpu += cpu
        if (w + 1) % 12 == 0:  # the retention job, every simulated hour
            counts, cpu = timed_cpu(lambda: jobs.apply_retention(now_ms=start + WINDOW_MS))
            retention_cpu += cpu
            add(deleted, counts)
    end_ms = T0 + windows * WINDOW_MS
    collector.now_ms = end_ms + WINDOW_MS
    per_partition = {p: [] for p in range(args.partitions)}
    for model in models:  # one more window's events close the last window
        for p, values in enumerate(traffic[model].window(model, end_ms + 10_000, args.partitions, args.partitions)):
            per_partition[p] += values
    collector.consume(per_partition)
    judged, cpu = judge_all(jobs, end_ms + LATENESS_S * 1000 + 1)
    scheduler_cpu += cpu
    counts, cpu = timed_cpu(lambda: jobs.apply_retention(now_ms=end_ms))
    retention_cpu += cpu
    add(deleted, counts)
    wall = time.perf_counter() - wall
    day = {"bytes": store.table_bytes(), "rows": store.row_counts(), "deleted": dict(deleted),
           "collector_cpu": collector.cpu_s, "scheduler_cpu": scheduler_cpu, "retention_cpu": retention_cpu,
           "wall": wall, "windows": windows, "models": len(models)}
    # later dates: the scheduler's retention job (every run's batches) and the collector's prediction pruning
    ages = {}
    for days in AGES:
        label = f"{days} days on"
        later = end_ms + days * DAY_MS
        aged: dict[str, int] = {}
        while True:
            counts, cpu = timed_cpu(lambda: jobs.apply_retention(now_ms=later))
            retention_cpu += cpu
            add(aged, counts)
            if not any(counts.values()):
                break
        predictions, _labels = prune_predictions(store_db.get_engine(store.url),
                                                 later - args.prediction_days * DAY_MS)
        add(aged, {"predictions": predictions})
        ages[label] = {"bytes": store.table_bytes(), "rows": store.row_counts(), "deleted": aged}
    day["ages"] = ages
    day["retention_cpu"] = retention_cpu
    return day


def fleet(store: Store, args: argparse.Namespace, summary: dict[str, Any], baseline: Any,
          traffic: Traffic) -> dict[str, Any]:
    """`--models` models, one window each (written and judged), then /metrics and the dashboard overview."""
    models = [f"model-{m:05d}" for m in range(args.models)]
    register(store.url, models, summary)
    collector = FlushingCollector(store.url, {(m, "1"): baseline for m in models}, WINDOW_MS, LATENESS_S * 1000)
    start = T0 + 40 * DAY_MS
    collector.now_ms = start + WINDOW_MS
    chunk = max(1, 20_000 // args.events)  # models per flush: a collector flushes every second or so
    for i in range(0, len(models), chunk):
        per_partition: dict[int, list[bytes]] = {p: [] for p in range(args.partitions)}
        for model in models[i:i + chunk]:
            for p, values in enumerate(traffic.window(model, start, args.events, args.partitions)):
                per_partition[p] += values
        collector.consume(per_partition)
    collector.now_ms = start + 2 * WINDOW_MS
    closing = {p: [] for p in range(args.partitions)}
    for p, values in enumerate(traffic.window(models[0], start + WINDOW_MS + 10_000, args.partitions,
                                              args.partitions)):
        closing[p] += values
    collector.consume(closing)
    jobs = scheduler_jobs(store.url)
    with store_db.session_scope(store.url) as session:  # a running scheduler has its baselines decoded
        for model in models:
            jobs.cache.baseline(session, model, "1")
    judged, scheduler_cpu = judge_all(jobs, start + WINDOW_MS + LATENESS_S * 1000 + 1)
    now_ms = start + 2 * WINDOW_MS
    return {"models": len(models), "judged": judged, "collector_cpu": collector.cpu_s,
            "scheduler_cpu": scheduler_cpu, "metrics": scrape(store.url), "overview": overview(store.url, now_ms),
            "result_rows": store.row_counts().get("detector_results", 0)}


def scrape(db_url: str) -> dict[str, float]:
    """The scheduler's /metrics: the first scrape (reads the store) and one from its cache."""
    from prometheus_client import generate_latest

    from scheduler.metrics import SchedulerMetrics

    metrics = SchedulerMetrics(db_url, cache_seconds=3600)
    wall = time.perf_counter()
    body = generate_latest(metrics.registry)
    cold = time.perf_counter() - wall
    wall = time.perf_counter()
    generate_latest(metrics.registry)
    warm = time.perf_counter() - wall
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    return {"cold_s": cold, "cached_s": warm, "bytes": len(body), "series": series}


def overview(db_url: str, now_ms: int) -> dict[str, float]:
    """Wall seconds of the overview page's queries (dashboard/views/overview.py), caches cleared, per range."""
    import streamlit as st

    from dashboard import presentation, queries
    from driftline.vocabulary import DATA_DRIFT, LATENCY

    out = {}
    for label, span in (("24 h", DAY_MS), ("30 d", 30 * DAY_MS)):
        st.cache_data.clear()
        start_ms = now_ms - span
        wall = time.perf_counter()
        queries.model_versions(db_url, start_ms, now_ms)
        queries.version_activity(db_url, start_ms, now_ms)
        queries.latest_results(db_url, start_ms, now_ms)
        queries.alerts(db_url, start_ms)
        queries.dead_letter_count(db_url, start_ms)
        queries.judging_progress(db_url, now_ms, 300_000)
        first = queries.first_window_ms(db_url, None, None, start_ms, now_ms) or start_ms
        bucket = presentation.bucket_size_ms(first, now_ms, queries.window_length_ms(db_url))
        queries.detector_buckets(db_url, queries.BucketQuery(None, None, first, now_ms, bucket, detectors=(LATENCY,),
                                                             metrics=presentation.HEADLINE_METRICS["p99"]))
        queries.detector_buckets(db_url, queries.BucketQuery(None, None, first, now_ms, bucket, detectors=(DATA_DRIFT,)))
        out[label] = time.perf_counter() - wall
    return out


def kib(n: float) -> str:
    return f"{n / 1024:,.0f} KiB" if n < 10 * 1024 * 1024 else f"{n / 1024 / 1024:,.1f} MiB"


def report_day(kind: str, day: dict[str, Any], args: argparse.Namespace) -> None:
    scale = DAY_MS / (day["windows"] * WINDOW_MS) / day["models"]  # to one model-day
    print(f"\n### {kind}: per model-day ({day['models']} models x {args.hours} h of 5-minute windows, "
          f"{args.events} events per window on {args.partitions} partitions, {args.features} features; "
          f"run {day['wall']:.0f} s)")
    ages = [f"{d} days on" for d in AGES]
    print("| table | bytes after the day | rows after the day | deleted during the day | "
          + " | ".join(f"bytes {a}" for a in ages) + " |")
    print("|---|---|---|---|" + "---|" * len(ages))
    for table in GROWING:
        if table not in day["bytes"]:
            continue
        print(f"| {table} | {kib(day['bytes'][table] * scale)} | {day['rows'].get(table, 0) * scale:,.0f} | "
              f"{day['deleted'].get(table, 0) * scale:,.0f} | "
              + " | ".join(kib(day["ages"][a]["bytes"][table] * scale) for a in ages) + " |")
    print(f"| all | {kib(sum(day['bytes'].values()) * scale)} | | | "
          + " | ".join(kib(sum(day["ages"][a]["bytes"].values()) * scale) for a in ages) + " |")
    for label, age in day["ages"].items():
        gone = ", ".join(f"{n * scale:,.0f} {t}" for t, n in age["deleted"].items() if n)
        print(f"retention {label}: deleted per model-day {gone or 'nothing'}")
    footprint = footprint_per_model(day, scale, args)
    print(f"CPU per model-day: collector {day['collector_cpu'] * scale:.1f} s, scheduler (judging) "
          f"{day['scheduler_cpu'] * scale:.1f} s, retention {day['retention_cpu'] * scale:.2f} s")
    print(f"store held per model at steady state (states 30 d, results 90 d, predictions "
          f"{args.prediction_days} d): {kib(footprint)}")


def footprint_per_model(day: dict[str, Any], scale: float, args: argparse.Namespace) -> float:
    """Bytes one model holds once every retention applies: a model-day's bytes at each age, summed over the days
    its tables keep it (states 30 days, results 90, predictions --prediction-days)."""
    def at(age: str | None, *tables: str) -> float:
        found = day["bytes"] if age is None else day["ages"][age]["bytes"]
        return sum(found.get(t, 0) for t in tables) * scale

    states = ("window_states", "window_rollups")
    results = ("detector_results", "result_rollups", "window_evaluations")
    return (7 * at(None, *states) + 7 * at("8 days on", *states) + 16 * at("15 days on", *states)
            + 7 * at(None, *results) + 83 * at("8 days on", *results)
            + args.prediction_days * at(None, "predictions"))


def report_fleet(kind: str, f: dict[str, Any], args: argparse.Namespace) -> None:
    m = f["models"]
    per_model_cpu = (f["scheduler_cpu"] + f["collector_cpu"]) / m
    print(f"\n### {kind}: the fleet, {m} models x 1 window")
    print(f"judged {f['judged']} windows; per window: collector CPU {f['collector_cpu'] / m * 1000:.0f} ms, "
          f"scheduler CPU {f['scheduler_cpu'] / m * 1000:.0f} ms; {f['result_rows'] / m:.0f} result rows")
    mt = f["metrics"]
    print(f"/metrics: {mt['series']:,} series, {kib(mt['bytes'])}; scrape reading the store "
          f"{mt['cold_s'] * 1000:,.0f} ms, from its cache {mt['cached_s'] * 1000:,.0f} ms")
    print("dashboard overview (queries, caches cleared): " + ", ".join(
        f"{label} {s * 1000:,.0f} ms" for label, s in f["overview"].items()))
    k = args.project / m
    print(f"projection to {args.project:,} models (linear): {mt['series'] * k:,.0f} series, "
          f"{kib(mt['bytes'] * k)} per scrape, {per_model_cpu * args.project * 288 / 86400:.2f} cores "
          f"(collector + scheduler) at 5-minute windows")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=1000, help="models in the fleet measurement")
    parser.add_argument("--project", type=int, default=10_000, help="project the fleet's figures to this many")
    parser.add_argument("--day-models", type=int, default=1, help="models sent through the simulated day")
    parser.add_argument("--hours", type=int, default=24, help="simulated hours of traffic per model")
    parser.add_argument("--features", type=int, default=30)
    parser.add_argument("--events", type=int, default=1000, help="events per window")
    parser.add_argument("--partitions", type=int, default=2, help="Kafka partitions of the inference topic")
    parser.add_argument("--prediction-days", type=int, default=7, help="the collector's prediction retention")
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--skip", default="", help="'day' or 'fleet' to leave that part out")
    parser.add_argument("--quick", action="store_true", help="20 models, 6 hours, SQLite")
    parser.add_argument("--pg-admin", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    logging.getLogger("streamlit").setLevel(logging.ERROR)  # "no runtime found": the queries run outside a page
    logging.getLogger("driftline").setLevel(logging.WARNING)
    if args.quick:
        args.models, args.hours, args.stores = min(args.models, 20), min(args.hours, 6), "sqlite"
    rng = np.random.default_rng(1)
    train = training_frame(rng, 3000, args.features)
    for i, name in enumerate(("c1", "c2")):  # two more categorical features beside `region`
        if f"f{3 + i}" in train:
            train[name] = rng.choice(["a", "b", "c", "d"], len(train))
            del train[f"f{3 + i}"]
    baseline = compute_baseline(train, predictions=rng.uniform(size=len(train)))
    summary = baseline.to_dict()
    pool = training_frame(np.random.default_rng(2), 5000, args.features)
    for i, name in enumerate(("c1", "c2")):
        if f"f{3 + i}" in pool:
            pool[name] = np.random.default_rng(3 + i).choice(["a", "b", "c", "d"], len(pool))
            del pool[f"f{3 + i}"]
    rows = [orjson.dumps(r, option=orjson.OPT_SERIALIZE_NUMPY) for r in pool.to_dict(orient="records")]
    predictions = np.random.default_rng(4).uniform(size=len(rows))
    print(f"bench/fleet.py: {args.features} features, {args.events} events per 5-minute window, "
          f"{args.partitions} partitions; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for kind in args.stores.split(","):
        if "day" not in args.skip:
            with Store(kind, args.pg_admin) as store:
                traffic = {f"day-{m:02d}": Traffic(rows, predictions) for m in range(args.day_models)}
                report_day(kind, model_day(store, args, summary, baseline, traffic), args)
        if "fleet" not in args.skip:
            with Store(kind, args.pg_admin) as store:
                report_fleet(kind, fleet(store, args, summary, baseline, Traffic(rows, predictions)), args)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
