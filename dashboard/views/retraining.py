"""Retraining: requests and their outcomes, and the versions promoted or rolled back."""
from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from driftline.dashboard import charts, queries, ui


def _reason(reason: object) -> str:
    if isinstance(reason, dict):
        return ", ".join(f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in reason.items())
    return "" if reason is None else json.dumps(reason)


def _outcome(new_version: object, promoted: object) -> str:
    if new_version is None or pd.isna(new_version):
        return ""
    return f"promoted v{new_version}" if bool(promoted) else f"v{new_version} not promoted"


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
        events = pd.concat([
            pd.DataFrame({"at": requests["requested_at"], "lane": "retraining request", "kind": requests["status"],
                          "label": [_outcome(n, p) or f"from v{v}" for v, n, p in
                                    zip(requests["version"], requests["new_version"], requests["promoted"])],
                          "detail": requests["model"] + ": " + requests["reason"].map(_reason)}),
            pd.DataFrame({"at": recent_moves["at"], "lane": "production", "kind": recent_moves["action"],
                          "label": "v" + recent_moves["version"],
                          "detail": recent_moves["model"] + ": " + recent_moves["reason"].fillna("")}),
        ], ignore_index=True)
        st.altair_chart(charts.retraining_timeline(events, ctx.span_ms), width="stretch")

    st.header("Requests", divider="gray")
    if requests.empty:
        st.caption("None in this range. The retraining policy posts to DRIFTLINE_RETRAIN_WEBHOOK_URL when drift "
                   "persists or quality drops once labels arrive.")
    else:
        table = requests.assign(reason=requests["reason"].map(_reason),
                                response=requests["response"].map(lambda r: _reason(r) if r else ""),
                                outcome=[_outcome(n, p) for n, p in zip(requests["new_version"], requests["promoted"])])
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
