"""Alibi Detect's MMDDrift as a benchmark peer, run inside its own venv (bench/peer_envs/alibi.sh).

A line-per-request worker for bench/embeddings.py: it reads JSON requests on stdin and answers one JSON line each,
so the benchmark stays one run while Alibi Detect (not a driftline dependency) lives in another interpreter.

    {"fit": "ref.npy"}      -> {"fit_cpu_s": ...}   MMDDrift(reference) at its defaults: p_val 0.05, 100
                                                  permutations, Gaussian RBF kernel, bandwidth from the reference
    {"judge": "window.npy"} -> {"drift": bool, "p_val": ..., "cpu_s": ...}   CPU of `predict` alone

Arrays are .npy files the benchmark wrote from the windows it draws for every method. This file imports nothing
from driftline.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np

from client import serve  # this folder: the protocol's other side


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="pytorch", help="pytorch, keops or tensorflow (what installed)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the benchmark machine is shared)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import torch
    from alibi_detect.cd import MMDDrift

    torch.set_num_threads(args.threads)
    detector = None

    def handle(request: dict) -> dict | None:
        nonlocal detector
        if "fit" in request:
            started = time.process_time()
            detector = MMDDrift(np.load(request["fit"]).astype(np.float32), backend=args.backend, device="cpu")
            return {"fit_cpu_s": time.process_time() - started}
        if "judge" in request and detector is not None:
            window = np.load(request["judge"]).astype(np.float32)
            started = time.process_time()
            data = detector.predict(window)["data"]
            return {"drift": bool(data["is_drift"]), "p_val": float(data["p_val"]), "cpu_s": time.process_time() - started}
        return None

    return serve(handle)

if __name__ == "__main__":
    sys.exit(main())
