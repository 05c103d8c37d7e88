"""How fast a backlog is judged, as after an outage: `python bench/catchup.py [--models 10] [--windows 100]`.

Seeds a store (a temporary SQLite file, or `--db URL`: migrated here, and it must hold no window states yet) with
`--models` production model versions of `--features` features, each with its training baseline, and `--windows`
consecutive closed one-minute windows per version ending just before now, written as the collectors would: one
partial state per partition (`--partitions`) of `--events` events per window in all, the last fifth of the
windows of every other version with a third of the features shifted (so the evidence and the alert lifecycle
have work). Then the partitions' event-time watermarks (`partition_watermarks`: 4 partitions of the inference
topic, group "bench", reading, their event time past the last window's end plus the allowed lateness), so every
window is closed by the watermark, not by the wall clock. Seeding is not measured.

Measures the real scheduler job, `SchedulerJobs(load_settings(db=..., window_seconds=60,
allowed_lateness_seconds=30)).evaluate_due_windows()` called in a loop (at most 4 pages of 500 windows per call)
until every window has its `WindowEvaluation`: wall seconds, CPU seconds of this process (time.process_time),
windows judged per second, CPU ms per window, and the ratio to the rate the live stream makes windows
(`--models` / window length windows per second), with what that means for a one-hour outage. A progress line
every ~10 s (counted from the job's own "evaluated" log records). Afterwards (not timed) it checks that every
window was judged exactly once and in event-time order per version: evaluation times rise with the window
start, and every evidence stream of a version stands at its last window. Prints figures; asserts nothing about
timing.

PostgreSQL: `--db postgresql+psycopg://postgres@127.0.0.1:5432/<scratch db>` (create it first, drop it after).
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from sqlalchemy import func, select

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support, from the repository root
from tests.support.drift_store import register, training_frame  # noqa: E402

from driftline import defaults  # noqa: E402
from driftline.config import TOPIC_INFERENCE, load_settings  # noqa: E402
from driftline.store import db as store_db  # noqa: E402
from driftline.store.models import (Alert, EvidenceState, PartitionWatermark, WindowEvaluation,  # noqa: E402
                                    WindowQuarantine, WindowStateRecord)
from driftline.store.watermarks import stream_watermark  # noqa: E402
from driftline.window_state import EventBatch, WindowState  # noqa: E402

WINDOW_SECONDS = 60
LATENESS_SECONDS = 30
WATERMARK_PARTITIONS = 4
PROGRESS_SECONDS = 10.0


class Progress(logging.Handler):
    """Counts the scheduler's "evaluated ..." records and prints a line every ~10 s; passes warnings through."""

    def __init__(self, total: int):
        super().__init__(logging.INFO)
        self.total, self.done = total, 0
        self.started = self.last = time.perf_counter()

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            print(f"  {record.levelname.lower()}: {record.getMessage()}", file=sys.stderr, flush=True)
        if record.msg.startswith("evaluated "):
            self.done += 1
            now = time.perf_counter()
            if now - self.last >= PROGRESS_SECONDS:
                self.last = now
                print(f"  {self.done} / {self.total} windows judged, {now - self.started:.0f} s "
                      f"({self.done / (now - self.started):.1f} windows/s)", flush=True)


