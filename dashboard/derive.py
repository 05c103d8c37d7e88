"""Pure functions that turn what the store returned into what the pages draw (no I/O, no Streamlit).

The dashboard never re-decides anything: verdicts (`breached`) and thresholds come
from the detectors' results. What it derives is presentation:

* **relative score** of a result: how far its value lies towards or past its threshold,
  1 meaning "at the threshold", so metrics with different units share one colour scale.
  For a metric where higher is worse (PSI, p99, error rate) it is ``value / threshold``;
  where lower is worse it is ``threshold / value``, except for p-values, whose scale is
  logarithmic: ``log(p) / log(alpha)`` (p = alpha gives 1, p = alpha^2 gives 2). Scores
  are capped at `defaults.DASHBOARD_SCORE_CAP`.
* **which side is worse** is read from the results themselves (breached values above or
  below their thresholds, clean values on the other side), so a new metric needs no
  code here; only a metric never seen breached or clean falls back to its name.
* **distributions** for the drill-down: the baseline's and the window's counts on the
  baseline's fine bins, regrouped into fewer display bins (histogram) or accumulated
  (ECDF); category shares.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from driftline import defaults, vocabulary
from driftline.vocabulary import (
    CONCURRENCY,
    DATASET_DRIFT,
    DATA_DRIFT,
    DATA_QUALITY,
    ERROR_RATE,
    INSUFFICIENT_DATA_KEY,
    LATENCY,
    MODEL_QUALITY,
    P50_MS,
    P95_MS,
    P99_MS,
    PREDICTION_DRIFT,
    QPS,
    SKEW,
)

HIGHER = "higher"
LOWER = "lower"
# Names of metrics where a smaller value is the bad one, for metrics never seen breached or clean.
_LOWER_IS_WORSE_HINTS = ("p_value", "pvalue", "accuracy", "auc", "f1", "precision", "recall", "r2", "hit_rate")
_P_VALUE_HINTS = ("p_value", "pvalue")

# Headline numbers of the overview: the latency metrics the detectors emit.
HEADLINE_METRICS: dict[str, tuple[str, ...]] = {
    "p99": (P99_MS,), "p95": (P95_MS,), "p50": (P50_MS,),
    QPS: (QPS,), ERROR_RATE: (ERROR_RATE,), CONCURRENCY: (CONCURRENCY,),
}
LATENCY_QUANTILES = ("p50", "p95", "p99")
# Latency results of the whole request: model-level ("") or the "total" latency part
# (the detectors report p50/p95/p99 per part: total, queue, compute).
LATENCY_TOTAL = ("", vocabulary.LATENCY_TOTAL)

# Order of the detector families on the model page; families not listed follow, by name.
DETECTOR_ORDER = (DATA_DRIFT, DATASET_DRIFT, PREDICTION_DRIFT, DATA_QUALITY, SKEW, LATENCY,
                  MODEL_QUALITY)
DETECTOR_TITLES = {
    DATA_DRIFT: "Feature drift", DATASET_DRIFT: "Dataset drift", PREDICTION_DRIFT: "Prediction drift",
    DATA_QUALITY: "Data quality", SKEW: "Training-serving skew", LATENCY: "Latency and traffic",
    MODEL_QUALITY: "Model quality",
}


def detector_title(detector: str) -> str:
    return DETECTOR_TITLES.get(detector, detector.replace("_", " ").capitalize())


def ordered_detectors(names: Iterable[str]) -> list[str]:
    present = set(names)
    return [d for d in DETECTOR_ORDER if d in present] + sorted(present - set(DETECTOR_ORDER))


# --- time ------------------------------------------------------------------------

def bounded_range(now_ms: int, seconds: int, align_seconds: int) -> tuple[int, int]:
    """``[start, end)`` of the last `seconds`, with `end` rounded up to `align_seconds`.

    Rounding keeps "now" constant for a while, so cached queries are reused across
    refreshes instead of missing on every millisecond.
    """
    align = max(int(align_seconds), 1) * 1000
    end = -(-int(now_ms) // align) * align
    return end - int(seconds) * 1000, end


def bucket_size_ms(start_ms: int, end_ms: int, window_ms: int | None,
                   max_buckets: int = defaults.DASHBOARD_MAX_TIME_BUCKETS) -> int:
    """The smallest whole number of windows per bucket that keeps the range within `max_buckets`."""
    window_ms = max(int(window_ms or 60_000), 1)
    windows = max(math.ceil((end_ms - start_ms) / window_ms), 1)
    return window_ms * max(math.ceil(windows / max_buckets), 1)


def to_time(ms: pd.Series | Sequence[int] | int) -> Any:
    """Epoch milliseconds to timezone-aware UTC timestamps."""
    return pd.to_datetime(ms, unit="ms", utc=True)


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


def with_bucket_times(frame: pd.DataFrame, bucket_ms: int) -> pd.DataFrame:
    frame = frame.copy()
    frame["start"] = to_time(frame["bucket_ms"])
    frame["end"] = to_time(frame["bucket_ms"] + bucket_ms)
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


# --- the overview -------------------------------------------------------------------

def pick_metric(metrics: Iterable[str], names: Sequence[str]) -> str | None:
    present = set(metrics)
    return next((n for n in names if n in present), None)


@dataclass
class Headline:
    """A version's state in its newest evaluated window."""

    p99: float | None = None
    p99_threshold: float | None = None
    p99_breached: bool = False
    qps: float | None = None
    error_rate: float | None = None
    error_rate_threshold: float | None = None
    drifted_features: tuple[str, ...] = ()
    breached_detectors: tuple[str, ...] = ()
    window_start_ms: int | None = None


