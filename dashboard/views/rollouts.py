"""Rollouts: each model's routing plan, per-arm traffic and serving side by side, the verdicts, the comparisons
behind them (differences with intervals over the windows, a shadow's largest disagreements) and every step."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from driftline import defaults
from driftline.dashboard import charts, rollout_presentation, rollout_queries, ui
from driftline.store.rollouts import FAIL, INCONCLUSIVE, PASS
from driftline.vocabulary import ERROR_RATE, P99_MS

VERDICT_ICONS = {PASS: ":material/check_circle:", FAIL: ":material/cancel:", INCONCLUSIVE: ":material/hourglass_empty:"}


def empty_state() -> None:
    st.info("No rollouts yet. Start one with a canary of a registered version, for example:")
    st.code("driftline rollout canary --model M --version V --weight 5", language="bash")
    st.caption("`driftline rollout shadow` mirrors requests to a candidate without answering with it; "
               "`driftline rollout ab` splits traffic between arms. The scheduler judges every closed window "
               "of the candidate against production and steps the canary up, promotes or rolls back.")


def plan_header(model: str, plans: pd.DataFrame) -> tuple[dict | None, str | None]:
    """The plan line and its metrics; returns (plan document, production version)."""
    row = plans[plans["model"] == model]
    if row.empty:
        st.markdown("**Plan:** production only (no rollout in progress)")
        return None, None
    plan = row.iloc[0]
    cols = st.columns(4)
    cols[0].metric("Mode", plan["mode"])
    cols[1].metric("Candidate", f"v{plan['candidate']}")
    cols[2].metric("Production", f"v{plan['production']}" if plan["production"] else "none")
    cols[3].metric("Plan since (UTC)", f"{plan['updated_at']:%b %d %H:%M}")
    st.markdown(f"**Plan:** {rollout_presentation.plan_text(plan['plan'])} · started {plan['started_at']:%Y-%m-%d %H:%M} UTC")
    return plan["plan"], plan["production"]


def arms(ctx: ui.Context, model: str, plan: dict | None, production: str | None, verdicts: pd.DataFrame) -> None:
    if plan is None:  # a finished rollout: production now and the versions it judged
        production = rollout_queries.production_version(ctx.db_url, model)
    roles = rollout_presentation.arm_roles(plan, production)
    for candidates in verdicts["candidate"].unique().tolist() if plan is None else []:
        for candidate in candidates.split(","):
            roles.setdefault(candidate, "was candidate")
    if not roles:
        return
    versions = tuple(sorted(roles))
    traffic = rollout_queries.arm_traffic(ctx.db_url, model, versions, ctx.start_ms, ctx.end_ms)
    serving = rollout_queries.arm_serving(ctx.db_url, model, versions, ctx.start_ms, ctx.end_ms)
    st.subheader(f"Arms side by side ({ctx.range_label.lower()})")
    table = rollout_presentation.arm_table(traffic, serving, roles, defaults.ROLLOUT_ALPHA)
    st.dataframe(table, hide_index=True, width="stretch", column_config={
        "version": st.column_config.TextColumn("version"),
        "p50_ms": st.column_config.NumberColumn("p50 (ms)", format="%.1f"),
        "p95_ms": st.column_config.NumberColumn("p95 (ms)", format="%.1f"),
        "p99_ms": st.column_config.NumberColumn("p99 (ms)", format="%.1f"),
        "error_rate": st.column_config.NumberColumn("error rate", format="percent"),
        "error_low": st.column_config.NumberColumn("error rate low", format="percent"),
        "error_high": st.column_config.NumberColumn("error rate high", format="percent")})
    st.caption(f"Latency: the mean of the evaluated windows' quantiles (no interval: the analysis compares "
               f"histogram quantiles directly). Error rate: pooled over the windows, with a "
               f"{1 - defaults.ROLLOUT_ALPHA:.0%} Wilson interval.")
    if traffic.empty:
        st.caption("No windows of these versions in this range yet.")
        return
    cols = st.columns(3)
    with cols[0]:
        st.markdown("**Events per window**")
        st.altair_chart(charts.multi_series(rollout_presentation.arm_series(traffic, "events", roles), "events",
                                            ctx.span_ms), width="stretch")
    for col, metric, title, percent in ((cols[1], P99_MS, "p99 (ms)", False),
                                        (cols[2], ERROR_RATE, "error rate", True)):
        chosen = serving[serving["metric"] == metric]
        rows = chosen.groupby(["version", "window_start_ms"], as_index=False)["value"].mean()
        with col:
            st.markdown(f"**{title}**")
            if rows.empty:
                st.caption("No evaluated windows in this range.")
            else:
                st.altair_chart(charts.multi_series(rollout_presentation.arm_series(rows, "value", roles), None,
                                                    ctx.span_ms, percent=percent), width="stretch")


def verdict_history(verdicts: pd.DataFrame) -> None:
    st.subheader("Verdicts")
    if verdicts.empty:
        st.caption("No window judged yet: the analysis judges each closed window once both versions have a "
                   "window state.")
        return
    latest = verdicts.iloc[-1]
    reasons = rollout_presentation.reasons_text(latest["reasons"])
    st.markdown(f"{VERDICT_ICONS.get(latest['verdict'], '')} **Latest verdict: {latest['verdict']}** on "
                f"v{latest['candidate']}, window {ui.window_label(latest['window_start_ms'], latest['window_end_ms'])}"
                + (f": {reasons}" if reasons else ""))
    newest = verdicts.iloc[::-1]
    shown = newest.assign(
        window=[ui.window_label(s, e) for s, e in zip(newest["window_start_ms"], newest["window_end_ms"])],
        reasons=newest["reasons"].map(rollout_presentation.reasons_text))
    st.dataframe(shown[["window", "candidate", "verdict", "reasons", "evaluated_at"]], hide_index=True,
                 width="stretch", column_config={
                     "evaluated_at": st.column_config.DatetimeColumn("judged (UTC)", format="MMM DD HH:mm:ss")})


def comparison_history(ctx: ui.Context, verdicts: pd.DataFrame) -> None:
    """Each window's differences with their intervals, per arm, as the analysis stored them behind its verdicts."""
    st.subheader("Comparisons")
    frame = rollout_presentation.comparisons(verdicts)
    metrics = rollout_presentation.compared_metrics(frame)
    if not metrics:
        st.caption("No comparisons stored yet: each verdict keeps its window's comparisons once a window is judged.")
        return
    latest = verdicts.iloc[-1]["details"]
    winner = rollout_presentation.winner_text(latest)
    alpha = (latest or {}).get("alpha")
    st.caption("Each window's candidate minus production (an A/B arm minus the control), with its "
               + (f"{1 - alpha:.1%} " if alpha else "") + "interval; the verdict pools the windows on "
               "confidence sequences (docs/detectors.md)." + (f" {winner}." if winner else ""))
    metric = st.selectbox("Metric", metrics, key="rollout_metric")
    st.altair_chart(charts.delta_intervals(rollout_presentation.delta_series(frame, metric), metric, ctx.span_ms),
                    width="stretch")
    newest = frame[frame["window_start_ms"] == frame["window_start_ms"].max()]
    st.dataframe(newest[["arm", "metric", "value", "lower", "upper", "count", "insufficient_data"]],
                 hide_index=True, width="stretch", column_config={
                     "value": st.column_config.NumberColumn("value", format="%.4g"),
                     "lower": st.column_config.NumberColumn("lower", format="%.4g"),
                     "upper": st.column_config.NumberColumn("upper", format="%.4g")})
    found = rollout_presentation.examples(verdicts)
    if found.empty:
        return
    st.markdown("**Largest disagreements** (shadow: the same request through both versions)")
    shown = found.assign(window=[ui.window_label(s, e) for s, e in zip(found["window_start_ms"],
                                                                        found["window_end_ms"])])
    for column in ("production", "candidate"):  # scores, or class labels
        shown[column] = shown[column].map(lambda v: "" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v))
    st.dataframe(shown[["window", "arm", "request_id", "production", "candidate", "difference"]], hide_index=True,
                 width="stretch", column_config={
                     "difference": st.column_config.NumberColumn("difference", format="%.4g")})


