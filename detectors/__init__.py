"""Drift detectors: pure computation over the core's summaries (no I/O), in rooms.

- `stats/`: pure statistics and intervals (two-sample tests, binned forms, model-quality and multivariate maths);
- `thresholds/`: every threshold and decision rule (per-test decision, alarm levels, reference-derived ones);
- `families/`: one module per streaming family, `run_families`, which runs them on a merged window, and
  `evaluate_window`, which gives the window's `WindowOutcome` (status, results, breaches);
- `estimation/`: performance before labels (CBPE binary and multiclass, DLE);
- `batch/`: the `detect` engine, its performance, multivariate drift and segments;
- `rollout/`: a candidate compared with production, the verdict and the transition, one window's `RolloutOutcome`
  (the `[rollouts]` policy itself is `driftline.policies.RolloutPolicy`).

The two entry points: `evaluate_window` (one streaming window) and `detect` (two DataFrames).
"""
from typing import Any

__all__ = ["detect", "evaluate_window"]


def __getattr__(name: str) -> Any:
    # Imported on first use: `driftline detect` needs the batch room only, the scheduler the families.
    if name == "detect":
        from driftline.detectors.batch.engine import detect

        return detect
    if name == "evaluate_window":
        from driftline.detectors.families.window import evaluate_window

        return evaluate_window
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