def headline(latest: pd.DataFrame) -> Headline:
    """Headline numbers from one version's `queries.latest_results` rows."""
    out = Headline()
    if latest.empty:
        return out
    out.window_start_ms = int(latest["window_start_ms"].iloc[0])
    latency = latest[(latest["detector"] == LATENCY) & latest["feature"].isin(LATENCY_TOTAL)]
    rows = {m: r for m, r in zip(latency["metric"], latency.itertuples(index=False))}
    name = pick_metric(rows, HEADLINE_METRICS["p99"])
    if name:
        out.p99, out.p99_threshold, out.p99_breached = _num(rows[name].value), _num(rows[name].threshold), bool(
            rows[name].breached)
    name = pick_metric(rows, HEADLINE_METRICS[QPS])
    if name:
        out.qps = _num(rows[name].value)
    name = pick_metric(rows, HEADLINE_METRICS[ERROR_RATE])
    if name:
        out.error_rate, out.error_rate_threshold = _num(rows[name].value), _num(rows[name].threshold)
    drift = latest[(latest["detector"] == DATA_DRIFT) & latest["breached"] & (latest["feature"] != "")]
    out.drifted_features = tuple(sorted(set(drift["feature"])))
    out.breached_detectors = tuple(ordered_detectors(set(latest.loc[latest["breached"], "detector"])))
    return out


def _num(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def health(firing: int, pending: int, head: Headline, has_windows: bool) -> tuple[str, str]:
    """(label, colour) of a version at a glance."""
    if firing:
        return f"{firing} firing", "red"
    if head.breached_detectors:
        return "breaching: " + ", ".join(detector_title(d).lower() for d in head.breached_detectors), "orange"
    if pending:
        return f"{pending} pending", "orange"
    if not has_windows:
        return "no traffic in range", "gray"
    return "healthy", "green"


# --- distributions for the drill-down -------------------------------------------------------

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


# --- the drill-down's statistics table -------------------------------------------------------

# Detector families whose `feature` is not a model feature (latency parts, the prediction).
NOT_FEATURES = (LATENCY, PREDICTION_DRIFT)


def statistics_rows(results: pd.DataFrame, directions: Mapping[tuple[str, str], str]) -> pd.DataFrame:
    """One row per stored result, followed by the tests its details hold (``details["tests"]``).

    Columns: detector, statistic, value, p_value, threshold, flagged, score, note. A result's
    `flagged` is its verdict (``breached``); a test's is its own flag (``drift``), which
    explains the verdict without being it. The note carries the detector's reason, or why
    there was not enough data.
    """
    rows = []
    for r in results.itertuples(index=False):
        details = r.details if isinstance(r.details, Mapping) else {}
        note = str(details.get("reason") or "")
        if details.get(INSUFFICIENT_DATA_KEY) and not note:
            note = "insufficient data"
        tests = details.get("tests") if isinstance(details.get("tests"), Mapping) else {}
        if not note:
            note = ", ".join(f"{k}: {fmt(v) if isinstance(v, float) else v}" for k, v in details.items()
                             if not isinstance(v, (dict, list)))
        rows.append({"detector": r.detector, "statistic": r.metric, "value": _num(r.value), "p_value": None,
                     "threshold": _num(r.threshold), "flagged": bool(r.breached),
                     "score": relative_score(_num(r.value), _num(r.threshold),
                                             directions.get((r.detector, r.metric), HIGHER), r.metric),
                     "note": note})
        for name, test in tests.items():
            if not isinstance(test, Mapping):
                continue
            p_value = _num(test.get("p_value_adjusted", test.get("p_value")))
            value = _num(test.get("value", test.get("statistic")))
            threshold = _num(test.get("threshold"))
            if name == "missing" and value is not None and _num(test.get("reference")) is not None:
                score = relative_score(abs(value - test["reference"]), threshold, HIGHER)
                test_note = f"training {fmt(test['reference'])}; flagged when the change is significant too"
            elif p_value is not None and "statistic" in test:
                score = relative_score(p_value, threshold, LOWER, "p_value")
                test_note = "p-value corrected across features (Benjamini-Hochberg)" \
                    if "p_value_adjusted" in test else ""
            else:
                score = relative_score(value, threshold, HIGHER)
                test_note = ""
            rows.append({"detector": "", "statistic": f"↳ {name}", "value": value, "p_value": p_value,
                         "threshold": threshold, "flagged": bool(test.get("drift", False)), "score": score,
                         "note": test_note})
    return pd.DataFrame(rows, columns=["detector", "statistic", "value", "p_value", "threshold", "flagged", "score",
                                       "note"])


# --- window states -------------------------------------------------------------------------

def merge_states(blobs: Sequence[bytes], baseline: Any) -> tuple[Any, list[str]]:
    """Merge a window's partial states (`WindowState.merge`); returns (state or None, problems).

    A blob that cannot be read (corrupt, or binned on another baseline) is skipped and
    named in `problems`, so one bad partition does not hide the others.
    """
    from driftline.window_state import WindowState

    states, problems = [], []
    for partition, blob in enumerate(blobs):
        try:
            states.append(WindowState.from_bytes(blob, baseline))
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"partition state {partition}: {exc}")
    if not states:
        return None, problems
    merged = states[0]
    for state in states[1:]:
        try:
            merged = merged.merge(state)
        except ValueError as exc:
            problems.append(str(exc))
    return merged, problems


