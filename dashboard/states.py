"""A window's stored partition states, merged and laid out for the drill-down's tables."""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import pandas as pd

from driftline.vocabulary import NUMERIC, TOKEN_COUNTS


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
    """From (start, end, state) per partition state: per-window cache-hit rate, events and token counts
    (`tokens_in`, `tokens_out`: NaN where no event gave them), and batch-size counts.

    Partitions of one window are summed (cache and batch counts add up; no full merge needed).
    """
    windows: dict[int, dict[str, Any]] = {}
    sizes: dict[int, int] = {}
    for start, end, state in states:
        row = windows.setdefault(start, {"start": start, "end": end, "events": 0, "hits": 0, "lookups": 0,
                                         **dict.fromkeys(TOKEN_COUNTS, math.nan)})
        row["events"] += state.events
        row["hits"] += state.cache_hits
        row["lookups"] += state.cache_hits + state.cache_misses
        for size, count in state.batch_sizes.items():
            sizes[int(size)] = sizes.get(int(size), 0) + int(count)
        for name, histogram in state.tokens.items():  # generated answers' token counts
            if name in TOKEN_COUNTS and histogram.count:
                row[name] = (0.0 if math.isnan(row[name]) else row[name]) + histogram.sum
    rows = [{"start": r["start"], "end": r["end"], "events": r["events"],
             "cache_hit_rate": r["hits"] / r["lookups"] if r["lookups"] else math.nan,
             **{name: r[name] for name in TOKEN_COUNTS}}
            for r in sorted(windows.values(), key=lambda r: r["start"])]
    per_window = pd.DataFrame(rows, columns=["start", "end", "events", "cache_hit_rate", *TOKEN_COUNTS])
    batch = pd.DataFrame(sorted(sizes.items()), columns=["batch_size", "requests"])
    return per_window, batch


def sample_frames(baseline_summary: Mapping[str, Any], window_sample: Sequence[Mapping[str, Any]]
                  ) -> tuple[pd.DataFrame, pd.DataFrame, list[str], list[str]]:
    """(reference, current, numeric columns, categorical columns) for a report on the samples.

    Columns are the baseline's features (kinds from the baseline) plus ``prediction``
    when both samples carry a numeric one; a value of the wrong type becomes null.
    """
    kinds = {f["name"]: f["kind"] for f in baseline_summary.get("features", [])}
    numeric = [n for n, k in kinds.items() if k == NUMERIC]
    categorical = [n for n, k in kinds.items() if k != NUMERIC]

    def frame(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
        out = pd.DataFrame(index=range(len(records)))
        for name, kind in kinds.items():
            values = [(r.get("features") or {}).get(name) for r in records]
            if kind == NUMERIC:
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
