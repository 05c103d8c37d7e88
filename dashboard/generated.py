"""The model page's generated-answers panel (LLM serving): time to first token, time per output token, token rates
and token counts, shown only when a version's windows have them (a version that logs none sees nothing new)."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from driftline.dashboard import charts, presentation, ui
from driftline.vocabulary import (LATENCY_TPOT, LATENCY_TTFT, OUTPUT_TOKENS_PER_SECOND, P50_MS, P99_MS, TOKEN_COUNTS,
                                  TOKENS_PER_SECOND_P50)

# part -> its chart's title
_PARTS = {LATENCY_TTFT: "**Time to first token** (ms)", LATENCY_TPOT: "**Time per output token** (ms)"}
RATES = {TOKENS_PER_SECOND_P50: "median decode rate per request", OUTPUT_TOKENS_PER_SECOND: "output tokens per second"}


def has_generated_answers(latency: pd.DataFrame, per_window: pd.DataFrame) -> bool:
    """Whether the range holds any ttft/tpot result, token rate or token count."""
    return bool(latency["feature"].isin(list(_PARTS)).any() or latency["metric"].isin(list(RATES)).any()
                or any(name in per_window and per_window[name].notna().any() for name in TOKEN_COUNTS))


def generated_answers(ctx: ui.Context, latency: pd.DataFrame, per_window: pd.DataFrame) -> None:
    """`latency`: the version's scored latency results; `per_window`: `states.serving_frames`' windows."""
    if not has_generated_answers(latency, per_window):
        return
    st.subheader("Generated answers")
    cols = st.columns(3)
    for col, (part, title) in zip(cols, _PARTS.items()):
        rows = latency[(latency["feature"] == part) & latency["metric"].isin((P50_MS, P99_MS))]
        with col:
            if rows.empty:
                st.caption(f"No {part} in this range.")
                continue
            st.markdown(title + ", p50 and p99 (worst window per point)")
            series = pd.DataFrame({"time": rows["start"], "series": rows["metric"].str.replace("_ms", ""),
                                   "value": rows["max_value"]})
            st.altair_chart(charts.multi_series(series, "ms", ctx.span_ms, height=170), width="stretch")
            objective = rows[rows["metric"] == P99_MS]["threshold"].dropna()
            if not objective.empty:
                st.caption(f"p99 objective: {float(objective.max()):g} ms")
    with cols[2]:
        rows = latency[latency["metric"].isin(list(RATES))]
        if rows.empty:
            st.caption("No token rates in this range.")
        else:
            st.markdown("**Tokens per second**")
            series = pd.DataFrame({"time": rows["start"], "series": rows["metric"].map(RATES),
                                   "value": rows["mean_value"]})
            st.altair_chart(charts.multi_series(series, "tokens/s", ctx.span_ms, height=170), width="stretch")
    counts = per_window.dropna(subset=[n for n in TOKEN_COUNTS if n in per_window], how="all")
    if not counts.empty:
        st.markdown("**Tokens per window** (prompt and output)")
        series = pd.concat([pd.DataFrame({"time": presentation.to_time(counts["start"]), "series": name,
                                          "value": counts[name]}) for name in TOKEN_COUNTS]).dropna(subset=["value"])
        st.altair_chart(charts.multi_series(series, "tokens", ctx.span_ms, height=150), width="stretch")