def step_history(steps: pd.DataFrame) -> None:
    st.subheader("Steps")
    if steps.empty:
        st.caption("No plan changes.")
        return
    newest = steps.iloc[::-1]
    shown = newest.assign(change=[rollout_presentation.step_change(f, t) for f, t in zip(newest["from"], newest["to"])],
                          reason=newest["reason"].fillna(""))
    st.dataframe(shown[["at", "by", "action", "change", "reason"]], hide_index=True, width="stretch",
                 column_config={"at": st.column_config.DatetimeColumn("at (UTC)", format="YYYY-MM-DD HH:mm:ss")})


def body(ctx: ui.Context) -> None:
    st.title("Rollouts")
    models = rollout_queries.rollout_models(ctx.db_url)
    if not models:
        empty_state()
        return
    plans = rollout_queries.plans(ctx.db_url)
    default = ctx.model if ctx.model in models else (plans["model"].iloc[0] if not plans.empty else models[0])
    model = st.selectbox("Rollout of", models, index=models.index(default), key="rollout_model")
    plan, production = plan_header(model, plans)
    verdicts = rollout_queries.verdicts(ctx.db_url, model)
    arms(ctx, model, plan, production, verdicts)
    verdict_history(verdicts)
    comparison_history(ctx, verdicts)
    step_history(rollout_queries.steps(ctx.db_url, model))


ui.page(body)
