"""The LLM page's figures per window, from the window states of a version whose events come from traces
(driftline/otlp/): cost, retrieval relevance, and the shares of refused, empty and cached answers.

Pure: (start, end, state) per partition state in, one row per window out (partitions summed); a descriptor no
event of a window carried is NaN there.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import pandas as pd

from driftline.otlp import descriptors as d

# descriptor -> the per-window mean column it gives
MEANS = {d.COST_USD: "cost_per_request", d.RETRIEVAL_TOP_SCORE: "top_score", d.RETRIEVAL_MEAN_SCORE: "mean_score",
         d.PROMPT_TOKENS: "prompt_tokens", d.ANSWER_TOKENS: "answer_tokens"}
# boolean descriptor -> the per-window share of true it gives
SHARES = {d.ANSWER_REFUSED: "refused_share", d.ANSWER_EMPTY: "empty_share", d.CACHE_HIT: "cache_hit_share",
          d.RETRIEVAL_EMPTY: "empty_retrieval_share"}
COLUMNS = ["start", "end", "events", "cost", *MEANS.values(), *SHARES.values()]


def has_llm_descriptors(states: Sequence[tuple[int, int, Any]]) -> bool:
    """Whether any state holds a descriptor of traced LLM requests."""
    return any(name in state.features for _, _, state in states for name in (d.LLM_CALLS, d.CACHE_HIT))


def llm_frame(states: Sequence[tuple[int, int, Any]]) -> pd.DataFrame:
    windows: dict[int, dict[str, Any]] = {}
    for start, end, state in states:
        row = windows.setdefault(start, {"start": start, "end": end, "events": 0,
                                         **{name: [0.0, 0] for name in MEANS}, **{name: [0, 0] for name in SHARES}})
        row["events"] += state.events
        for name in MEANS:
            window = state.features.get(name)
            if window is not None:
                row[name][0] += window.total
                row[name][1] += window.count
        for name in SHARES:
            window = state.features.get(name)
            if window is not None:
                row[name][0] += window.categories.get("true", 0)
                row[name][1] += window.categories.get("true", 0) + window.categories.get("false", 0)
    out = []
    for row in sorted(windows.values(), key=lambda r: r["start"]):
        total, count = row[d.COST_USD]
        values = {"start": row["start"], "end": row["end"], "events": row["events"],
                  "cost": total if count else math.nan}
        values.update({column: (row[name][0] / row[name][1] if row[name][1] else math.nan)
                       for name, column in MEANS.items()})
        values.update({column: (row[name][0] / row[name][1] if row[name][1] else math.nan)
                       for name, column in SHARES.items()})
        out.append(values)
    return pd.DataFrame(out, columns=COLUMNS)
