"""NannyML's univariate drift as a benchmark peer, run inside its own venv (bench/peer_envs/nannyml.sh).

A line-per-request worker for bench/detection_quality.py: JSON requests on stdin, one JSON line back each.

    {"fit": "reference.parquet", "columns": [...], "categorical": [...], "chunk_size": 500}
        -> {"fit_cpu_s": ...}   UnivariateDriftCalculator at its defaults (its default methods and thresholds)
           but chunked per window: `chunk_size` rows a chunk
    {"judge": "current.parquet"}
        -> {"flags": [[bool per column] per chunk], "methods": {...}, "cpu_s": ...}   a column's flag is NannyML's
           alert on any of its default methods for that column
    {"car_loan": true}
        -> {"dir": ...}   the folder inside the installed nannyml package that holds its car-loan CSVs

This file imports nothing from driftline.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

from client import serve  # this folder: the protocol's other side


def read(path: str):
    import pandas as pd
    return pd.read_parquet(path) if path.endswith(".parquet") else pd.read_csv(path)


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    warnings.simplefilter("ignore")
    os.environ.setdefault("NML_DISABLE_USAGE_LOGGING", "1")  # its usage analytics would call out of the machine
    import nannyml

    calculator, columns = None, []

    def handle(request: dict) -> dict | None:
        nonlocal calculator, columns
        if "car_loan" in request:
            from nannyml import datasets
            folder = Path(datasets.__file__).parent / "data"
            return {"dir": str(folder), "exists": (folder / "synthetic_car_loan_reference.csv").is_file()}
        if "fit" in request:
            columns = list(request["columns"])
            started = time.process_time()
            calculator = nannyml.UnivariateDriftCalculator(column_names=columns,
                                                           treat_as_categorical=list(request["categorical"]),
                                                           chunk_size=int(request["chunk_size"]))
            calculator.fit(read(request["fit"]))
            return {"fit_cpu_s": time.process_time() - started}
        if "judge" in request and calculator is not None:
            current = read(request["judge"])
            started = time.process_time()
            frame = calculator.calculate(current).filter(period="analysis").to_df()
            cpu = time.process_time() - started
            methods = {c: sorted({m for (col, m, what) in frame.columns if col == c and what == "alert"})
                       for c in columns}
            flags = [[bool(any(frame[(c, m, "alert")].iloc[i] for m in methods[c])) for c in columns]
                     for i in range(len(frame))]
            return {"flags": flags, "methods": methods, "cpu_s": cpu}
        return None

    return serve(handle)

if __name__ == "__main__":
    sys.exit(main())
