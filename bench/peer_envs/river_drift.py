"""River's synth streams and concept-drift detectors as a benchmark peer, run inside its own venv (river.sh).

A line-per-request worker for bench/concept_drift.py: JSON requests on stdin, one JSON line back each.

    {"stream": "sea" | "share" | "gradual", "rows": N, "change": C, "seed": S, "noise": 0.1, "share": 0.3,
     "width": W, "out": "prefix"}
        -> {"x": "prefix.x.npy", "y": "prefix.y.npy"}   N rows of River's SEA generator (three features, the
           label with `noise` flipped): "sea", variant 0 then variant 3 from row C (an abrupt concept drift);
           "share", variant 0, and from row C a `share` of the rows (chosen at random) from variant 3;
           "gradual", `ConceptDriftStream` from variant 0 to variant 3 centred on row C + W / 2, width W
    {"detect": "errors.npy"}
        -> {"ADWIN": [row, ...], "DDM": [...], "PageHinkley": [...], "cpu_s": {...}}   the rows (0-based) where
           each detector, at its defaults, signals a drift on the 0/1 error stream fed row by row

This file imports nothing from driftline.
"""
from __future__ import annotations

import argparse
import sys
import time

from client import serve  # this folder: the protocol's other side


def _sea(variant: int, rows: int, noise: float, seed: int):
    from river.datasets import synth

    return list(synth.SEA(variant=variant, noise=noise, seed=seed).take(rows))


def stream(request: dict):
    import numpy as np
    from river.datasets import synth

    rows, change, seed, noise = int(request["rows"]), int(request["change"]), int(request["seed"]), \
        float(request.get("noise", 0.1))
    if request["stream"] == "sea":
        drawn = _sea(0, change, noise, seed) + _sea(3, rows - change, noise, seed + 1)
    elif request["stream"] == "share":
        old, new = _sea(0, rows, noise, seed), _sea(3, rows, noise, seed + 1)
        pick = np.random.default_rng(seed).random(rows) < float(request["share"])
        drawn = [new[i] if i >= change and pick[i] else old[i] for i in range(rows)]
    elif request["stream"] == "gradual":
        width = int(request["width"])
        drawn = list(synth.ConceptDriftStream(stream=synth.SEA(variant=0, noise=noise, seed=seed),
                                              drift_stream=synth.SEA(variant=3, noise=noise, seed=seed + 1),
                                              position=change + width // 2, width=width, seed=seed).take(rows))
    else:
        return None
    x = np.asarray([[row[k] for k in sorted(row)] for row, _ in drawn], dtype=np.float64)
    y = np.asarray([int(label) for _, label in drawn], dtype=np.int64)
    np.save(f"{request['out']}.x.npy", x)
    np.save(f"{request['out']}.y.npy", y)
    return {"x": f"{request['out']}.x.npy", "y": f"{request['out']}.y.npy"}


def detect(path: str) -> dict:
    import numpy as np
    from river import drift
    from river.drift import binary

    errors = np.load(path)
    out: dict = {"cpu_s": {}}
    for name, detector in (("ADWIN", drift.ADWIN()), ("DDM", binary.DDM()), ("PageHinkley", drift.PageHinkley())):
        started = time.process_time()
        found = []
        for i, error in enumerate(errors.tolist()):
            detector.update(error)
            if detector.drift_detected:
                found.append(i)
        out[name] = found
        out["cpu_s"][name] = time.process_time() - started
    return out


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()

    def handle(request: dict) -> dict | None:
        if "stream" in request:
            return stream(request)
        if "detect" in request:
            return detect(request["detect"])
        return None

    return serve(handle)


if __name__ == "__main__":
    sys.exit(main())
