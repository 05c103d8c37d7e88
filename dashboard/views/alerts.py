"""Alerts: firing, pending and resolved alerts on a timeline, their notifications and delivery status,
and the silences in force."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from driftline.dashboard import charts, queries, ui
from driftline.vocabulary import ALERT_RESOLVED, ALERT_STATES, NOTIFICATION_FAILED


def alert_label(frame: pd.DataFrame) -> pd.Series:
    feature = frame["feature"].map(lambda f: f" · {f}" if f else "")
    return frame["model"] + " v" + frame["version"] + " · " + frame["detector"] + feature


def body(ctx: ui.Context) -> None:
    st.title("Alerts")
    scope = st.segmented_control("Models", ["all models", "selected model"], default="all models", key="alert_scope",
                                 label_visibility="collapsed") if ctx.model else "all models"
    model = ctx.model if scope == "selected model" else None
    alerts = queries.alerts(ctx.db_url, ctx.start_ms, model)
    notes = queries.notifications(ctx.db_url, ctx.start_ms, tuple(alerts["fingerprint"]))
    if model is not None:
        notes = notes[notes["alert_fingerprint"].isin(set(alerts["fingerprint"])) | notes["alert_fingerprint"].isna()]
    silences = queries.silences(ctx.db_url, ctx.start_ms)
    now = pd.Timestamp(ctx.now_ms, unit="ms", tz="UTC")
    active_silences = silences[(silences["starts_at"] <= now) & (silences["expires_at"] > now)]

    cols = st.columns(5)
    for col, state in zip(cols, ALERT_STATES):
        col.metric(state.capitalize(), int((alerts["state"] == state).sum()))
    cols[3].metric("Failed notifications", int((notes["status"] == NOTIFICATION_FAILED).sum()))
    cols[4].metric("Active silences", len(active_silences))

    if alerts.empty:
        st.success(f"No alerts in {ctx.range_label.lower()}.")
    else:
        timeline = alerts.assign(label=alert_label(alerts), start=alerts["fired_at"].fillna(alerts["started_at"]),
                                 end=alerts["resolved_at"].fillna(now))
        timeline["start"] = timeline["start"].clip(lower=pd.Timestamp(ctx.start_ms, unit="ms", tz="UTC"))
        st.markdown("**Timeline** (from firing, or from pending, to resolve or now)")
        st.altair_chart(charts.alert_timeline(timeline[["label", "start", "end", "state", "severity", "summary"]],
                                              ctx.span_ms), width="stretch")
        shown = st.segmented_control("Show", ["active", "resolved", "all"], default="active", key="alert_filter")
        table = alerts if shown in (None, "all") else (
            alerts[alerts["state"] == ALERT_RESOLVED] if shown == "resolved" else alerts[alerts["state"] != ALERT_RESOLVED])
        st.dataframe(table.assign(alert=alert_label(table))[
            ["state", "severity", "alert", "summary", "value", "threshold", "first_window_start",
             "fired_window_start", "started_at", "fired_at", "resolved_at"]],
            hide_index=True, width="stretch",
            column_config={c: st.column_config.DatetimeColumn(f"{c.replace('_', ' ')} (UTC)", format="MMM DD HH:mm")
                           for c in ("started_at", "fired_at", "resolved_at")}
            # event time, beside the wall-clock times (which in a backfill are all the same minute)
            | {c: st.column_config.DatetimeColumn(label, format="MMM DD HH:mm", timezone="UTC",
                                                  help=f"start of the event-time window (UTC) {what}")
               for c, label, what in (("first_window_start", "evidence from (window, UTC)",
                                       "in which the alert's evidence began"),
                                      ("fired_window_start", "fired in (window, UTC)", "in which it fired"))}
            | {"value": st.column_config.NumberColumn(format="%.4g"),
               "threshold": st.column_config.NumberColumn(format="%.4g")})

    st.header("Notifications", divider="gray")
    if notes.empty:
        st.caption("No notifications in this range.")
    else:
        left, right = st.columns([2, 3])
        with left:
            st.markdown("**Delivery status by channel**")
            counts = notes.groupby(["channel", "status"]).size().rename("count").reset_index()
            st.altair_chart(charts.status_counts(counts, "channel"), width="stretch")
        with right:
            labels = dict(zip(alerts["fingerprint"], alert_label(alerts) + " · " + alerts["state"]))
            by_label = {"every alert": None} | {label: fp for fp, label in labels.items()}
            chosen = by_label.get(st.selectbox("Notifications of", list(by_label), key="alert_pick"))
            rows = notes if chosen is None else notes[notes["alert_fingerprint"] == chosen]
            rows = rows.assign(alert=rows["alert_fingerprint"].map(lambda f: labels.get(f, "(none)") if f else "(none)"))
            st.dataframe(rows[["created_at", "alert", "channel", "kind", "status", "attempts", "response_status",
                               "last_error", "sent_at"]], hide_index=True, width="stretch",
                         column_config={c: st.column_config.DatetimeColumn(f"{c.replace('_', ' ')} (UTC)",
                                                                           format="MMM DD HH:mm:ss")
                                        for c in ("created_at", "sent_at")})
        failed = notes[notes["status"] == NOTIFICATION_FAILED]
        for row in failed.itertuples():
            st.warning(f"{row.channel} {row.kind} notification failed after {row.attempts} attempts: {row.last_error}")

    st.header("Silences", divider="gray")
    if silences.empty:
        st.caption("No silences in force in this range. Add one with `driftline alerts silence`.")
    else:
        table = silences.assign(status=["active" if s <= now < e else ("expired" if e <= now else "scheduled")
                                        for s, e in zip(silences["starts_at"], silences["expires_at"])])
        st.dataframe(table[["status", "model", "detector", "feature", "comment", "created_by", "starts_at",
                            "expires_at"]], hide_index=True, width="stretch",
                     column_config={c: st.column_config.DatetimeColumn(f"{c.replace('_', ' ')} (UTC)",
                                                                       format="MMM DD HH:mm")
                                    for c in ("starts_at", "expires_at")})


ui.page(body)
