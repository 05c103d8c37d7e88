"""Feature freshness of one window: `stale_features`, the share of requests served a value older than its max age.

A feature fetched from an online store can stop updating while every value stays in range and in
distribution: no drift test sees it. Events that say how old each value was (`feature_ts` or
`feature_age_ms`) are folded into an age sketch per feature (`driftline.window_state.freshness`); for each
feature with a `[freshness] max_age`, the share of its aged requests older than that age is compared with
`stale_share`. Pure: the state in, `WindowResult`s out.
"""
from __future__ import annotations

from driftline.detectors.families.results import WindowResult, insufficient
from driftline.detectors.thresholds.freshness import FreshnessThresholds
from driftline.vocabulary import DATA_QUALITY, INSUFFICIENT_DATA_REASON, STALE_FEATURES
from driftline.window_state import WindowState

__all__ = ["stale_features"]


def stale_features(state: WindowState, freshness: FreshnessThresholds, min_rows: int) -> list[WindowResult]:
    """One result per feature with a max age: value = stale share, breached above `freshness.stale_share`.

    Needs `min_rows` requests with a known age of that feature (else insufficient data, never breached).
    """
    results = []
    for name, max_age_s in sorted(freshness.max_age_s.items()):
        limit_ms = max_age_s * 1000.0
        sketch = state.feature_age.get(name)
        aged = sketch.count if sketch is not None else 0
        stale, share = sketch.share_above(limit_ms) if sketch is not None else (0, 0.0)
        details = {"events": state.events, "aged": aged, "stale": stale, "max_age_ms": limit_ms}
        if sketch is not None:
            details.update(age_p50_ms=sketch.quantile(0.5), age_p95_ms=sketch.quantile(0.95),
                           age_p99_ms=sketch.quantile(0.99))
        breached = share > freshness.stale_share
        if aged < min_rows:
            insufficient(details, f"{INSUFFICIENT_DATA_REASON}: {aged} requests with a known age < {min_rows}")
            breached = False
        results.append(WindowResult(DATA_QUALITY, name, STALE_FEATURES, share, freshness.stale_share, breached,
                                    details))
    return results
