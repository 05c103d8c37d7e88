"""LLM page: a version whose events come from OpenTelemetry traces of an LLM or RAG service (docs/llm.md): tokens and
their cost, time to first token and per output token against their objectives, retrieval relevance, the shares of
refused, empty and cached answers, and the drift of every descriptor."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from driftline import defaults
from driftline.dashboard import charts, generated, llm_frames, presentation, queries, scores, ui
from driftline.otlp.descriptors import DESCRIPTORS
from driftline.vocabulary import DATA_DRIFT, EMBEDDING_DRIFT, LATENCY


@st.cache_data(ttl=queries.TTL, show_spinner=False, max_entries=32)
def llm_windows(db_url: str, model: str, version: str, start_ms: int, end_ms: int
                ) -> tuple[pd.DataFrame, pd.DataFrame, bool]:
    """(the LLM figures per window, the serving frame of token counts, whether the version has descriptors)."""
    from driftline.dashboard import states
    from driftline.window_state import WindowState

    decoded = []
    for start, end, blob in queries.sampled_state_blobs(db_url, model, version, start_ms, end_ms,
                                                        defaults.DASHBOARD_MAX_STATE_WINDOWS):
        try:
            decoded.append((start, end, WindowState.from_bytes(blob)))
        except ValueError:
            continue  # the model page names unreadable states
    per_window, _ = states.serving_frames(decoded)
    return llm_frames.llm_frame(decoded), per_window, llm_frames.has_llm_descriptors(decoded)


def _lines(ctx: ui.Context, frame: pd.DataFrame, columns: dict[str, str], title: str, percent: bool = False) -> None:
    rows = frame.dropna(subset=list(columns), how="all")
    if rows.empty:
        st.caption(f"No {title.lower()} in this range.")
        return
    st.markdown(f"**{title}**")
    series = pd.concat([pd.DataFrame({"time": presentation.to_time(rows["start"]), "series": label,
                                      "value": rows[column]}) for column, label in columns.items()])
    st.altair_chart(charts.multi_series(series.dropna(subset=["value"]), None, ctx.span_ms, height=170,
                                        percent=percent), width="stretch")


def body(ctx: ui.Context) -> None:
    if ui.needs_model(ctx):
        return
    st.title(f"LLM · {ctx.model} · v{ctx.version}")
    frame, per_window, traced = llm_windows(ctx.db_url, ctx.model, ctx.version, ctx.start_ms, ctx.end_ms)
    if not traced:
        st.info("This version's events carry no descriptors of traced LLM requests. Export a service's "
                "OpenTelemetry traces to the receiver (`POST /v1/traces`, OTLP gRPC on port 4317): see docs/llm.md.")
        return
    cols = st.columns(4)
    cols[0].metric(f"Requests ({ctx.range_key})", f"{int(frame['events'].sum()):,}")
    cost = frame["cost"].sum(min_count=1)
    cols[1].metric("Token cost", "no [llm.prices]" if pd.isna(cost) else f"{cost:,.4f}")
    cols[2].metric("Refused answers", "-" if frame["refused_share"].isna().all()
                   else f"{frame['refused_share'].mean():.1%}")
    cols[3].metric("Cache hits", "-" if frame["cache_hit_share"].isna().all()
                   else f"{frame['cache_hit_share'].mean():.1%}")
    window_ms = queries.window_length_ms(ctx.db_url, ctx.model)
    first = queries.first_window_ms(ctx.db_url, ctx.model, ctx.version, ctx.start_ms, ctx.end_ms)
    bucket_ms = presentation.bucket_size_ms(first or ctx.start_ms, ctx.end_ms, window_ms)
    buckets = queries.detector_buckets(ctx.db_url, queries.BucketQuery(ctx.model, ctx.version, first or ctx.start_ms,
                                                                       ctx.end_ms, bucket_ms))
    scored = presentation.with_bucket_times(scores.scored(buckets), bucket_ms)
    generated.generated_answers(ctx, scored[scored["detector"] == LATENCY], per_window)
    left, middle, right = st.columns(3)
    with left:
        _lines(ctx, frame, {"cost_per_request": "per request"}, "Token cost per request")
    with middle:
        _lines(ctx, frame, {"top_score": "top document", "mean_score": "mean of the documents"},
               "Retrieval relevance")
    with right:
        _lines(ctx, frame, {"refused_share": "refused", "empty_share": "empty", "cache_hit_share": "cache hits",
                            "empty_retrieval_share": "nothing retrieved"}, "Answer shares", percent=True)
    st.header("Descriptor drift", divider="gray")
    drift = scored[(scored["detector"] == DATA_DRIFT) & scored["feature"].isin(DESCRIPTORS)]
    if drift.empty:
        st.caption("No descriptor judged in this range yet.")
    else:
        cells = presentation.with_bucket_times(scores.feature_heatmap(drift), bucket_ms)
        st.altair_chart(charts.score_heatmap(cells, scores.feature_order(cells), ctx.span_ms), width="stretch")
    embedded = scored[scored["detector"] == EMBEDDING_DRIFT]
    if not embedded.empty:
        names = ", ".join(f"`{name}`" for name in sorted(set(embedded["feature"])))
        breached = sorted(set(embedded.loc[embedded["breached"] > 0, "feature"]))
        st.markdown(f"Embeddings judged: {names}" + (f" · drifted: {', '.join(breached)}" if breached
                                                      else " · no drift in this range"))


ui.page(body)
