"""Pure helpers of the pages (no I/O, no Streamlit): names and titles, time ranges, the overview's
headline, the drill-down's statistics table, number formatting.

The dashboard never re-decides anything: verdicts (`breached`) and thresholds come
from the detectors' results. Relative scores live in `driftline.dashboard.scores`, distributions
in `driftline.dashboard.distributions`, merged window states in `driftline.dashboard.states`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from driftline.dashboard.scores import HIGHER, LOWER, relative_score
from driftline import defaults, progress, vocabulary
from driftline.vocabulary import (
    DETECTORS,
    family,
    CONCURRENCY,
    DATA_DRIFT,
    ERROR_RATE,
    INSUFFICIENT_DATA,
    INSUFFICIENT_DATA_REASON,
    LATENCY,
    P50_MS,
    P95_MS,
    P99_MS,
    PREDICTION_DRIFT,
    QPS,
)

# Headline numbers of the overview: the latency metrics the detectors emit.
HEADLINE_METRICS: dict[str, tuple[str, ...]] = {
    "p99": (P99_MS,), "p95": (P95_MS,), "p50": (P50_MS,),
    QPS: (QPS,), ERROR_RATE: (ERROR_RATE,), CONCURRENCY: (CONCURRENCY,),
}
LATENCY_QUANTILES = ("p50", "p95", "p99")
# Latency results of the whole request: model-level ("") or the "total" latency part
# (the detectors report p50/p95/p99 per part: total, queue, compute).
LATENCY_TOTAL = ("", vocabulary.LATENCY_TOTAL)

def detector_title(detector: str) -> str:
    return family(detector).title


def ordered_detectors(names: Iterable[str]) -> list[str]:
    present = set(names)
    return [d for d in DETECTORS if d in present] + sorted(present - set(DETECTORS))


# --- time ------------------------------------------------------------------------

def bounded_range(now_ms: int, seconds: int, align_seconds: int) -> tuple[int, int]:
    """``[start, end)`` of the last `seconds`, with `end` rounded up to `align_seconds`.

    Rounding keeps "now" constant for a while, so cached queries are reused across
    refreshes instead of missing on every millisecond.
    """
    align = max(int(align_seconds), 1) * 1000
    end = -(-int(now_ms) // align) * align
    return end - int(seconds) * 1000, end


_HOUR_MS = 3_600_000


def bucket_size_ms(start_ms: int, end_ms: int, window_ms: int | None,
                   max_buckets: int = defaults.DASHBOARD_MAX_TIME_BUCKETS) -> int:
    """The smallest whole number of windows per bucket that keeps the range within `max_buckets`; past an hour,
    whole hours (the grain results are rolled up to, scheduler/rollups.py, so rolled and per-window hours
    fall into buckets alike)."""
    window_ms = max(int(window_ms or 60_000), 1)
    windows = max(math.ceil((end_ms - start_ms) / window_ms), 1)
    size = window_ms * max(math.ceil(windows / max_buckets), 1)
    return size if size <= _HOUR_MS else math.ceil(size / _HOUR_MS) * _HOUR_MS


def to_time(ms: pd.Series | Sequence[int] | int) -> Any:
    """Epoch milliseconds to timezone-aware UTC timestamps."""
    return pd.to_datetime(ms, unit="ms", utc=True)

def with_bucket_times(frame: pd.DataFrame, bucket_ms: int) -> pd.DataFrame:
    frame = frame.copy()
    frame["start"] = to_time(frame["bucket_ms"])
    frame["end"] = to_time(frame["bucket_ms"] + bucket_ms)
    return frame

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


def progress_line(judged: Mapping[str, int], watermark_ms: int | None, watermarks: Sequence[Mapping[str, Any]],
                  now_ms: int) -> tuple[str, bool]:
    """The overview's line on how far results are complete, e.g. "Judged up to 14:05 UTC · collectors 3 min
    behind · stalled: partition 3", and whether a partition holds the windows back (the line is then a warning).

    `judged`, `watermark_ms`, `watermarks`: those of `queries.judging_progress`. The latest judged window of any
    model counts: a model without recent traffic has no newer window to judge, which is not a delay.
    """
    text = (f"Judged up to {progress.clock(max(judged.values()), now_ms, seconds=False)}" if judged
            else "Nothing judged yet")
    if not watermarks:
        collectors = "no collector has recorded a watermark"
    elif watermark_ms is None:
        collectors = "collectors: a partition has stored no event yet"
    else:
        lag = (now_ms - watermark_ms) / 1000.0
        collectors = ("collectors caught up" if lag < progress.CAUGHT_UP_SECONDS
                      else f"collectors {progress.duration(lag)} behind")
    held = progress.describe_held(progress.held_back(watermarks))
    return " · ".join(part for part in (text, collectors, held) if part), bool(held)


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
        if details.get(INSUFFICIENT_DATA) and not note:
            note = INSUFFICIENT_DATA_REASON
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
