"""How the dashboard's queries scale with months of windows: `python bench/dashboard.py [--days 30]`.

Writes a SQLite store with one model version evaluated every minute for `--days` days
(14 per-feature drift results and 6 latency results per window, as the detectors
write them), then times the model page's main query (`queries.detector_buckets`, all
detector results of the range folded into at most DASHBOARD_MAX_TIME_BUCKETS buckets
in SQL) for each time range, cold and at the next refresh (completed buckets cached),
beside the naive peer measured in the same run: reading every result row of the range
into pandas. Prints figures; asserts nothing.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import insert, select

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


def main(argv: list[str] | None = None) -> None:
    import streamlit as st

    from driftline.dashboard import presentation, queries
    from driftline import defaults

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30)
    args = parser.parse_args(argv)
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