def serving_frames(states: Sequence[tuple[int, int, Any]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """From (start, end, state) per partition state: per-window cache-hit rate and events, and batch-size counts.

    Partitions of one window are summed (cache and batch counts add up; no full merge needed).
    """
    windows: dict[int, dict[str, Any]] = {}
    sizes: dict[int, int] = {}
    for start, end, state in states:
        row = windows.setdefault(start, {"start": start, "end": end, "events": 0, "hits": 0, "lookups": 0})
        row["events"] += state.events
        row["hits"] += state.cache_hits
        row["lookups"] += state.cache_hits + state.cache_misses
        for size, count in state.batch_sizes.items():
            sizes[int(size)] = sizes.get(int(size), 0) + int(count)
    rows = [{"start": r["start"], "end": r["end"], "events": r["events"],
             "cache_hit_rate": r["hits"] / r["lookups"] if r["lookups"] else math.nan}
            for r in sorted(windows.values(), key=lambda r: r["start"])]
    per_window = pd.DataFrame(rows, columns=["start", "end", "events", "cache_hit_rate"])
    batch = pd.DataFrame(sorted(sizes.items()), columns=["batch_size", "requests"])
    return per_window, batch


def sample_frames(baseline_summary: Mapping[str, Any], window_sample: Sequence[Mapping[str, Any]]
                  ) -> tuple[pd.DataFrame, pd.DataFrame, list[str], list[str]]:
    """(reference, current, numeric columns, categorical columns) for a report on the samples.

    Columns are the baseline's features (kinds from the baseline) plus ``prediction``
    when both samples carry a numeric one; a value of the wrong type becomes null.
    """
    kinds = {f["name"]: f["kind"] for f in baseline_summary.get("features", [])}
    numeric = [n for n, k in kinds.items() if k == "numeric"]
    categorical = [n for n, k in kinds.items() if k != "numeric"]

    def frame(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
        out = pd.DataFrame(index=range(len(records)))
        for name, kind in kinds.items():
            values = [(r.get("features") or {}).get(name) for r in records]
            if kind == "numeric":
                out[name] = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").astype("float64")
            else:
                # object dtype keeps None as None (pandas 3 would make a str column with NaN)
                out[name] = pd.Series([None if v is None else str(v) for v in values], dtype=object)
        out["prediction"] = pd.to_numeric(pd.Series([_score(r.get("prediction")) for r in records], dtype=object),
                                          errors="coerce").astype("float64")
        return out

    reference, current = frame(baseline_summary.get("sample") or []), frame(window_sample)
    if reference["prediction"].notna().any() and current["prediction"].notna().any():
        numeric = numeric + ["prediction"]
    else:
        reference, current = reference.drop(columns="prediction"), current.drop(columns="prediction")
    return reference, current, numeric, categorical


def _score(prediction: Any) -> float | None:
    if isinstance(prediction, bool):
        return float(prediction)
    if isinstance(prediction, (int, float)):
        return float(prediction)
    if isinstance(prediction, list) and prediction and all(isinstance(p, (int, float)) for p in prediction):
        return float(prediction[1] if len(prediction) == 2 else max(prediction))
    return None


# --- formatting ---------------------------------------------------------------------------

def fmt(value: Any, digits: int = 3) -> str:
    """A number for people: NaN/None as an em dash, tiny p-values in scientific notation."""
    number = _num(value)
    if number is None:
        return "—"
    if number != 0 and abs(number) < 10 ** -digits:
        return f"{number:.1e}"
    if abs(number) >= 1000:
        return f"{number:,.0f}"
    return f"{number:.{digits}g}" if abs(number) < 1 else f"{number:,.{max(digits - 1, 1)}f}"


def fmt_ago(then: pd.Timestamp | None, now_ms: int) -> str:
    if then is None or pd.isna(then):
        return "never"
    seconds = max(now_ms / 1000.0 - then.timestamp(), 0.0)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"
