"""Benchmark: realized model quality on River's concept-drift streams, judged by the real scheduler, beside River's
drift detectors on the same 0/1 error stream.

Run by hand:  .venv/bin/python bench/concept_drift.py --river bench/.venvs/river/bin/python [--seeds 3]
(River runs in its own venv, `bash bench/peer_envs/river.sh`; it is not a driftline dependency: its worker
bench/peer_envs/river_drift.py draws the streams and runs its detectors)

A DecisionTreeClassifier (depth 8, leaves of 20 rows) is fitted on 20 000 rows of SEA (variant 0, 10 %
label noise); its baseline is registered from those rows (in-sample scores, as `driftline baseline --file
train.csv --label y` does) or, with a holdout of 20 000 more rows, as `--quality-file` does (holdout
reference and its chunk spreads). Then `--before` hourly windows of 1 000 labelled rows from the same
concept and `--after` from a changed one, written as the collector writes them and judged by the scheduler's
evaluation job with the default alert rules. Streams (River's SEA generator, 10 % label noise): ``sea``,
variant 3 from the change on (the decision boundary moves: an abrupt concept drift); ``share``, 30 % of the
rows from the change on follow variant 3, the rest variant 0; ``gradual``, River's `ConceptDriftStream` from
variant 0 to 3 over 5 windows. (A page: any metric's breach under the one-window rule, `policy =
"for_windows"`, K = 1; any metric's evidence paging under the sequential policy, the default.)

First table (``sea`` only): per reference and policy, windows whose log loss breached before the change, the
window of the first false page before it, and the windows from the change to the first page after it (0: the
change's own window). Second table, per stream and seed: driftline's default (sequential, holdout reference)
beside River's ADWIN, DDM and Page-Hinkley at their defaults fed the same rows' errors (prediction at 0.5 !=
label) one by one in order: false alarms before the change and the delay, in windows from the change's window
to the one holding the first signal after it. Prints tables; asserts nothing.
"""
from __future__ import annotations

import argparse
import sys
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_envs.client import PeerProcess  # noqa: E402

WINDOW_MS = 3_600_000
T0 = 1_796_040_000_000  # a window boundary
ROWS = 1_000


STREAMS = ("sea", "share", "gradual")
SHARE = 0.3  # of the rows from the change on, in the ``share`` stream
GRADUAL_WINDOWS = 5  # the ``gradual`` stream's transition width, in windows


class River:
    """River's streams and drift detectors in its own venv (bench/peer_envs/river_drift.py)."""

    def __init__(self, python: str) -> None:
        self.worker = PeerProcess(python, "river_drift.py")
        self.folder = tempfile.mkdtemp(prefix="driftline-bench-river-")
        self.drawn = 0

    def draw(self, kind: str, rows: int, change: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
        self.drawn += 1
        answer = self.worker.ask(stream=kind, rows=rows, change=change, seed=seed, noise=0.1, share=SHARE,
                                 width=GRADUAL_WINDOWS * ROWS, out=f"{self.folder}/{self.drawn}")
        x = np.load(answer["x"])
        return pd.DataFrame(x, columns=[str(i) for i in range(x.shape[1])]), np.load(answer["y"])

    def detect(self, errors: np.ndarray) -> dict[str, list[int]]:
        np.save(f"{self.folder}/errors.npy", errors.astype(np.float64))
        answer = self.worker.ask(detect=f"{self.folder}/errors.npy")
        return {name: answer[name] for name in DETECTORS}


DETECTORS = ("ADWIN", "DDM", "PageHinkley")


def run(river: River, kind: str, seed: int, before: int, after: int, holdout: bool,
        policy: str, max_drop: float | None = None) -> tuple[int, int | None, int | None, np.ndarray]:
    """(windows breaching on log loss before the change, the first false page's window, windows to the first page
    after the change, the live rows' 0/1 errors)."""
    from sklearn.tree import DecisionTreeClassifier

    x, y = river.draw("sea", 20_000, 20_000, seed)
    model = DecisionTreeClassifier(max_depth=8, min_samples_leaf=20, random_state=0).fit(x, y)
    baseline = compute_baseline(x, predictions=model.predict_proba(x)[:, 1], labels=y)
    baseline.quality_reference = "training rows"
    if holdout:
        hx, hy = river.draw("sea", 20_000, 20_000, seed + 1000)
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
        frame, labels = river.draw(kind, (before + after) * ROWS, before * ROWS, seed + 2000)
        errors = ((model.predict_proba(frame)[:, 1] >= 0.5).astype(int) != labels).astype(int)
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
        floor = "" if max_drop is None else f"[model_quality]\nquality_max_drop = {max_drop}\n"
        config.write_text(f'{floor}[alerts.detectors.model_quality]\npolicy = "{policy}"\n')
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
    return early, false_pages[0] if false_pages else None, after_change[0] if after_change else None, errors


def signals(found: list[int], change: int) -> tuple[int, int | None]:
    """(signals before the change row, windows from the change's window to the first signal at or after it)."""
    after = [row for row in found if row >= change]
    return sum(1 for row in found if row < change), None if not after else (after[0] - change) // ROWS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--river", metavar="PYTHON", default="bench/.venvs/river/bin/python",
                        help="interpreter of a venv with River (bash bench/peer_envs/river.sh)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--before", type=int, default=30)
    parser.add_argument("--after", type=int, default=10)
    parser.add_argument("--streams", default=",".join(STREAMS), help="streams of the second table")
    parser.add_argument("--no-policies", action="store_true", help="only the second table")
    parser.add_argument("--quality-max-drop", type=float, default=None,
                        help="[model_quality] quality_max_drop for the second table (default: driftline's, 0.05)")
    args = parser.parse_args()
    river = River(args.river)
    if not args.no_policies:
        print("| reference | policy | seed | log-loss breaches before | first false page | windows to page after |")
        print("|---|---|---|---|---|---|")
        for holdout in (False, True):
            for policy in ("for_windows", "sequential"):
                for seed in range(args.seeds):
                    early, first, delay, _ = run(river, "sea", seed, args.before, args.after, holdout, policy)
                    print(f"| {'holdout' if holdout else 'training rows'} | {policy} | {seed} | {early} / "
                          f"{args.before} | {'-' if first is None else first} | {'-' if delay is None else delay} |",
                          flush=True)
    print(f"\n{args.before} windows of {ROWS:,} rows before the change, {args.after} after; false alarms before the "
          f"change / windows from the change to the first signal after it ('-': none)")
    print("| stream | seed | model's error rate before / after | driftline (sequential, holdout) | "
          + " | ".join(DETECTORS) + " |")
    print("|---|---|---|---|" + "---|" * len(DETECTORS))
    change = args.before * ROWS
    for kind in args.streams.split(","):
        for seed in range(args.seeds):
            _, first, delay, errors = run(river, kind, seed, args.before, args.after, True, "sequential",
                                          args.quality_max_drop)
            cells = [f"{0 if first is None else 1}{'' if first is None else f' (window {first})'} / "
                     f"{'-' if delay is None else delay}"]
            for name, found in river.detect(errors).items():
                false, late = signals(found, change)
                cells.append(f"{false} / {'-' if late is None else late}")
            rates = f"{errors[:change].mean():.1%} / {errors[change:].mean():.1%}"
            print(f"| {kind} | {seed} | {rates} | " + " | ".join(cells) + " |", flush=True)
    river.worker.close()


if __name__ == "__main__":
    main()
