"""Overview: every model version's health at a glance, the ones needing attention first, or how to get started.

At fleet size (driftline/overview_defaults.py): every version is one row of a ranked table (dashboard/attention.py)
read in a few grouped queries; only the first OVERVIEW_CARDS get a card and OVERVIEW_CHART_VERSIONS a line in the
fleet charts; the search box narrows all three to the models whose name holds the text typed.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from driftline import defaults
from driftline.config import load_settings
from driftline.dashboard import attention, charts, presentation, queries, ui
from driftline.vocabulary import DATA_DRIFT, LATENCY

GET_STARTED = """\
# everything at once: broker, store, a trained model, worker, collector, scheduler, this dashboard, demo traffic
driftline up --scenario covariate_shift

# or step by step, each in its own terminal
driftline db upgrade                                   # create the store
driftline train                                        # train a model version and register its baseline
driftline broker                                       # the embedded Kafka-compatible broker
driftline worker                                       # serve the model; every request is logged to Kafka
driftline collector                                    # fold the logged events into windows
driftline scheduler                                    # evaluate closed windows, raise alerts
driftline replay --scenario covariate_shift --rate 50  # send traffic

# a model served elsewhere: register its baseline from the training data
driftline baseline --model my-model --version 1 --data train.parquet
"""


def get_started() -> None:
    with st.container(border=True):
        st.subheader("Get started")
        st.markdown("The store holds no models yet. Train one and send it traffic, and this page fills in: "
                    "health per model version, drift per feature, latency against its SLO, alerts and "
                    "retraining.")
        st.code(GET_STARTED, language="bash")


def version_card(ctx: ui.Context, row: pd.Series, activity: pd.Series | None, latest: pd.DataFrame) -> None:
    head = presentation.headline(latest)
    firing, pending = int(row["firing"]), int(row["pending"])
    has_windows = activity is not None and int(activity["windows"]) > 0
    label, colour = presentation.health(firing, pending, head, has_windows)
    with st.container(border=True):
        title, badge = st.columns([3, 2], vertical_alignment="center")
        title.markdown(f"#### {row['model']} · v{row['version']}"
                       + (" · :blue[production]" if row["production"] else ""))
        badge.badge(label, color=colour)
        cols = st.columns(5)
        if head.p99 is not None:
            delta = None if head.p99_threshold is None else head.p99 - head.p99_threshold
            cols[0].metric("p99 latency", f"{head.p99:.1f} ms",
                           delta=None if delta is None else f"{delta:+.1f} ms vs SLO {head.p99_threshold:g}",
                           delta_color="inverse")
        else:
            cols[0].metric("p99 latency", "—")
        cols[1].metric("QPS", presentation.fmt(head.qps))
        cols[2].metric("Error rate", "—" if head.error_rate is None else f"{head.error_rate:.2%}")
        drifted = head.drifted_features
        cols[3].metric("Drifted features", len(drifted) if head.window_start_ms is not None else "—",
                       help="in the newest evaluated window: " + (", ".join(drifted) or "none"))
        last = activity["last_update"] if activity is not None else None
        cols[4].metric("Last event", presentation.fmt_ago(last, ctx.now_ms),
                       help=f"{int(activity['events']) if activity is not None else 0:,} events in "
                            f"{ctx.range_label.lower()}")
        if drifted:
            st.markdown("Drifting now: " + ", ".join(f"`{f}`" for f in drifted))
        st.page_link("views/model.py", label=f"Open {row['model']} v{row['version']}", icon=":material/arrow_forward:",
                     query_params={"model": row["model"], "version": row["version"], "range": ctx.range_key})


def fleet_charts(ctx: ui.Context, chosen: list[tuple[str, str]] | None) -> None:
    """p99 latency and drifted features per window of the `chosen` versions (None: every version, one query)."""
    first = queries.first_window_ms(ctx.db_url, None, None, ctx.start_ms, ctx.end_ms) or ctx.start_ms
    bucket = presentation.bucket_size_ms(first, ctx.end_ms, queries.window_length_ms(ctx.db_url))
    if chosen is None:
        latency = queries.detector_buckets(ctx.db_url, queries.BucketQuery(
            None, None, first, ctx.end_ms, bucket, detectors=(LATENCY,), metrics=presentation.HEADLINE_METRICS["p99"]))
        drift = queries.detector_buckets(ctx.db_url, queries.BucketQuery(None, None, first, ctx.end_ms, bucket,
                                                                         detectors=(DATA_DRIFT,)))
    else:  # one read per version for both charts: each probes that version's windows only
        both = pd.concat([queries.detector_buckets(ctx.db_url, queries.BucketQuery(
            m, v, first, ctx.end_ms, bucket, detectors=(LATENCY, DATA_DRIFT))) for m, v in chosen], ignore_index=True)
        latency = both[(both["detector"] == LATENCY) & both["metric"].isin(presentation.HEADLINE_METRICS["p99"])]
        drift = both[both["detector"] == DATA_DRIFT]
    if chosen is not None:
        st.caption(f"Charts: the {len(chosen)} versions first in the ranking below.")
    left, right = st.columns(2)
    with left:
        st.markdown("**p99 latency by version** (dashed: its SLO)")
        latency = latency[latency["feature"].isin(presentation.LATENCY_TOTAL)]
        if latency.empty:
            st.caption("No latency results in this range.")
        else:
            series = pd.DataFrame({"time": ui.time_col(latency),
                                   "series": latency["model"] + " v" + latency["version"],
                                   "value": latency["max_value"], "threshold": latency["threshold"]})
            chart = charts.multi_series(series, "ms", ctx.span_ms)
            slo = series.dropna(subset=["threshold"])
            if not slo.empty:
                chart = chart + charts.alt.Chart(slo).mark_line(strokeDash=[5, 4], opacity=0.6).encode(
                    x=charts._time("time:T", ctx.span_ms), y="threshold:Q", color="series:N")
            st.altair_chart(chart, width="stretch")
    with right:
        st.markdown("**Drifted features per window**")
        if drift.empty:
            st.caption("No drift results in this range.")
        else:
            counts = (drift[(drift["breached"] > 0) & (drift["feature"] != "")].groupby(["model", "version", "bucket_ms"])["feature"].nunique()
                      .rename("value").reset_index())
            every = drift[["model", "version", "bucket_ms"]].drop_duplicates()
            counts = every.merge(counts, how="left").fillna({"value": 0})
            series = pd.DataFrame({"time": ui.time_col(counts), "series": counts["model"] + " v" + counts["version"],
                                   "value": counts["value"]})
            st.altair_chart(charts.multi_series(series, "features", ctx.span_ms), width="stretch")


def progress_notice(ctx: ui.Context) -> None:
    """How far results are complete; a warning when a collector partition holds the windows back."""
    # "now" rounded to the cache TTL keys the cached read; the lags are measured from the real now
    found = queries.judging_progress(ctx.db_url, ctx.end_ms, load_settings().idle_partition_seconds * 1000)
    line, held = presentation.progress_line(found["judged"], found["watermark_ms"], found["watermarks"], ctx.now_ms)
    if held:
        st.warning(line + ". Windows wait for these partitions; `driftline status` lists them.",
                   icon=":material/hourglass_top:")
    else:
        st.caption(line)


def body(ctx: ui.Context) -> None:
    st.title("Overview")
    versions = queries.model_versions(ctx.db_url, ctx.start_ms, ctx.end_ms)
    if versions.empty:
        get_started()
        return
    activity = queries.version_activity(ctx.db_url, ctx.start_ms, ctx.end_ms)
    counts = queries.alert_counts(ctx.db_url)

    metrics = st.columns(5)
    metrics[0].metric("Models", versions["model"].nunique())
    metrics[1].metric("Versions with traffic", int((activity["windows"] > 0).sum()) if not activity.empty else 0)
    metrics[2].metric("Firing alerts", int(counts["firing"].sum()))
    metrics[3].metric(f"Events ({ctx.range_key})", f"{int(activity['events'].sum()) if not activity.empty else 0:,}")
    metrics[4].metric(f"Dead letters ({ctx.range_key})", queries.dead_letter_count(ctx.db_url, ctx.start_ms))
    progress_notice(ctx)
    ui.quarantine_notice(ctx)

    active = set(zip(activity["model"], activity["version"])) | set(zip(counts["model"], counts["version"]))
    shown = versions[[p or (m, v) in active for m, v, p in
                      zip(versions["model"], versions["version"], versions["production"])]]
    ranked = attention.ranking(shown, activity, queries.version_health(ctx.db_url, ctx.start_ms, ctx.end_ms),
                               counts)
    search = st.text_input("Search models", key="search", placeholder="part of a model's name",
                           help="Shows only the models whose name holds this text (any case).")
    found = attention.matching(ranked, search)
    if found.empty:
        st.info(f"No model with traffic in this range has “{search.strip()}” in its name.")
    else:
        pairs = list(zip(found["model"], found["version"]))
        fleet_charts(ctx, None if len(ranked) <= defaults.OVERVIEW_CHART_VERSIONS and not search
                     else pairs[:defaults.OVERVIEW_CHART_VERSIONS])
        if len(found) > defaults.OVERVIEW_CARDS:
            ranked_table(found)
        top = found.head(defaults.OVERVIEW_CARDS)
        latest = queries.latest_results(ctx.db_url, ctx.start_ms, ctx.end_ms, tuple(pairs[:len(top)]))
        for _, row in top.iterrows():
            match = activity[(activity["model"] == row["model"]) & (activity["version"] == row["version"])]
            own_latest = latest[(latest["model"] == row["model"]) & (latest["version"] == row["version"])]
            version_card(ctx, row, match.iloc[0] if not match.empty else None, own_latest)
    idle = versions.drop(shown.index)
    if not idle.empty:
        names = [f"{m} v{v}" for m, v in zip(idle["model"], idle["version"])]
        more = len(names) - defaults.OVERVIEW_CARDS * 2
        st.caption("Registered, no traffic in this range: " + ", ".join(names[:defaults.OVERVIEW_CARDS * 2])
                   + (f" and {more} more" if more > 0 else ""))


def ranked_table(found: pd.DataFrame) -> None:
    """Every matching version in the ranking's order, those first that need attention (cards follow for the first)."""
    st.markdown(f"**{len(found):,} model versions, those needing attention first** "
                f"(cards below for the first {defaults.OVERVIEW_CARDS})")
    table = pd.DataFrame({
        "model": found["model"], "version": found["version"], "production": found["production"],
        "status": found["status"], "firing": found["firing"], "drifted features": found["drifted_features"],
        "estimate less threshold": found["quality_margin"], "events": found["events"],
        "last event": found["last_update"]})
    st.dataframe(table, hide_index=True, height=360, key="ranking",
                 column_config={"estimate less threshold": st.column_config.NumberColumn(format="%+.3f")})


ui.page(body)
