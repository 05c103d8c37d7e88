"""Model page: serving (latency against the SLO, traffic, errors, cache, batches), every detector
family over time (features x windows heatmaps, model-level metrics against thresholds), and the
production version's history."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from driftline.dashboard import (charts, presentation, embeddings, freshness, generated, queries, scores, states, ui,
                                 worker_signals)
from driftline import defaults
from driftline.vocabulary import (
    ALERT_FIRING,
    CONCURRENCY,
    DATA_DRIFT,
    EMBEDDING_DRIFT,
    ERROR_RATE,
    ESTIMATED_METRICS,
    ESTIMATED_QUALITY,
    ESTIMATION_INVALID,
    LATENCY,
    MODEL_QUALITY,
    QPS,
)

WORST = "worst of all metrics"


@st.cache_data(ttl=queries.TTL, show_spinner=False, max_entries=64)
def serving_from_states(db_url: str, model: str, version: str, start_ms: int, end_ms: int
                        ) -> tuple[pd.DataFrame, pd.DataFrame, list[str], pd.DataFrame]:
    """Cache-hit rate per window, batch sizes and feature-age percentiles, from up to DASHBOARD_MAX_STATE_WINDOWS
    window states."""
    from driftline.window_state import WindowState

    decoded, problems = [], []
    for start, end, blob in queries.sampled_state_blobs(db_url, model, version, start_ms, end_ms,
                                                        defaults.DASHBOARD_MAX_STATE_WINDOWS):
        try:
            decoded.append((start, end, WindowState.from_bytes(blob)))
        except ValueError as exc:
            problems.append(f"window {ui.window_label(start, end)}: {exc}")
    per_window, batch = states.serving_frames(decoded)
    return per_window, batch, problems, freshness.age_frame(decoded)


def header(ctx: ui.Context, scored: pd.DataFrame, versions: pd.DataFrame) -> None:
    row = versions[(versions["model"] == ctx.model) & (versions["version"] == ctx.version)]
    production = versions[(versions["model"] == ctx.model) & versions["production"]]["version"].tolist()
    st.title(f"{ctx.model} · v{ctx.version}")
    facts = []
    if production:
        facts.append(f"production: **v{production[0]}**" + (" (this version)" if production[0] == ctx.version else ""))
    if not row.empty and row.iloc[0]["description"]:
        facts.append(row.iloc[0]["description"])
    if not row.empty and pd.notna(row.iloc[0]["created_at"]):
        facts.append(f"registered {row.iloc[0]['created_at']:%Y-%m-%d %H:%M} UTC")
    st.markdown(" · ".join(facts) or "not registered (windows only)")

    windows = queries.windows(ctx.db_url, ctx.model, ctx.version, ctx.start_ms, ctx.end_ms)
    breached = scored[scored["breached"] > 0]
    cols = st.columns(5)
    cols[0].metric(f"Windows ({ctx.range_key})", len(windows))
    cols[1].metric(f"Events ({ctx.range_key})", f"{int(windows['events'].sum()):,}")
    cols[2].metric("Features drifting (any window)",
                   breached.loc[(breached["detector"] == DATA_DRIFT) & (breached["feature"] != ""), "feature"].nunique())
    cols[3].metric("Detector families breached", breached["detector"].nunique(),
                   help=", ".join(presentation.ordered_detectors(set(breached["detector"]))) or "none")
    alerts = queries.alerts(ctx.db_url, ctx.start_ms, ctx.model)
    cols[4].metric("Firing alerts", int(((alerts["version"] == ctx.version) & (alerts["state"] == ALERT_FIRING)).sum()))


def serving(ctx: ui.Context, latency: pd.DataFrame) -> None:
    st.header("Serving", divider="gray")
    model_level = latency[latency["feature"].isin(presentation.LATENCY_TOTAL)]
    parts = latency[~latency["feature"].isin(presentation.LATENCY_TOTAL)]
    names = set(model_level["metric"])
    quantiles = {q: presentation.pick_metric(names, presentation.HEADLINE_METRICS[q]) for q in presentation.LATENCY_QUANTILES}
    left, right = st.columns([3, 2])
    with left:
        st.markdown("**Latency** (worst window per point) against the p99 SLO")
        rows = model_level[model_level["metric"].isin([m for m in quantiles.values() if m])]
        if rows.empty:
            st.caption("No latency results in this range.")
        else:
            rename = {m: q for q, m in quantiles.items() if m}
            series = pd.DataFrame({"time": rows["start"], "quantile": rows["metric"].map(rename),
                                   "value": rows["max_value"]})
            p99 = rows[rows["metric"] == quantiles["p99"]]["threshold"].dropna()
            st.altair_chart(charts.latency_chart(series, float(p99.max()) if not p99.empty else None, ctx.span_ms),
                            width="stretch")
    with right:
        traffic = [m for key in (QPS, CONCURRENCY) if (m := presentation.pick_metric(names, presentation.HEADLINE_METRICS[key]))]
        rows = model_level[model_level["metric"].isin(traffic)]
        st.markdown("**Traffic**: requests per second and requests in flight")
        if rows.empty:
            st.caption("No traffic results in this range.")
        else:
            series = pd.DataFrame({"time": rows["start"], "series": rows["metric"], "value": rows["mean_value"]})
            st.altair_chart(charts.multi_series(series, None, ctx.span_ms, height=220), width="stretch")

    per_window, batch, problems, ages = serving_from_states(ctx.db_url, ctx.model, ctx.version, ctx.start_ms,
                                                            ctx.end_ms)
    for problem in problems:
        st.warning(f"Skipped an unreadable window state: {problem}")
    p99 = presentation.pick_metric(set(parts["metric"]), presentation.HEADLINE_METRICS["p99"])
    cols = st.columns(4 if p99 else 3)
    with cols[0]:
        error = presentation.pick_metric(names, presentation.HEADLINE_METRICS[ERROR_RATE])
        rows = model_level[model_level["metric"] == error] if error else model_level.iloc[0:0]
        if rows.empty:
            st.caption("No error-rate results in this range.")
        else:
            st.altair_chart(charts.metric_lines(_series(rows), "error rate", ctx.span_ms), width="stretch")
    with cols[1]:
        hits = per_window.dropna(subset=["cache_hit_rate"])
        if hits.empty:
            st.caption("No cache lookups recorded in this range.")
        else:
            series = pd.DataFrame({"time": presentation.to_time(hits["start"]), "value": hits["cache_hit_rate"]})
            st.altair_chart(charts.metric_lines(series, "cache-hit rate", ctx.span_ms), width="stretch")
    if p99:
        with cols[2]:
            rows = parts[parts["metric"] == p99]
            series = pd.DataFrame({"time": rows["start"], "series": rows["feature"], "value": rows["max_value"]})
            st.markdown("**p99 by part** of the request")
            st.altair_chart(charts.multi_series(series, "ms", ctx.span_ms, height=170), width="stretch")
    with cols[-1]:
        if batch.empty:
            st.caption("No batch sizes recorded in this range.")
        else:
            st.markdown("**Batch sizes** (per forward pass)")
            st.altair_chart(charts.batch_sizes(batch, height=130), width="stretch")
    if not ages.empty:
        st.markdown("**Feature freshness**: age of the served values (p50, p95, p99), from the events' `feature_ts`")
        st.altair_chart(charts.multi_series(ages.rename(columns={"age_s": "value"}), "seconds", ctx.span_ms,
                                            height=170), width="stretch")
    generated.generated_answers(ctx, latency, per_window)
    live_signals(ctx)
    shown = set(quantiles.values()) | set(traffic) | {error} | set(generated.RATES)
    others = sorted(names - shown)
    if others:
        metric_grid(ctx, model_level[model_level["metric"].isin(others)], others)


@st.cache_data(ttl=5, show_spinner=False, max_entries=16)
def _worker_signals(url: str, model: str) -> tuple[dict, str | None]:
    return worker_signals.fetch_signals(url, model)


def live_signals(ctx: ui.Context) -> None:
    """The worker's capacity, cost and GPU figures now (its /metrics; absent figures are not drawn)."""
    from driftline.config import load_settings

    figures, problem = _worker_signals(worker_signals.metrics_url(load_settings()), ctx.model)
    st.markdown("**Worker now** (its /metrics): utilisation, replicas at the target, cost, GPU")
    if problem is not None or "utilization" not in figures:
        st.caption(problem or "The worker serves another model, or has measured no traffic yet.")
        return
    cols = st.columns(5)
    cols[0].metric("Utilisation", f"{figures['utilization']:.0%}",
                   help=f"target {figures.get('target_utilization', 0):.0%}; device {figures.get('device', '?')}")
    cols[1].metric("Replicas at target", f"{figures['recommended_replicas']:.2f}")
    cols[2].metric("Requests/s", f"{figures.get('arrival_rate', 0):.1f}")
    cost = figures.get("cost", {}).get(ctx.version)
    cols[3].metric("Cost / 1 000 predictions", f"{cost:.4g}" if cost is not None else "n/a",
                   help=None if cost is not None else "no [cost] price for this device kind, or no answers yet")
    if "gpu_utilization" in figures:
        cols[4].metric("GPU", f"{figures['gpu_utilization']:.0%}", help=(
            f"memory {figures.get('gpu_memory_used_bytes', 0) / 2**30:.1f} of "
            f"{figures.get('gpu_memory_total_bytes', 0) / 2**30:.1f} GiB"))
    else:
        cols[4].metric("GPU", "none", help="the worker exports no GPU figures (CPU, or NVML unavailable)")


