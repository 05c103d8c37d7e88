"""How far a result lies towards or past its threshold: one colour scale for metrics of any unit.

The **relative score** is 1 at the threshold. For a metric where higher is worse (PSI,
p99, error rate) it is ``value / threshold``; where lower is worse it is
``threshold / value``, except for p-values, whose scale is logarithmic:
``log(p) / log(alpha)`` (p = alpha gives 1, p = alpha^2 gives 2). Scores are capped at
`defaults.DASHBOARD_SCORE_CAP`. **Which side is worse** is read from the results
themselves (breached values above or below their thresholds, clean values on the other
side), so a new metric needs no code here; only a metric never seen breached or clean
falls back to its name.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from driftline import defaults, vocabulary

HIGHER = "higher"
LOWER = "lower"
# Names of metrics where a smaller value is the bad one, for metrics never seen breached or clean.
_LOWER_IS_WORSE_HINTS = (*sorted(vocabulary.QUALITY_SCORES), "p_value", "pvalue", "auc", "r2", "hit_rate",
                         vocabulary.TOKENS_PER_SECOND_P50)
_P_VALUE_HINTS = ("p_value", "pvalue")


# --- relative scores ------------------------------------------------------------------

def worse_direction(buckets: pd.DataFrame) -> dict[tuple[str, str], str]:
    """Per (detector, metric): HIGHER when large values are the bad ones, else LOWER.

    Evidence for HIGHER: breached values above their threshold, clean values below it;
    for LOWER the opposite. Ties (no evidence) fall back to the metric's name.
    """
    out: dict[tuple[str, str], str] = {}
    if buckets.empty:
        return out
    sums = buckets.groupby(["detector", "metric"])[["breached_above", "breached_below", "clean_above",
                                                     "clean_below"]].sum()
    for (detector, metric), row in sums.iterrows():
        higher = row["breached_above"] + row["clean_below"]
        lower = row["breached_below"] + row["clean_above"]
        if higher != lower:
            out[(detector, metric)] = HIGHER if higher > lower else LOWER
        else:
            out[(detector, metric)] = LOWER if _hinted(metric, _LOWER_IS_WORSE_HINTS) else HIGHER
    return out


def _hinted(metric: str, hints: Sequence[str]) -> bool:
    name = metric.lower()
    return any(h in name for h in hints)


def relative_score(value: float | None, threshold: float | None, direction: str, metric: str = "",
                   cap: float = defaults.DASHBOARD_SCORE_CAP) -> float:
    """The value against its threshold, 1 at the threshold (module docstring); NaN without both."""
    if value is None or threshold is None or not np.isfinite(value) or not np.isfinite(threshold):
        return math.nan
    if direction == HIGHER:
        if threshold > 0:
            score = value / threshold
        else:
            score = cap if value > threshold else 0.0
    elif _hinted(metric, _P_VALUE_HINTS) and 0.0 < threshold < 1.0:
        score = 0.0 if value >= 1.0 else math.log(max(value, 1e-300)) / math.log(threshold)
    elif value > 0:
        score = threshold / value
    else:
        score = cap if threshold > 0 else 0.0
    return float(min(max(score, 0.0), cap))


def scored(buckets: pd.DataFrame) -> pd.DataFrame:
    """`queries.detector_buckets` rows plus: direction, worst (the bucket's worst value), score, start, end.

    Needs the bucket size in ``bucket_ms`` differences; `end` is the next bucket's start.
    """
    frame = buckets.copy()
    if frame.empty:
        for column in ("direction", "worst", "score", "start", "end"):
            frame[column] = pd.Series(dtype="float64" if column in ("worst", "score") else "object")
        return frame
    directions = worse_direction(frame)
    frame["direction"] = [directions[(d, m)] for d, m in zip(frame["detector"], frame["metric"])]
    frame["worst"] = np.where(frame["direction"] == HIGHER, frame["max_value"], frame["min_value"])
    frame["score"] = [relative_score(v, t, d, m) for v, t, d, m in
                      zip(frame["worst"], frame["threshold"], frame["direction"], frame["metric"])]
    return frame


# Highest score a heatmap cell without a breach is drawn at, over all metrics (feature_heatmap).
NOT_BREACHED_MAX = 0.99


def feature_heatmap(scored_buckets: pd.DataFrame, metric: str | None = None) -> pd.DataFrame:
    """One cell per (feature, bucket): the worst score over the metrics (or over `metric` only).

    Over all metrics, a cell with no breached result is capped at NOT_BREACHED_MAX (one
    metric past its own threshold is not a verdict when the rule needs several) and a
    cell with a breached result is drawn at 1 at least (the verdict fired).

    Columns: feature, bucket_ms, score, metric (the one that gave the score), worst, threshold,
    windows, breached (windows of the bucket with any breached metric of the feature, at most).
    """
    frame = scored_buckets[scored_buckets["feature"] != ""]
    if metric is not None:
        frame = frame[frame["metric"] == metric]
    columns = ["feature", "bucket_ms", "score", "metric", "worst", "threshold", "windows", "breached"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    ranked = frame.assign(_rank=frame["score"].fillna(-1.0)).sort_values("_rank", ascending=False)
    best = ranked.drop_duplicates(["feature", "bucket_ms"])[["feature", "bucket_ms", "score", "metric", "worst",
                                                             "threshold", "windows"]]
    breached = frame.groupby(["feature", "bucket_ms"])["breached"].max().rename("breached")
    cells = best.merge(breached, on=["feature", "bucket_ms"]).reset_index(drop=True)[columns]
    if metric is None:
        # The verdict combines metrics (significant AND large enough, or a missing-rate
        # change): a cell whose detectors did not fire is drawn under the threshold, and
        # one where they did at or past it, whatever the single metric shown says.
        cells["score"] = cells["score"].where(cells["breached"] > 0, cells["score"].clip(upper=NOT_BREACHED_MAX))
        cells["score"] = cells["score"].where(cells["breached"] == 0, cells["score"].fillna(1.0).clip(lower=1.0))
    return cells


def feature_order(heatmap: pd.DataFrame) -> list[str]:
    """Features most in trouble first: by breached buckets, then by peak score."""
    if heatmap.empty:
        return []
    stats = heatmap.groupby("feature").agg(breached=("breached", lambda b: int((b > 0).sum())),
                                           peak=("score", "max"))
    return stats.sort_values(["breached", "peak"], ascending=False).index.tolist()
