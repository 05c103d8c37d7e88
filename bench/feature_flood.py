"""CPU per event under a flood of unique feature names, against ordinary traffic.

Events go through `InferenceFolder.process` (decode, validate, window, fold: the collector's
per-partition work) in polls of `--batch`, with a baseline of the 20 ordinary features. Runs:
ordinary events (the same 20 feature names each), then the same events each carrying
`--unique` extra names no other event has (a producer logging a request-derived dict as its
features), then single events of `--wide` keys (dead-lettered beyond `EVENT_MAX_FEATURES`).
Printed: CPU microseconds per event, the feature windows and new-feature results of the state.

    .venv/bin/python bench/feature_flood.py [--events 20000] [--batch 1000] [--unique 50] [--wide 40000]

Prints figures; asserts nothing (timings are not tests).
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import orjson
import pandas as pd

from driftline.baseline import compute_baseline
from driftline.collector.folding import FolderSetup, InferenceFolder
from driftline.detectors.families.data_quality import data_quality
from driftline.detectors.thresholds.levels import WindowThresholds
from driftline.vocabulary import NEW_FEATURE_SHARE
from driftline.window_state import WindowState

NAMES = [f"f{i:02d}" for i in range(20)]
T0 = 1_790_000_000_000


def _events(n: int, unique: int) -> list[bytes]:
    rng = np.random.default_rng(0)
    values = rng.normal(size=(n, len(NAMES)))
    return [orjson.dumps({"schema": "driftline.inference/v1", "event_id": f"e{i}", "ts": T0 + i, "model": "m",
                          "version": "1", "features": {**dict(zip(NAMES, row.tolist())),
                                                       **{f"req_{i}_{j}": j for j in range(unique)}},
                          "prediction": 0.5, "latency_ms": {"total": 2.0}})
            for i, row in enumerate(values)]


def run(values: list[bytes], batch: int, baseline) -> tuple[float, int, int, int]:
    folder = InferenceFolder("driftline.inference", 0, FolderSetup(3_600_000, 0, 1_000_000, clock=lambda: T0 / 1000),
                             lambda m, v: baseline, lambda m, v: None)
    start = time.process_time()
    for at in range(0, len(values), batch):
        folder.process(list(range(at, at + len(values[at:at + batch]))), values[at:at + batch])
    delta = folder.take()
    cpu = time.process_time() - start
    state = WindowState.merge_all([p.state for p in delta.windows.values()], baseline)
    new = sum(r.metric == NEW_FEATURE_SHARE for r in data_quality(baseline, state, WindowThresholds()))
    return cpu / len(values) * 1e6, len(state.features), new, len(delta.dead_letters)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--unique", type=int, default=50)
    parser.add_argument("--wide", type=int, default=40_000)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    baseline = compute_baseline(pd.DataFrame({name: rng.normal(size=5_000) for name in NAMES}))
    print(f"{'traffic':<44} {'us CPU/event':>12} {'feature windows':>16} {'new-feature results':>20} "
          f"{'dead letters':>13}")
    for label, values, batch in (
            ("ordinary (20 names)", _events(args.events, 0), args.batch),
            (f"+{args.unique} unique names per event", _events(args.events, args.unique), args.batch),
            (f"one event of {args.wide} keys, x20", _events(1, args.wide) * 20, 1)):
        us, windows, new, dead = run(values, batch, baseline)
        print(f"{label:<44} {us:>12.1f} {windows:>16} {new:>20} {dead:>13}")


if __name__ == "__main__":
    main()