def _series(rows: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"time": rows["start"], "value": rows["worst"], "threshold": rows["threshold"],
                         "breached": rows["breached"], "metric": rows["metric"]}).sort_values("time")


def metric_grid(ctx: ui.Context, rows: pd.DataFrame, metrics: list[str], per_row: int = 3) -> None:
    """One small chart per model-level metric: the worst value per bucket, its threshold, breaches in red."""
    for offset in range(0, len(metrics), per_row):
        cols = st.columns(per_row)
        for col, metric in zip(cols, metrics[offset:offset + per_row]):
            with col:
                st.altair_chart(charts.metric_lines(_series(rows[rows["metric"] == metric]), metric, ctx.span_ms),
                                width="stretch")


def detector_section(ctx: ui.Context, detector: str, rows: pd.DataFrame) -> None:
    st.header(presentation.detector_title(detector), divider="gray")
    per_feature = rows[rows["feature"] != ""]
    if per_feature["feature"].nunique() == 1:
        # One subject only (the prediction, say): lines say more than a one-row heatmap.
        subject = per_feature["feature"].iloc[0]
        rows = rows.assign(metric=[m if f == "" else f"{f} · {m}" for f, m in zip(rows["feature"], rows["metric"])],
                           feature="")
        per_feature = rows.iloc[0:0]
        st.caption(f"Results for `{subject}`.")
    if not per_feature.empty:
        metrics = sorted(per_feature["metric"].unique())
        choice = st.segmented_control("Colour by", [WORST] + metrics, default=WORST, key=f"colour_{detector}",
                                      label_visibility="collapsed") if len(metrics) > 1 else WORST
        cells = scores.feature_heatmap(per_feature, None if choice in (None, WORST) else choice)
        order = scores.feature_order(cells)
        bucket_ms = int(rows["end"].iloc[0].timestamp() * 1000 - rows["start"].iloc[0].timestamp() * 1000)
        cells = presentation.with_bucket_times(cells, bucket_ms)
        st.altair_chart(charts.score_heatmap(cells, order, ctx.span_ms), width="stretch")
        troubled = [f for f in order if cells.loc[cells["feature"] == f, "breached"].max() > 0]
        if troubled:
            st.markdown("Breached in this range: " + ", ".join(f"`{f}`" for f in troubled))
            st.page_link("views/feature.py", label=f"Drill into {troubled[0]}", icon=":material/query_stats:",
                         query_params={"model": ctx.model, "version": ctx.version, "range": ctx.range_key,
                                       "feature": troubled[0]})
        else:
            st.caption("Nothing breached its threshold in this range.")
    model_level = rows[rows["feature"] == ""]
    if not model_level.empty:
        metric_grid(ctx, model_level, sorted(model_level["metric"].unique()))


