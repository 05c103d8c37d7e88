"""Retraining: requests and their outcomes, and the versions promoted or rolled back."""
from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from dashboard import charts, queries, ui


def _reason(reason: object) -> str:
    if isinstance(reason, dict):
        return ", ".join(f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in reason.items())
    return "" if reason is None else json.dumps(reason)


def body(ctx: ui.Context) -> None:
    st.title("Retraining")
    scope = st.segmented_control("Models", ["all models", "selected model"], default="all models",
                                 key="retrain_scope", label_visibility="collapsed") if ctx.model else "all models"
    model = ctx.model if scope == "selected model" else None
    requests = queries.retrain_requests(ctx.db_url, ctx.start_ms, model)
    moves = queries.alias_events(ctx.db_url, model)
    since = pd.Timestamp(ctx.start_ms, unit="ms", tz="UTC")
    recent_moves = moves[moves["at"] >= since]

    cols = st.columns(5)
    cols[0].metric(f"Requests ({ctx.range_key})", len(requests))
    cols[1].metric("Succeeded", int((requests["status"] == "succeeded").sum()))
    cols[2].metric("Failed or rejected", int(requests["status"].isin(("failed", "rejected")).sum()))
    cols[3].metric("Open", int(requests["status"].isin(("requested", "running")).sum()))
    cols[4].metric("Rollbacks", int((recent_moves["action"] == "rollback").sum()))

    st.markdown("**Requests and production moves**")
    if requests.empty and recent_moves.empty:
        st.caption(f"No retraining requests and no production moves in {ctx.range_label.lower()}.")
    else:
        if not requests.empty:
            points = requests.assign(label=[f"from v{v or '?'}" + (f" → v{n}" if n else "") for v, n in
                                            zip(requests["version"], requests["new_version"])])
            st.altair_chart(charts.requests_timeline(points[["requested_at", "model", "status", "label"]],
                                                     ctx.span_ms), width="stretch")
        if not recent_moves.empty:
            st.altair_chart(charts.alias_timeline(recent_moves, ctx.span_ms), width="stretch")

    st.header("Requests", divider="gray")
    if requests.empty:
        st.caption("None in this range. The retraining policy posts to DRIFTLINE_RETRAIN_WEBHOOK_URL when drift "
                   "persists or quality drops once labels arrive.")
    else:
        table = requests.assign(reason=requests["reason"].map(_reason),
                                response=requests["response"].map(lambda r: _reason(r) if r else ""),
                                outcome=[("promoted v" + str(n)) if p else (f"v{n} not promoted" if n else "")
                                         for n, p in zip(requests["new_version"], requests["promoted"])])
        st.dataframe(table[["requested_at", "model", "version", "reason", "status", "outcome", "response",
                            "completed_at"]], hide_index=True, width="stretch",
                     column_config={"requested_at": st.column_config.DatetimeColumn("requested (UTC)",
                                                                                    format="MMM DD HH:mm"),
                                    "completed_at": st.column_config.DatetimeColumn("completed (UTC)",
                                                                                    format="MMM DD HH:mm"),
                                    "version": st.column_config.TextColumn("from version")})

    st.header("Production history", divider="gray")
    if moves.empty:
        st.caption("No version has been promoted yet (`driftline promote`).")
    else:
        st.dataframe(moves[["at", "model", "action", "version", "previous_version", "reason"]], hide_index=True,
                     width="stretch",
                     column_config={"at": st.column_config.DatetimeColumn("at (UTC)", format="YYYY-MM-DD HH:mm")})


ui.page(body)
