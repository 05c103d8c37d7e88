"""Distributions for the drill-down: baseline and window counts on the baseline's fine bins,
regrouped into display bins (histogram) or accumulated (ECDF); category shares."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd


def regroup_edges(edges: np.ndarray, groups: int) -> np.ndarray:
    """About `groups` display bins from the fine edges (a subset of them, equal baseline mass)."""
    if edges.size <= groups:
        return edges
    index = np.unique(np.linspace(0, edges.size - 1, groups - 1).round().astype(int))
    return edges[index]


def regroup_counts(edges: np.ndarray, counts: np.ndarray, group_edges: np.ndarray) -> np.ndarray:
    """Counts on the fine bins (``len(edges) + 1`` of them) summed into the display bins."""
    counts = np.asarray(counts, dtype=np.float64)
    # Fine bin i >= 1 starts at edges[i - 1]; bin 0 is the open lower bin.
    starts = np.concatenate(([-np.inf], edges))
    group = np.searchsorted(group_edges, starts, side="right")
    return np.bincount(group, weights=counts, minlength=group_edges.size + 1)


def numeric_histogram(edges: Sequence[float], baseline_counts: Sequence[float], window_counts: Sequence[float],
                      low: float, high: float, groups: int = 30) -> pd.DataFrame:
    """Baseline and window on the same display bins: left, right, source, share, density.

    The two open outer bins are closed at `low` and `high` (the smallest and largest
    value either side saw), so every bin has a width and density = share / width.
    """
    edges = np.asarray(edges, dtype=np.float64)
    group_edges = regroup_edges(edges, groups)
    bounds = np.concatenate(([min(low, group_edges[0]) if group_edges.size else low], group_edges,
                             [max(high, group_edges[-1]) if group_edges.size else high]))
    rows = []
    for source, counts in (("baseline", baseline_counts), ("window", window_counts)):
        grouped = regroup_counts(edges, np.asarray(counts), group_edges)
        total = grouped.sum()
        share = grouped / total if total else grouped
        width = np.diff(bounds)
        density = np.divide(share, width, out=np.zeros_like(share), where=width > 0)
        rows.append(pd.DataFrame({"left": bounds[:-1], "right": bounds[1:], "source": source, "share": share,
                                  "density": density}))
    return pd.concat(rows, ignore_index=True)


def numeric_ecdf(edges: Sequence[float], baseline_counts: Sequence[float], window_counts: Sequence[float],
                 max_points: int = 300) -> tuple[pd.DataFrame, dict[str, float] | None]:
    """ECDFs at the fine edges (share of values below each edge) and where they differ most.

    Returns (frame with x, source, cdf; {"x", "baseline", "window", "gap"} or None).
    """
    edges = np.asarray(edges, dtype=np.float64)
    if edges.size == 0:
        return pd.DataFrame(columns=["x", "source", "cdf"]), None
    curves = {}
    for source, counts in (("baseline", baseline_counts), ("window", window_counts)):
        counts = np.asarray(counts, dtype=np.float64)
        total = counts.sum()
        curves[source] = np.cumsum(counts)[:-1] / total if total else np.zeros(edges.size)
    gap = np.abs(curves["baseline"] - curves["window"])
    at = int(np.argmax(gap))
    keep = np.unique(np.concatenate((np.linspace(0, edges.size - 1, min(max_points, edges.size)).round().astype(int),
                                     [at])))
    frame = pd.concat([pd.DataFrame({"x": edges[keep], "source": s, "cdf": c[keep]}) for s, c in curves.items()],
                      ignore_index=True)
    return frame, {"x": float(edges[at]), "baseline": float(curves["baseline"][at]),
                   "window": float(curves["window"][at]), "gap": float(gap[at])}


def category_shares(baseline_counts: Mapping[str, int], window_counts: Mapping[str, int],
                    top: int = 15) -> pd.DataFrame:
    """Shares per category on both sides (top categories by either side's share, the rest as "(other)").

    Columns: category, source, share, unseen (the baseline never saw it).
    """
    base_total = sum(baseline_counts.values()) or 1
    window_total = sum(window_counts.values()) or 1
    keys = set(baseline_counts) | set(window_counts)
    peak = {k: max(baseline_counts.get(k, 0) / base_total, window_counts.get(k, 0) / window_total) for k in keys}
    shown = sorted(keys, key=lambda k: (-peak[k], k))[:top]
    rest = keys - set(shown)
    rows = []
    for source, counts, total in (("baseline", baseline_counts, base_total), ("window", window_counts, window_total)):
        for key in shown:
            rows.append({"category": key, "source": source, "share": counts.get(key, 0) / total,
                         "unseen": key not in baseline_counts})
        if rest:
            rows.append({"category": "(other)", "source": source,
                         "share": sum(counts.get(k, 0) for k in rest) / total, "unseen": False})
    return pd.DataFrame(rows, columns=["category", "source", "share", "unseen"])