def embedding_verdicts(ctx: ui.Context, segment: str = "") -> None:
    """Every test behind each embedding's verdict in the newest window, and the clusters that moved most."""
    rows = queries.newest_details(ctx.db_url, ctx.model, ctx.version, EMBEDDING_DRIFT, ctx.start_ms, ctx.end_ms,
                                  segment)
    if rows.empty:
        return
    start, end = int(rows["window_start_ms"].iloc[0]), int(rows["window_end_ms"].iloc[0])
    st.markdown(f"**Newest window** ({ui.window_label(start, end)}): the tests behind each embedding's verdict")
    for name, breached, details in zip(rows["feature"], rows["breached"], rows["details"]):
        details = details or {}
        tests = embeddings.embedding_tests(details)
        verdict = "drift" if breached else "no drift"
        size = f"{int(details.get('rows') or 0):,} vectors of dimension {details.get('dimension', '?')}"
        st.caption(f"`{name}`: {verdict}, {size}" + (f" ({details['reason']})" if details.get("reason") else ""))
        if not tests.empty:
            st.dataframe(tests, hide_index=True, width="stretch", column_config={
                "value": st.column_config.NumberColumn(format="%.4g"),
                "line": st.column_config.NumberColumn(format="%.4g"),
                "p-value": st.column_config.NumberColumn(format="%.3g")})
        moved = embeddings.moved_clusters(details)
        if not moved.empty:
            st.dataframe(moved, hide_index=True, width="stretch", column_config={
                "window share": st.column_config.NumberColumn(format="%.3f"),
                "training share": st.column_config.NumberColumn(format="%.3f"),
                "change": st.column_config.NumberColumn(format="%+.3f")})


