"""Cost of [segments] in the streaming path: folding (the collector's CPU work per event), the stored window
state, and the detection per window, with 0, 1 and 3 segment columns on the same events.

Run by hand: `.venv/bin/python bench/segments_streaming.py [--events 60000] [--window 2000]`. Prints figures,
asserts nothing. Events are the credit-default features (worker/dataset.py, the segment_shift population);
segment columns: region (5 values), then employment_type (5) and home_ownership (3), all features with
segment references in the baseline. Folding is `WindowState.add_batch` on `EventBatch`es of 5 000 events
(COLLECTOR_POLL_MAX_RECORDS) cut into windows of `--window` events, timed in CPU seconds (best of `--repeat`:
the development machine is shared); size is the zlib blob of one window.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from driftline.baseline import compute_baseline
from driftline.detectors.families.segments import evaluate_segments
from driftline.detectors.families.window import evaluate_window
from driftline.segments import SegmentSpec
from driftline.window_state import EventBatch, WindowState
from driftline.worker.dataset import generate_inputs
from driftline.worker.feature_transform import FeatureTransform, transform_row
from driftline.worker.scenarios import SCENARIOS

COLUMNS = {0: (), 1: ("region",), 3: ("region", "employment_type", "home_ownership")}


def features(raw: pd.DataFrame) -> pd.DataFrame:
    names = [entry["name"] for entry in FeatureTransform.feature_schema()]
    frame = pd.DataFrame([transform_row(r) for r in raw.to_dict(orient="records")])[names]
    for name in FeatureTransform.numeric_features:
        frame[name] = frame[name].astype(np.float64)
    return frame


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=60_000)
    parser.add_argument("--window", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    train = features(generate_inputs(20_000, seed=1))
    baseline = compute_baseline(train, categorical=FeatureTransform.categorical_features,
                                predictions=rng.random(len(train)))
    current = features(generate_inputs(args.events, seed=2, population=SCENARIOS["segment_shift"].population))
    records = current.astype(object).where(current.notna(), None).to_dict(orient="records")
    events = [{"event_id": f"e{i}", "ts_ms": i, "features": row, "prediction": float(rng.random()),
               "latency_ms": {"total": float(rng.uniform(2, 30))}, "status": "ok"} for i, row in enumerate(records)]
    batches = [EventBatch.from_events(events[i:i + 5_000]) for i in range(0, len(events), 5_000)]
    print(f"{args.events} events, windows of {args.window}, baseline {len(baseline.segments)} segment columns")
    base = {}
    for count, columns in COLUMNS.items():
        spec = SegmentSpec(columns=columns)
        fold_s = float("inf")
        for _ in range(args.repeat):
            start = time.process_time()
            states = []
            for batch in batches:
                for low in range(0, batch.n, args.window):
                    states.append(WindowState.empty(baseline, segments=spec).add_batch(
                        batch.take(np.arange(low, min(low + args.window, batch.n)))))
            fold_s = min(fold_s, time.process_time() - start)
        size = np.mean([len(s.to_bytes()) for s in states[:5]])
        start = time.perf_counter()
        for state in states[:5]:
            evaluate_window(baseline, state, window_seconds=60)
        whole_ms = (time.perf_counter() - start) / 5 * 1000
        start = time.perf_counter()
        for state in states[:5]:
            evaluate_segments(baseline, state, spec, window_seconds=60)
        segments_ms = (time.perf_counter() - start) / 5 * 1000
        rate = args.events / fold_s
        base.setdefault("rate", rate)
        base.setdefault("size", size)
        print(f"{count} segment columns: fold {rate:,.0f} events/s ({rate / base['rate']:.2f}x), "
              f"state {size / 1024:,.1f} KB ({size / base['size']:.2f}x), detection per window: whole "
              f"{whole_ms:,.0f} ms + segments {segments_ms:,.0f} ms")


if __name__ == "__main__":
    main()
