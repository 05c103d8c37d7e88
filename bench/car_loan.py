"""The car-loan case of bench/detection_quality.py: NannyML's synthetic car-loan data in 500-row chunks.

NannyML ships the data inside its wheel (nannyml/datasets/data/synthetic_car_loan_{reference,analysis}.csv,
50 000 rows each); the benchmark reads it from the NannyML venv's package data (bench/peer_envs/nannyml.sh) or
from `--car-loan-dir`. NannyML's documentation and examples put the drift at the analysis period's row 25 000
(its tutorials' 5 000-row chunks alert from `[25000:29999]` on): the first 50 of the 100 chunks of 500 rows come
before it, so any flag there is false.

Judged per chunk, each at its defaults, on the seven model inputs and the score `y_pred_proba`:
driftline (`detect`, chunk size 500, `y_pred_proba` as the prediction, judged on its own, uncorrected; and its
sequential evidence over the chunks), Evidently (a `Report` with `DataDriftPreset` per chunk) and NannyML
(`UnivariateDriftCalculator`, chunk size 500).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from driftline.detectors.batch.engine import ColumnRoles, Judging, Windowing, detect
from replay_policy import flags_and_paging  # bench/ is on the path: run from bench/detection_quality.py

NUMERICAL = ("car_value", "debt_to_income_ratio", "loan_length", "driver_tenure")
CATEGORICAL = ("salary_range", "repaid_loan_on_prev_car", "size_of_downpayment")
PREDICTION = "y_pred_proba"
COLUMNS = NUMERICAL + CATEGORICAL + (PREDICTION,)
CHUNK = 500
DRIFT_START_ROW = 25_000  # of the analysis period, from NannyML's documentation


def load(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    frames = []
    for period in ("reference", "analysis"):
        path = folder / f"synthetic_car_loan_{period}.csv"
        if not path.is_file():
            raise SystemExit(f"{path} not found: give --nannyml (its package data) or --car-loan-dir")
        frame = pd.read_csv(path)[list(COLUMNS)]
        frame["repaid_loan_on_prev_car"] = frame["repaid_loan_on_prev_car"].astype(str)  # one dtype for all three
        frames.append(frame)
    return frames[0], frames[1]


def driftline_chunks(reference: pd.DataFrame, analysis: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(per-chunk verdicts, sequential paging), arrays (chunks, COLUMNS)."""
    report = detect(reference, analysis, columns=ColumnRoles(categorical=list(CATEGORICAL), prediction=PREDICTION),
                    windowing=Windowing(chunk_size=CHUNK), judging=Judging(multivariate=False), workers=1)
    return flags_and_paging(report, COLUMNS, PREDICTION)


def describe(name: str, flags: np.ndarray, start: int) -> list[str]:
    """One table row: where the flags fall relative to the drift's first chunk `start`."""
    before, after = flags[:start], flags[start:]
    false = [f"{COLUMNS[c]}@{w + 1}" for w, c in zip(*np.nonzero(before))]
    hit = np.flatnonzero(after.any(axis=1))
    first = {COLUMNS[c]: int(np.flatnonzero(after[:, c])[0]) + 1 for c in range(len(COLUMNS)) if after[:, c].any()}
    return [name, str(int(before.sum())), f"{int(before.any(axis=1).sum())} / {start}",
            ", ".join(false[:6]) + (" ..." if len(false) > 6 else "") or "-",
            f"{hit.size} / {len(after)}", str(int(hit[0]) + 1) if hit.size else "never",
            ", ".join(f"{c} ({w})" for c, w in sorted(first.items(), key=lambda kv: kv[1])) or "-"]


def car_loan_case(folder: Path, nannyml: Any, evidently_flags: Callable[..., np.ndarray] | None) -> None:
    reference, analysis = load(folder)
    start = DRIFT_START_ROW // CHUNK
    chunks = len(analysis) // CHUNK
    rows, cpu = [], {}
    began = time.process_time()
    flags, paging = driftline_chunks(reference, analysis)
    cpu["driftline"] = time.process_time() - began
    rows.append(describe("driftline (per-chunk verdict)", flags, start))
    rows.append(describe("driftline (sequential paging)", paging, start))
    if evidently_flags is not None:
        began = time.process_time()
        ev = evidently_flags(reference, analysis, CHUNK, chunks, numerical=NUMERICAL + (PREDICTION,),
                             categorical=CATEGORICAL)
        cpu["evidently"] = time.process_time() - began
        order = list(NUMERICAL + (PREDICTION,) + CATEGORICAL)  # Evidently's columns back in COLUMNS' order
        rows.append(describe("evidently (Report per chunk)", ev[:, [order.index(c) for c in COLUMNS]], start))
    if nannyml is not None:
        nannyml.fit(reference, list(COLUMNS), list(CATEGORICAL), CHUNK)
        rows.append(describe("nannyml (univariate drift)", nannyml.flags(analysis), start))
        cpu["nannyml (its worker)"] = nannyml.last_cpu_s
    print(f"car-loan case: NannyML's synthetic car-loan data, reference {len(reference):,} rows, analysis "
          f"{len(analysis):,} rows in {chunks} chunks of {CHUNK}; the drift starts at analysis row {DRIFT_START_ROW:,} "
          f"(chunk {start + 1}); columns: {', '.join(COLUMNS)}")
    print("| method | false flags before the drift (column-chunks) | chunks with a false flag | false flags (column@chunk) "
          "| chunks flagged after the start | first flagged chunk after the start (1 = its first) "
          "| columns flagged after the start (first chunk) |")
    print("|---|---|---|---|---|---|---|")
    for cells in rows:
        print("| " + " | ".join(cells) + " |")
    print("(CPU s for the 100 chunks: " + ", ".join(f"{k} {v:.1f}" for k, v in cpu.items()) + ")", flush=True)