def estimated_section(ctx: ui.Context, segment: str = "") -> None:
    """Estimated quality (before labels) per window with its band, realized beside it once labels joined."""
    st.header(presentation.detector_title(ESTIMATED_QUALITY), divider="gray")
    rows = queries.estimated_quality(ctx.db_url, ctx.model, ctx.version, ctx.start_ms, ctx.end_ms, segment)
    if rows.empty:
        st.caption("No estimates in this range.")
        return
    st.caption("Blue: estimated from the window's scores and the training calibration (CBPE), shaded: its band; "
               "orange: realized once labels joined; dashed red: the alert level (training value − margin), "
               "breached when the band's top lies below it. A realized value outside the band means labels no "
               "longer follow the training calibration (concept drift).")
    rows = rows.assign(time=presentation.to_time(rows["window_start_ms"]), breached=rows["breached"].astype(int))
    metrics = [m for m in ESTIMATED_METRICS if m in set(rows["metric"])]
    per_row = 3
    for offset in range(0, len(metrics), per_row):
        cols = st.columns(per_row)
        for col, metric in zip(cols, metrics[offset:offset + per_row]):
            with col:
                series = rows[rows["metric"] == metric][["time", "value", "lower", "upper", "realized", "threshold",
                                                         "breached"]]
                st.altair_chart(charts.estimate_band(series, metric, ctx.span_ms), width="stretch")
    untrusted = int(rows.loc[rows["metric"] == metrics[0], "insufficient"].sum()) if metrics else 0
    if untrusted:
        st.caption(f"{untrusted} window(s) untrusted (too few rows, or scores outside the calibrated range): "
                   "drawn, never alerted on.")
    checks = rows[(rows["metric"] == ESTIMATION_INVALID) & ~rows["insufficient"]]
    if not checks.empty and bool(checks["breached"].iloc[-1]):  # the latest check: the estimates no longer hold
        run = checks["breached"].to_numpy()[::-1].argmin() if not checks["breached"].all() else len(checks)
        since = checks["time"].iloc[-run]
        st.warning(f"Estimates unreliable since {since:%Y-%m-%d %H:%M} UTC: once labels came, realized quality left "
                   "the estimates' bands more often than they allow (estimation_invalid); the relation between "
                   "inputs and outcome has likely changed. Read the estimates after it as unreliable.")


