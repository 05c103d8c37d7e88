"""How the dashboard scales with months of windows and with a fleet of models:
`python bench/dashboard.py [--days 30]` and `python bench/dashboard.py --fleet 1000 [--features 30]`.

Writes a SQLite store with one model version evaluated every minute for `--days` days
(14 per-feature drift results and 6 latency results per window, as the detectors
write them), then times the model page's main query (`queries.detector_buckets`, all
detector results of the range folded into at most DASHBOARD_MAX_TIME_BUCKETS buckets
in SQL) for each time range, cold and at the next refresh (completed buckets cached),
beside the naive peer measured in the same run: reading every result row of the range
into pandas. Prints figures; asserts nothing.

`--fleet N`: one model of `--features` features judged by the real scheduler over `--windows` recent windows,
copied to N models (tests/support/fleet_store.py), then the overview's first load (Streamlit's AppTest running
the whole app, caches empty) and the next one (cached), beside its queries one by one and the peer the overview
used before, measured in the same run: the newest window's results read one version at a time.
bench/fleet.py imports `fleet_overview`.
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

import numpy as np
import pandas as pd
from sqlalchemy import func, insert, select

from driftline import vocabulary
from driftline.store import db as store_db
from driftline.store.models import DetectorResult, WindowEvaluation

MINUTE = 60_000
FEATURES = [f"feature_{i:02d}" for i in range(14)]
LATENCY = vocabulary.LATENCY_METRICS


def fill(url: str, days: int, seed: int = 0) -> int:
    rng = np.random.default_rng(seed)
    now = int(time.time() * 1000) // MINUTE * MINUTE
    starts = now - np.arange(days * 1440, 0, -1, dtype=np.int64) * MINUTE
    rows = 0
    with store_db.session_scope(url) as session:
        for chunk in np.array_split(starts, max(len(starts) // 2000, 1)):
            results = []
            for start in chunk.tolist():
                common = {"model": "m", "version": "1", "window_start_ms": start, "window_end_ms": start + MINUTE,
                          "details": {}}
                for feature in FEATURES:
                    psi = float(rng.gamma(2.0, 0.03))
                    results.append({**common, "detector": vocabulary.DATA_DRIFT, "feature": feature, "metric": vocabulary.PSI,
                                    "value": psi, "threshold": 0.2, "breached": psi >= 0.2})
                for metric in LATENCY:
                    results.append({**common, "detector": vocabulary.LATENCY, "feature": "", "metric": metric,
                                    "value": float(rng.gamma(3.0, 10.0)), "threshold": 100.0 if metric == vocabulary.P99_MS else None,
                                    "breached": False})
            session.execute(insert(DetectorResult), results)
            session.execute(insert(WindowEvaluation), [
                {"model": "m", "version": "1", "window_start_ms": s, "window_end_ms": s + MINUTE, "events": 300,
                 "partitions": 1, "status": "ok", "summary": {}} for s in chunk.tolist()])
            rows += len(results)
    return rows


def timed(fn, repeat: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - started)
    return best, out


APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"


@dataclass(frozen=True)
class OverviewLoad:
    """The overview at fleet size (seconds): first load and a cached one, the queries, and the old per-version read."""

    first_load_s: float
    first_load_cpu_s: float  # this process' CPU (AppTest runs the page in a thread of it): less the wait for a core
    cached_load_s: float
    queries_s: dict[str, float]
    per_version_read_s: float
    result_rows: int


def fleet_overview(folder: Path, models: int, features: int = 30, windows: int = 4, runs: int = 3) -> OverviewLoad:
    """Build a store of `models` copies of one judged model in `folder` and measure its overview (see --fleet)."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support, from the repository root
    from tests.support.drift_store import WINDOW_MS
    from tests.support.fleet_store import clone_fleet, evaluate_template

    from driftline import defaults
    from driftline.dashboard import attention, presentation, queries

    url = f"sqlite:///{folder / f'overview-{models}.db'}"
    store_db.upgrade(url)
    evaluate_template(url, features=features, windows=windows)
    now = int(time.time() * 1000)
    clone_fleet(url, models, template="template", start_ms=now // WINDOW_MS * WINDOW_MS - (windows + 2) * WINDOW_MS)
    os.environ["DRIFTLINE_DB"], os.environ["DRIFTLINE_DASHBOARD_REFRESH_SECONDS"] = url, "0"
    first, first_cpu, cached = [], [], []
    AppTest.from_file(str(APP), default_timeout=600).run()  # the modules' first import is not the page's load
    for _ in range(runs):
        st.cache_data.clear()
        started, started_cpu = time.perf_counter(), time.process_time()
        at = AppTest.from_file(str(APP), default_timeout=600).run()
        first.append(time.perf_counter() - started)
        first_cpu.append(time.process_time() - started_cpu)
        assert not at.exception, [e.message for e in at.exception]
        started = time.perf_counter()
        AppTest.from_file(str(APP), default_timeout=600).run()
        cached.append(time.perf_counter() - started)
    start, end = presentation.bounded_range(now, 86400, defaults.DASHBOARD_CACHE_TTL_SECONDS)
    st.cache_data.clear()
    steps = {"model_versions": lambda: queries.model_versions(url, start, end),
             "version_activity": lambda: queries.version_activity(url, start, end),
             "version_health": lambda: queries.version_health(url, start, end),
             "alert_counts": lambda: queries.alert_counts(url),
             "ranking (pandas)": lambda: attention.ranking(
                 queries.model_versions(url, start, end), queries.version_activity(url, start, end),
                 queries.version_health(url, start, end), queries.alert_counts(url)),
             "latest_results, every version (one query)": lambda: queries.latest_results(url, start, end)}
    timings = {name: timed(step, repeat=1)[0] for name, step in steps.items()}
    per_version_s, rows = timed(lambda: _per_version_results(url, start, end), repeat=1)
    store_db.dispose_engines()
    return OverviewLoad(statistics.median(first), statistics.median(first_cpu), statistics.median(cached), timings,
                        per_version_s, rows)


def _per_version_results(url: str, start_ms: int, end_ms: int) -> int:
    """The overview's read before: each version's newest window, then its results one version at a time."""
    with store_db.session_scope(url) as session:
        newest = session.execute(
            select(WindowEvaluation.model, WindowEvaluation.version, func.max(WindowEvaluation.window_start_ms))
            .where(WindowEvaluation.window_start_ms >= start_ms, WindowEvaluation.window_start_ms < end_ms)
            .group_by(WindowEvaluation.model, WindowEvaluation.version)).all()
        rows = 0
        for model, version, start in newest:
            rows += len(session.execute(
                select(DetectorResult.detector, DetectorResult.feature, DetectorResult.metric, DetectorResult.value,
                       DetectorResult.threshold, DetectorResult.breached)
                .where(DetectorResult.model == model, DetectorResult.version == version,
                       DetectorResult.window_start_ms == start, DetectorResult.segment == "")).all())
    return rows


def main(argv: list[str] | None = None) -> None:
    import streamlit as st

    from driftline.dashboard import presentation, queries
    from driftline import defaults

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--fleet", type=int, nargs="*", help="models: measure the overview at these fleet sizes")
    parser.add_argument("--features", type=int, default=30)
    parser.add_argument("--windows", type=int, default=4)
    args = parser.parse_args(argv)
    if args.fleet:
        folder = Path(tempfile.mkdtemp(prefix="driftline-bench-overview-"))
        try:
            for models in args.fleet:
                started = time.perf_counter()
                found = fleet_overview(folder, models, args.features, args.windows)
                print(f"# {models} models x {args.features} features, {args.windows} windows each "
                      f"(built and measured in {time.perf_counter() - started:.0f} s, load average "
                      f"{os.getloadavg()[0]:.1f})")
                print(f"overview first load (caches empty): {found.first_load_s:.2f} s, CPU {found.first_load_cpu_s:.2f}"
                      f" s; cached: {found.cached_load_s:.2f} s")
                for name, seconds in found.queries_s.items():
                    print(f"  {name}: {seconds * 1000:.0f} ms")
                print(f"  before: the newest results one version at a time: {found.per_version_read_s * 1000:.0f} ms "
                      f"({found.result_rows:,} rows)")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'bench.db'}"
        store_db.upgrade(url)
        started = time.perf_counter()
        rows = fill(url, args.days)
        print(f"store: {args.days} days of one-minute windows, {rows:,} detector results "
              f"(written in {time.perf_counter() - started:.0f} s)")
        now = int(time.time() * 1000)
        print(f"{'range':>6} {'buckets':>8} {'rows out':>9} {'bucketed ms':>12} {'refresh ms':>11} "
              f"{'all rows ms':>12} {'rows read':>10} {'cold speed-up':>14}")
        for label, seconds in (("1h", 3600), ("24h", 86400), ("7d", 7 * 86400), ("30d", 30 * 86400)):
            if seconds > args.days * 86400:
                continue
            start, end = presentation.bounded_range(now, seconds, defaults.DASHBOARD_CACHE_TTL_SECONDS)
            bucket = presentation.bucket_size_ms(start, end, MINUTE)

            def cold():
                st.cache_data.clear()
                return queries.detector_buckets(url, queries.BucketQuery("m", "1", start, end, bucket))

            bucketed_s, frame = timed(cold)
            # The next refresh, one cache period later: completed buckets come from the cache.
            refresh_s, _ = timed(lambda: queries.detector_buckets(url, queries.BucketQuery(
                "m", "1", start + defaults.DASHBOARD_CACHE_TTL_SECONDS * 1000,
                end + defaults.DASHBOARD_CACHE_TTL_SECONDS * 1000, bucket)), repeat=1)

            def read_all():
                with store_db.session_scope(url) as session:
                    result = session.execute(
                        select(DetectorResult.detector, DetectorResult.feature, DetectorResult.metric,
                               DetectorResult.window_start_ms, DetectorResult.value, DetectorResult.threshold,
                               DetectorResult.breached)
                        .where(DetectorResult.model == "m", DetectorResult.version == "1",
                               DetectorResult.window_start_ms >= start, DetectorResult.window_start_ms < end)).all()
                return pd.DataFrame(result)

            naive_s, everything = timed(read_all, repeat=1 if seconds > 86400 else 3)
            print(f"{label:>6} {frame['bucket_ms'].nunique():>8} {len(frame):>9,} {bucketed_s * 1000:>12.0f} "
                  f"{refresh_s * 1000:>11.1f} {naive_s * 1000:>12.0f} {len(everything):>10,} "
                  f"{naive_s / bucketed_s:>13.1f}x")
        store_db.dispose_engines()


if __name__ == "__main__":
    main()
