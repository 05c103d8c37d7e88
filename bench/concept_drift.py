"""Benchmark: realized model quality on River's SEA concept-drift stream, judged by the real scheduler.

Run by hand:  .venv/bin/python bench/concept_drift.py [--seeds 3] [--before 30] [--after 10]
(needs River, not a driftline dependency: `pip install river`)

A DecisionTreeClassifier (depth 8, leaves of 20 rows) is fitted on 20 000 rows of SEA (variant 0, 10 %
label noise); its baseline is registered from those rows (in-sample scores, as `driftline baseline --file
train.csv --label y` does) or, with a holdout of 20 000 more rows, as `--quality-file` does (holdout
reference and its chunk spreads). Then `--before` hourly windows of 1 000 labelled rows from the same
concept and `--after` from SEA variant 3 (the decision boundary moves: a concept drift), written as the
collector writes them and judged by the scheduler's evaluation job with the default alert rules, under the
sequential policy and under the one-window rule (`policy = "for_windows"`, K = 1: the rule model quality
had before it paged on evidence, with today's thresholds). Per reference and policy: windows whose log loss
breached before the change, the window of the first false page before it, and the windows from the change to
the first page after it (a page: any metric's breach under the one-window rule, any metric's evidence
paging under the sequential policy). Prints a table;
asserts nothing.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import select

from driftline.baseline import LabelSummary, compute_baseline
from driftline.config import load_settings
from driftline.detectors.thresholds.spreads import measure_quality_spreads
from driftline.scheduler.jobs import SchedulerJobs
from driftline.store import db as store_db
from driftline.store.aliases import move_alias
from driftline.store.db import session_scope
from driftline.store.models import BaselineRecord, DetectorResult, ModelVersion, WindowStateRecord
from driftline.vocabulary import LOG_LOSS, MODEL_QUALITY
from driftline.window_state import EventBatch, WindowState

WINDOW_MS = 3_600_000
T0 = 1_796_040_000_000  # a window boundary
ROWS = 1_000


def sea(variant: int, n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    from river.datasets import synth  # here: River is this bench's alone, not the service's

    rows = list(synth.SEA(variant=variant, noise=0.1, seed=seed).take(n))
    return pd.DataFrame([x for x, _ in rows]).rename(columns=str), np.asarray([int(y) for _, y in rows])


def run(seed: int, before: int, after: int, holdout: bool, policy: str) -> tuple[int, int | None, int | None]:
    """(windows breaching on log loss before the change, the first false page's window, windows to the first page
    after the change)."""
    from sklearn.tree import DecisionTreeClassifier

    x, y = sea(0, 20_000, seed)
    model = DecisionTreeClassifier(max_depth=8, min_samples_leaf=20, random_state=0).fit(x, y)
    baseline = compute_baseline(x, predictions=model.predict_proba(x)[:, 1], labels=y)
    baseline.quality_reference = "training rows"
    if holdout:
        hx, hy = sea(0, 20_000, seed + 1000)
        scores = model.predict_proba(hx)[:, 1]
        baseline.quality, baseline.quality_reference = LabelSummary().add(scores, hy), "holdout"
        baseline.quality_spreads = measure_quality_spreads(scores, hy)
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/bench.db"
        store_db.upgrade(url)
        with session_scope(url) as s:
            s.add(ModelVersion(model="m", version="1"))
            s.add(BaselineRecord(model="m", version="1", rows=baseline.rows, summary=baseline.to_dict()))
            s.flush()
            move_alias(s, "m", "1", "promote", "bench")
        live = [sea(0, before * ROWS, seed + 2000), sea(3, after * ROWS, seed + 3000)]
        frame, labels = pd.concat([live[0][0], live[1][0]], ignore_index=True), np.concatenate([live[0][1], live[1][1]])
        for w in range(before + after):
            part = slice(w * ROWS, (w + 1) * ROWS)
            scores = model.predict_proba(frame.iloc[part])[:, 1]
            start = T0 + w * WINDOW_MS
            events = [{"event_id": f"m-{w}-{i}", "ts_ms": start + i * (WINDOW_MS // ROWS), "model": "m",
                       "version": "1", "features": row, "prediction": float(p), "latency_ms": {"total": 10.0},
                       "status": "ok"} for i, (row, p) in enumerate(zip(frame.iloc[part].to_dict(orient="records"),
                                                                          scores))]
            state = WindowState.empty(baseline).add_batch(EventBatch.from_events(events))
            state.add_labels([float(p) for p in scores], labels[part].tolist())
            with session_scope(url) as s:
                s.add(WindowStateRecord(model="m", version="1", window_start_ms=start,
                                        window_end_ms=start + WINDOW_MS, partition=0, events=ROWS,
                                        state=state.to_bytes()))
        config = Path(folder) / "alerts.toml"
        config.write_text(f'[alerts.detectors.model_quality]\npolicy = "{policy}"\n')
        jobs = SchedulerJobs(load_settings(config_file=str(config), db=url, window_seconds=WINDOW_MS // 1000,
                                           allowed_lateness_seconds=2))
        jobs.evaluate_due_windows(now_ms=T0 + (before + after) * WINDOW_MS + 5_000)
        with session_scope(url) as s:
            results = s.scalars(select(DetectorResult).where(DetectorResult.detector == MODEL_QUALITY,
                                                             DetectorResult.segment == "")).all()
            rows = [((r.window_start_ms - T0) // WINDOW_MS, r.metric, bool(r.breached),
                     bool(((r.details or {}).get("evidence") or {}).get("paging"))) for r in results]
        store_db.get_engine(url).dispose()
    early = sum(1 for w, metric, breached, _ in rows if metric == LOG_LOSS and breached and w < before)
    # the alert rule's page: K = 1 breaching window (for_windows), or a stream's evidence paging (sequential)
    fired = sorted({w for w, _, breached, paging in rows if (paging if policy == "sequential" else breached)})
    after_change = [w - before for w in fired if w >= before]
    false_pages = [w for w in fired if w < before]
    return early, false_pages[0] if false_pages else None, after_change[0] if after_change else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--before", type=int, default=30)
    parser.add_argument("--after", type=int, default=10)
    args = parser.parse_args()
    print("| reference | policy | seed | log-loss breaches before | first false page | windows to page after |")
    print("|---|---|---|---|---|---|")
    for holdout in (False, True):
        for policy in ("for_windows", "sequential"):
            for seed in range(args.seeds):
                early, first, delay = run(seed, args.before, args.after, holdout, policy)
                print(f"| {'holdout' if holdout else 'training rows'} | {policy} | {seed} | {early} / {args.before} "
                      f"| {'-' if first is None else first} | {'-' if delay is None else delay} |")


if __name__ == "__main__":
    main()
