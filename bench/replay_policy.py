"""driftline's per-window verdicts and its sequential paging, replayed over one `detect` report's windows.

Shared by bench/detection_quality.py and bench/car_loan.py: the service's evidence (`advance_window`) at the default
rate of one false page per model per month, hourly windows, fed each feature's (and optionally the prediction's) result.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from driftline.detectors.families.evidence import (EVIDENCE_KEY, PagingPolicy, StreamState, advance_window,
                                                    window_score)
from driftline.detectors.families.results import WindowResult
from driftline.vocabulary import DATA_DRIFT, PSI

# the service's default: one false page per model per month, hourly windows
POLICY = PagingPolicy(false_pages_per_model_per_month=1.0, window_seconds=3600)


def flags_and_paging(report: dict[str, Any], names: Sequence[str], prediction: str | None = None,
                     trace: list[list[dict[str, Any]]] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(per-window verdicts, sequential paging) as arrays (windows, names); `prediction` names the
    report's prediction among `names`; `trace`, when given, receives each window's evidence per name
    and the window's own effect over its floor (``margin``)."""
    states: dict[str, StreamState] = {}
    flags, paging = [], []
    for i, window in enumerate(report["windows"]):
        by_name = {f["name"]: f for f in window["features"]}
        if prediction is not None:
            by_name[prediction] = window["prediction"]
        results = [WindowResult(DATA_DRIFT, name, PSI, by_name[name]["tests"][PSI]["value"], None,
                                bool(by_name[name]["drift"]), {"kind": by_name[name]["kind"],
                                                               "tests": by_name[name]["tests"]}) for name in names]
        states.update(advance_window(results, states, i, POLICY))
        flags.append([r.breached for r in results])
        paging.append([bool(r.details.get(EVIDENCE_KEY, {}).get("paging")) for r in results])
        if trace is not None:
            trace.append([{**r.details.get(EVIDENCE_KEY, {}), "margin": _margin(r)}
                          for r in results])
    return np.asarray(flags), np.asarray(paging)


def _margin(result: WindowResult) -> float:
    """The window's own effect over its floor, as the per-window rule reads it (1: at the floor)."""
    score = window_score(result)
    return score.window_margin() if score is not None else 0.0