def seed(db_url: str, models: int, windows: int, events: int, partitions: int, features: int,
         first_start_ms: int) -> None:
    """Versions with baselines, every window's partial states, then the watermarks that close them all."""
    rng = np.random.default_rng(7)
    window_ms = WINDOW_SECONDS * 1000
    # a third of the features moved by a standard deviation (income's is 10, f3...'s 1)
    shifted = {"income": 10.0, **{f"f{i}": 1.0 for i in range(3, min(3 + features // 3 - 1, features))}}
    for m in range(models):
        model = f"model-{m:03d}"
        baseline = register(db_url, model, "1", rng, features=features)
        for w in range(windows):
            start = first_start_ms + w * window_ms
            drift = m % 2 == 1 and w >= windows - windows // 5
            records = []
            for p in range(partitions):
                n = events // partitions + (1 if p < events % partitions else 0)
                frame = training_frame(rng, n, features)
                for name, shift in (shifted.items() if drift else ()):
                    frame[name] += shift
                batch = [{"event_id": f"{model}-{start}-{p}-{i}", "ts_ms": start + int(i * window_ms / n),
                          "model": model, "version": "1", "features": row, "prediction": float(rng.uniform()),
                          "latency_ms": {"total": float(rng.uniform(5, 20))}, "status": "ok"}
                         for i, row in enumerate(frame.to_dict(orient="records"))]
                state = WindowState.empty(baseline).add_batch(EventBatch.from_events(batch))
                records.append(WindowStateRecord(model=model, version="1", window_start_ms=start,
                                                 window_end_ms=start + window_ms, partition=p, events=n,
                                                 state=state.to_bytes()))
            with store_db.session_scope(db_url) as s:
                s.add_all(records)
    last_end = first_start_ms + windows * window_ms
    with store_db.session_scope(db_url) as s:
        now = datetime.now(timezone.utc)
        for p in range(WATERMARK_PARTITIONS):
            s.add(PartitionWatermark(group_id="bench", topic=TOPIC_INFERENCE, partition=p,
                                     event_time_ms=last_end + LATENESS_SECONDS * 1000 + 1_000 * (p + 1),
                                     idle_since=None, updated_at=now))


def count(db_url: str, model) -> int:
    with store_db.session_scope(db_url) as s:
        return int(s.scalar(select(func.count()).select_from(model)))


def verify(db_url: str, models: int, windows: int, first_start_ms: int) -> list[str]:
    """What is wrong with the judged store (nothing: an empty list)."""
    problems = []
    window_ms = WINDOW_SECONDS * 1000
    last_start = first_start_ms + (windows - 1) * window_ms
    evaluations = count(db_url, WindowEvaluation)
    if evaluations != models * windows:
        problems.append(f"{evaluations} WindowEvaluation rows, expected {models * windows}")
    quarantined = count(db_url, WindowQuarantine)
    if quarantined:
        problems.append(f"{quarantined} windows in quarantine")
    with store_db.session_scope(db_url) as s:
        order: dict[tuple[str, str], list[tuple[int, datetime]]] = {}
        for model, version, start, at in s.execute(
                select(WindowEvaluation.model, WindowEvaluation.version, WindowEvaluation.window_start_ms,
                       WindowEvaluation.evaluated_at)
                .order_by(WindowEvaluation.model, WindowEvaluation.version, WindowEvaluation.window_start_ms)):
            order.setdefault((model, version), []).append((int(start), at))
        for key, rows in order.items():
            times = [at for _, at in rows]
            if any(b < a for a, b in zip(times, times[1:])):
                problems.append(f"{key[0]} v{key[1]}: windows not judged in event-time order")
        evidence = {(m, v): (int(lo), int(hi), int(n)) for m, v, lo, hi, n in s.execute(
            select(EvidenceState.model, EvidenceState.version, func.min(EvidenceState.last_window_start_ms),
                   func.max(EvidenceState.last_window_start_ms), func.count())
            .group_by(EvidenceState.model, EvidenceState.version))}
    for m in range(models):
        key = (f"model-{m:03d}", "1")
        lo, hi, n = evidence.get(key, (None, None, 0))
        if not n or lo != last_start or hi != last_start:
            problems.append(f"{key[0]}: evidence streams stand at {lo}..{hi} ({n} streams), its last window "
                            f"starts at {last_start}")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--windows", type=int, default=100, help="one-minute windows per model")
    parser.add_argument("--events", type=int, default=1000, help="events per window (all partitions)")
    parser.add_argument("--partitions", type=int, default=2, help="partial states per window")
    parser.add_argument("--features", type=int, default=10)
    parser.add_argument("--db", default=None, help="a store URL (default: a temporary SQLite file)")
    args = parser.parse_args()
    folder = None
    if args.db:
        db_url = args.db
    else:
        folder = tempfile.mkdtemp(prefix="driftline-bench-catchup-")
        db_url = f"sqlite:///{Path(folder) / 'bench.db'}"
    try:
        run(db_url, args)
    finally:
        store_db.dispose_engines()
        if folder:
            shutil.rmtree(folder, ignore_errors=True)


def run(db_url: str, args: argparse.Namespace) -> None:
    total = args.models * args.windows
    window_ms = WINDOW_SECONDS * 1000
    store_db.upgrade(db_url)
    if count(db_url, WindowStateRecord):
        print(f"{store_db.redacted_url(db_url)} holds window states already: give an empty store")
        return
    # the backlog: the last `windows` whole minutes before the current one, as after an outage
    first_start_ms = (int(time.time() * 1000) // window_ms - 1 - args.windows) * window_ms
    started = time.perf_counter()
    seed(db_url, args.models, args.windows, args.events, args.partitions, args.features, first_start_ms)
    print(f"store: {store_db.redacted_url(db_url).split('://')[0]}, {args.models} models x {args.windows} "
          f"windows of {WINDOW_SECONDS} s = {total} windows, {args.events} events each in {args.partitions} "
          f"partial states, {args.features} features; seeded in {time.perf_counter() - started:.0f} s "
          f"(not measured); load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)

    with store_db.session_scope(db_url) as s:  # what closes the windows: the partitions' low watermark
        now_ms = int(time.time() * 1000)
        watermark = stream_watermark(s, now_ms, defaults.IDLE_PARTITION_SECONDS * 1000)
    last_end = first_start_ms + args.windows * window_ms
    print(f"low watermark: {(watermark - last_end) / 1000:.0f} s past the last window's end "
          f"(the wall clock {(now_ms - last_end) / 1000:.0f} s past it)", flush=True)

    logger = logging.getLogger("driftline.scheduler")
    progress = Progress(total)
    logger.addHandler(progress)
    logger.setLevel(logging.INFO)
    from driftline.scheduler.jobs import SchedulerJobs

    jobs = SchedulerJobs(load_settings(db=db_url, window_seconds=WINDOW_SECONDS,
                                       allowed_lateness_seconds=LATENESS_SECONDS))
    calls = judged = 0
    progress.started = progress.last = wall = time.perf_counter()
    cpu = time.process_time()
    while True:
        n = jobs.evaluate_due_windows()
        calls += 1
        judged += n
        if count(db_url, WindowEvaluation) >= total:
            break
        if n == 0:
            print("  the job judged nothing more: stopping short", flush=True)
            break
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    logger.removeHandler(progress)

    rate = judged / wall if wall else float("inf")
    live = args.models / WINDOW_SECONDS  # windows per second the live stream makes
    hour_backlog = args.models * 3600 // WINDOW_SECONDS
    print(f"judged {judged} windows in {calls} calls: {wall:.1f} s wall, {cpu:.1f} s CPU "
          f"(load {os.getloadavg()[0]:.1f})")
    print(f"  {rate:.2f} windows/s, {wall / max(judged, 1) * 1000:.1f} ms wall and "
          f"{cpu / max(judged, 1) * 1000:.1f} ms CPU per window")
    print(f"  live stream: {live:.3f} windows/s ({args.models} models of {WINDOW_SECONDS} s windows); "
          f"catch-up runs {rate / live:.0f} x faster than the stream it is catching up with")
    caught_up = hour_backlog / (rate - live) if rate > live else float("inf")
    print(f"  a 1-hour outage's backlog ({hour_backlog} windows) is judged in {hour_backlog / rate:.0f} s; "
          f"with the live windows still arriving, caught up after {caught_up:.0f} s")
    with store_db.session_scope(db_url) as s:
        alerts = dict(s.execute(select(Alert.state, func.count()).group_by(Alert.state)).all())
    print(f"  alerts after the backlog: {', '.join(f'{n} {state}' for state, n in sorted(alerts.items())) or 'none'}")
    problems = verify(db_url, args.models, args.windows, first_start_ms)
    if problems:
        print("check FAILED:")
        for problem in problems[:20]:
            print(f"  {problem}")
    else:
        print(f"check: {total} WindowEvaluation rows, none quarantined; every version judged in event-time "
              "order, its evidence streams at its last window")


if __name__ == "__main__":
    main()