def versions_section(ctx: ui.Context, versions: pd.DataFrame) -> None:
    st.header("Versions", divider="gray")
    events = queries.alias_events(ctx.db_url, ctx.model)
    own = versions[versions["model"] == ctx.model]
    left, right = st.columns([3, 2])
    with left:
        st.markdown("**Production version history** (promote, retrain, rollback)")
        if events.empty:
            st.caption("The production alias has never been set for this model.")
        else:
            span = int((events["at"].max() - events["at"].min()).total_seconds() * 1000)
            st.altair_chart(charts.alias_timeline(events, span), width="stretch")
            st.dataframe(events[["at", "action", "version", "previous_version", "reason"]], hide_index=True,
                         column_config={"at": st.column_config.DatetimeColumn("at (UTC)", format="YYYY-MM-DD HH:mm")})
    with right:
        st.markdown("**Training metrics by version** (solid: production)")
        metrics = [{"version": v, "metric": k, "value": float(x), "production": bool(p)}
                   for v, p, m in zip(own["version"], own["production"], own["metrics"])
                   for k, x in (m or {}).items() if isinstance(x, (int, float)) and not isinstance(x, bool)
                   and k not in ("rows", "seed", "epochs", "train_rows", "holdout_rows", "train_seconds")]
        if metrics:
            frame = pd.DataFrame(metrics)
            keep = frame.groupby("metric")["version"].nunique().sort_values(ascending=False).index[:3]
            st.altair_chart(charts.version_metrics(frame[frame["metric"].isin(keep)]), width="stretch")
        else:
            st.caption("No training metrics recorded.")


def body(ctx: ui.Context) -> None:
    if ui.needs_model(ctx):
        return
    versions = queries.model_versions(ctx.db_url, ctx.start_ms, ctx.end_ms)
    window_ms = queries.window_length_ms(ctx.db_url, ctx.model)
    first = queries.first_window_ms(ctx.db_url, ctx.model, ctx.version, ctx.start_ms, ctx.end_ms)
    bucket_ms = presentation.bucket_size_ms(first or ctx.start_ms, ctx.end_ms, window_ms)
    segment = ui.segment_filter(ctx)
    buckets = queries.detector_buckets(ctx.db_url, queries.BucketQuery(
        ctx.model, ctx.version, first or ctx.start_ms, ctx.end_ms, bucket_ms, segment=segment))
    scored = presentation.with_bucket_times(scores.scored(buckets), bucket_ms)
    header(ctx, scored, versions)
    ui.quarantine_notice(ctx, ctx.model, ctx.version)
    if scored.empty:
        st.info(f"No evaluated windows for v{ctx.version} in {ctx.range_label.lower()}. Pick a longer range, "
                "or check that the collector and the scheduler are running.")
    else:
        if window_ms and bucket_ms > window_ms:
            st.caption(f"Each point and cell covers {bucket_ms // window_ms} windows of {window_ms // 1000} s "
                       "and shows the worst of them.")
        serving(ctx, scored[scored["detector"] == LATENCY])
        for detector in presentation.ordered_detectors(set(scored["detector"]) - {LATENCY}):
            if detector == ESTIMATED_QUALITY:
                estimated_section(ctx, segment)
                continue
            detector_section(ctx, detector, scored[scored["detector"] == detector])
            if detector == EMBEDDING_DRIFT:
                embedding_verdicts(ctx, segment)
        if MODEL_QUALITY not in set(scored["detector"]):
            st.header(presentation.detector_title(MODEL_QUALITY), divider="gray")
            st.caption("No labels joined in this range yet: model quality appears once labels arrive on the "
                       "`driftline.labels` topic.")
    versions_section(ctx, versions)


ui.page(body)
