"""NannyML's performance estimation (CBPE, DLE) as a benchmark peer, run inside its own venv (bench/peer_envs/nannyml.sh).

A line-per-request worker for bench/estimation_real.py: JSON requests on stdin, one JSON line back each.

    {"data": true}
        -> {"dir": ...}   the folder inside the installed nannyml package that holds its data sets
    {"estimate": "cbpe" | "dle", "reference": "ref.parquet", "analysis": "analysis.parquet", "chunk_size": 2000,
     "y_true": ..., "y_pred": ..., "y_pred_proba": str (binary) or {class: column} (multiclass) or null,
     "features": [...] (DLE), "metrics": [...], "problem_type": ...}
        -> {"chunks": [{metric: {"value", "lower", "upper", "realized"}} per analysis chunk], "fit_cpu_s", "cpu_s"}
           CBPE / DLE at their defaults (isotonic calibration where NannyML finds it needed; LightGBM without
           tuning), chunked by `chunk_size` rows; the analysis file holds the targets, so NannyML also reports
           its realized value per chunk. Band: its confidence boundaries (value ± 3 sampling errors, clipped).

This file imports nothing from driftline.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import warnings
from pathlib import Path

from client import serve  # this folder: the protocol's other side


def _number(value) -> float | None:
    import math

    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _objects(frame):
    """Text columns as Python objects: NannyML's DLE encoder cannot reshape the Arrow-backed strings that pandas 3
    (driftline's) writes to Parquet."""
    import pandas as pd

    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column].dtype) and not pd.api.types.is_bool_dtype(frame[column]):
            frame[column] = frame[column].astype(object)
    return frame


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    warnings.simplefilter("ignore")
    os.environ.setdefault("NML_DISABLE_USAGE_LOGGING", "1")  # its usage analytics would call out of the machine
    import nannyml
    import pandas as pd

    # NannyML 0.13.1 predates pandas 3: its DLE writes encoded text back into a frame and reshapes the column's
    # values, which pandas 3 would infer as an Arrow-backed str array (no reshape)
    pd.set_option("future.infer_string", False)

    def handle(request: dict) -> dict | None:
        if "data" in request:
            from nannyml import datasets
            return {"dir": str(Path(datasets.__file__).parent / "data")}
        if request.get("estimate") not in ("cbpe", "dle"):
            return None
        reference, analysis = (_objects(pd.read_parquet(request[key])) for key in ("reference", "analysis"))
        started = time.process_time()
        if request["estimate"] == "cbpe":
            estimator = nannyml.CBPE(y_pred_proba=request["y_pred_proba"], y_pred=request["y_pred"],
                                     y_true=request["y_true"], problem_type=request["problem_type"],
                                     metrics=request["metrics"], chunk_size=int(request["chunk_size"]))
        else:
            estimator = nannyml.DLE(feature_column_names=request["features"], y_pred=request["y_pred"],
                                    y_true=request["y_true"], metrics=request["metrics"],
                                    chunk_size=int(request["chunk_size"]))
        with contextlib.redirect_stdout(sys.stderr):  # LightGBM's log lines would break the one-line answers
            estimator.fit(reference)
            fitted = time.process_time()
            frame = estimator.estimate(analysis).filter(period="analysis").to_df()
        done = time.process_time()
        chunks = []
        for i in range(len(frame)):
            row = frame.iloc[i]
            chunks.append({m: {"value": _number(row[(m, "value")]),
                               "lower": _number(row[(m, "lower_confidence_boundary")]),
                               "upper": _number(row[(m, "upper_confidence_boundary")]),
                               "realized": _number(row[(m, "realized")])} for m in request["metrics"]})
        return {"chunks": chunks, "fit_cpu_s": fitted - started, "cpu_s": done - started}

    return serve(handle)


if __name__ == "__main__":
    sys.exit(main())
