"""Feature drill-down: one feature in one window against the training baseline: histogram and ECDF
(or category shares), missing and out-of-range counts, every statistic with its threshold and the
decision, and the feature's history over the range."""
from __future__ import annotations

import math
from typing import Any

import pandas as pd
import streamlit as st

from driftline.dashboard import charts, presentation, distributions, queries, scores, states, ui
from driftline.vocabulary import DATA_DRIFT, INSUFFICIENT_DATA, LATENCY, NUMERIC, PREDICTION_DRIFT

PREDICTION = "__prediction__"


def feature_label(name: str) -> str:
    return "model prediction" if name == PREDICTION else name


@st.cache_data(ttl=queries.TTL, show_spinner=False, max_entries=64)
def feature_distributions(db_url: str, model: str, version: str, window_start_ms: int, feature: str) -> dict[str, Any]:
    """Everything the charts need about one feature in one window (merged over partitions)."""
    from driftline.baseline import Baseline, NumericProfile

    out: dict[str, Any] = {"problems": [], "kind": None}
    summary = queries.baseline_summary(db_url, model, version)
    if summary is None:
        out["problems"].append(f"v{version} has no baseline: register one with `driftline baseline` or "
                               "`driftline train`.")
        return out
    try:
        baseline = Baseline.from_dict(summary)
    except Exception as exc:  # noqa: BLE001 - a malformed stored baseline is reported, not raised
        out["problems"].append(f"the stored baseline cannot be read: {exc}")
        return out
    state, problems = states.merge_states(queries.window_state_blobs(db_url, model, version, window_start_ms),
                                          baseline)
    out["problems"] += problems
    if state is None:
        out["problems"].append("no readable window state for this window")
        return out
    profile = baseline.prediction if feature == PREDICTION else baseline.profiles.get(feature)
    window = state.prediction if feature == PREDICTION else state.features.get(feature)
    if profile is None or window is None:
        out["problems"].append(f"{feature_label(feature)} is not in both the baseline and the window")
        return out
    rows = state.events
    out.update(kind=profile.kind, rows=rows, nulls=window.nulls, missing_rate=window.nulls / rows if rows else None,
               baseline_missing_rate=profile.null_rate, value_types=dict(window.value_types),
               baseline_rows=profile.rows)
    if isinstance(profile, NumericProfile):
        out.update(below_min=window.below_min, above_max=window.above_max, mean=window.mean, std=window.std,
                   baseline_mean=profile.mean, baseline_std=profile.std, baseline_min=profile.min,
                   baseline_max=profile.max)
        if window.counts is None or window.binned == 0:
            out["problems"].append("the window's values were not binned on this baseline (counted before the "
                                   "baseline existed), so there is no distribution to draw")
            return out
        low = min(v for v in (profile.min, window.min) if v is not None and math.isfinite(v))
        high = max(v for v in (profile.max, window.max) if v is not None and math.isfinite(v))
        out["histogram"] = distributions.numeric_histogram(profile.edges, profile.counts, window.counts, low, high)
        out["ecdf"], out["gap"] = distributions.numeric_ecdf(profile.edges, profile.counts, window.counts)
    else:
        out["shares"] = distributions.category_shares(profile.counts, window.categories)
        unseen = sum(c for k, c in window.categories.items() if k not in profile.counts)
        out["unseen"] = unseen
    return out


def window_options(windows: pd.DataFrame, drift: pd.DataFrame) -> dict[int, str]:
    drifted = drift.groupby("window_start_ms")["feature"].apply(lambda f: sorted(set(f)))
    labels = {}
    for start, end, events in zip(windows["window_start_ms"], windows["window_end_ms"], windows["events"]):
        names = drifted.get(start, [])
        tail = f" · drift: {', '.join(names[:3])}{'…' if len(names) > 3 else ''}" if names else ""
        labels[int(start)] = f"{ui.window_label(start, end)} · {events:,} events{tail}"
    return labels


def decision(results: pd.DataFrame, label: str) -> None:
    breached = results[results["breached"]]
    insufficient = [d for d in results["details"] if isinstance(d, dict) and d.get(INSUFFICIENT_DATA)]
    if results.empty:
        st.info(f"No detector results for {label} in this window.")
    elif breached.empty and len(insufficient) == len(results):
        st.info(f"**Not enough data** to judge {label} in this window: {insufficient[0].get('reason', '')}")
    elif breached.empty:
        st.success(f"**No drift or breach** for {label} in this window: every verdict is on the safe side "
                   "of its threshold.")
    else:
        reasons = "; ".join(
            f"{r.detector} {r.metric} = {presentation.fmt(r.value)} (threshold {presentation.fmt(r.threshold)})"
            + (f": {r.details['reason']}" if isinstance(r.details, dict) and r.details.get("reason") else "")
            for r in breached.itertuples())
        st.error(f"**Breached** for {label}: {reasons}")


def statistics_table(results: pd.DataFrame, directions: dict) -> None:
    table = presentation.statistics_rows(results, directions)
    st.dataframe(table, hide_index=True, width="stretch",
                 column_config={"value": st.column_config.NumberColumn(format="%.4g"),
                                "p_value": st.column_config.NumberColumn("p-value", format="%.3g"),
                                "threshold": st.column_config.NumberColumn(format="%.4g"),
                                "flagged": st.column_config.CheckboxColumn(
                                    "breached / flagged", help="a result's verdict; a test's own flag"),
                                "score": st.column_config.ProgressColumn(
                                    "against threshold", min_value=0, max_value=2, format="%.2f",
                                    help="1 = at the threshold; past 1 is on the bad side")})


def distribution_charts(data: dict[str, Any], label: str) -> None:
    for problem in data["problems"]:
        st.warning(problem)
    if data["kind"] is None:
        return
    cols = st.columns(4)
    cols[0].metric("Rows in window", f"{data['rows']:,}")
    change = None if data["missing_rate"] is None else data["missing_rate"] - data["baseline_missing_rate"]
    cols[1].metric("Missing", f"{data['missing_rate']:.1%}" if data["missing_rate"] is not None else "—",
                   delta=None if change is None or abs(change) < 0.0005 else f"{change:+.1%} vs training",
                   delta_color="inverse")
    if data["kind"] == NUMERIC:
        cols[2].metric("Mean", presentation.fmt(data["mean"]), delta=f"{presentation.fmt(data['baseline_mean'])} in training",
                       delta_color="off", delta_arrow="off")
        out = data["below_min"] + data["above_max"]
        cols[3].metric("Outside training range", f"{out:,}",
                       help=f"below {presentation.fmt(data['baseline_min'])}: {data['below_min']}, "
                            f"above {presentation.fmt(data['baseline_max'])}: {data['above_max']}")
        if "histogram" in data:
            left, right = st.columns(2)
            with left:
                st.markdown("**Histogram**: baseline vs window (density on the baseline's quantile bins)")
                st.altair_chart(charts.histogram(data["histogram"], label), width="stretch")
            with right:
                st.markdown("**ECDF**: the red bar is the largest gap (the KS distance)")
                st.altair_chart(charts.ecdf(data["ecdf"], data["gap"], label), width="stretch")
    else:
        cols[2].metric("Categories in window", int((data["shares"]["source"] == "window").sum()))
        cols[3].metric("Unseen in training", f"{data['unseen']:,}")
        st.markdown("**Category shares**: baseline vs window (outlined red: never seen in training)")
        st.altair_chart(charts.category_bars(data["shares"]), width="stretch")
    types = data["value_types"]
    if len(types) > 1:
        st.caption("Value types received: " + ", ".join(f"{k} {v:,}" for k, v in types.items()))


def history(ctx: ui.Context, scored: pd.DataFrame, detector_feature: pd.DataFrame, label: str) -> None:
    st.subheader(f"{label} over {ctx.range_label.lower()}")
    rows = detector_feature.dropna(subset=["score"])
    if rows.empty:
        st.caption("No thresholded results for this feature in the range.")
        return
    series = pd.DataFrame({"time": rows["start"], "series": rows["detector"] + " · " + rows["metric"],
                           "value": rows["score"]})
    chart = charts.multi_series(series, "value / threshold", ctx.span_ms, height=200)
    rule = charts.alt.Chart(pd.DataFrame({"y": [1.0]})).mark_rule(color="#c62828", strokeDash=[5, 4]).encode(y="y:Q")
    st.altair_chart(chart + rule, width="stretch")


def evidence(ctx: ui.Context, detector: str, feature: str, label: str) -> None:
    """The feature's sequential evidence building up window by window, against the line it pages at."""
    rows = queries.evidence_history(ctx.db_url, ctx.model, ctx.version, detector, feature, ctx.start_ms, ctx.end_ms)
    if rows.empty:
        return
    st.subheader(f"Evidence of drift on {label}")
    series = rows.assign(time=presentation.to_time(rows["window_start_ms"]))
    st.altair_chart(charts.evidence_chart(series, ctx.span_ms), width="stretch")
    st.caption("The sequential policy pages when the e-value reaches its line (set by `[alerts] "
               "false_pages_per_model_per_month`) while its effect, averaged over the run of evidence, clears its floor; evidence restarts "
               "once the drift ends.")


def body(ctx: ui.Context) -> None:
    if ui.needs_model(ctx):
        return
    st.title(f"Feature drill-down · {ctx.model} v{ctx.version}")
    windows = queries.windows(ctx.db_url, ctx.model, ctx.version, ctx.start_ms, ctx.end_ms)
    if windows.empty:
        st.info(f"No evaluated windows for v{ctx.version} in {ctx.range_label.lower()}.")
        return
    window_ms = queries.window_length_ms(ctx.db_url, ctx.model)
    first = queries.first_window_ms(ctx.db_url, ctx.model, ctx.version, ctx.start_ms, ctx.end_ms) or ctx.start_ms
    bucket_ms = presentation.bucket_size_ms(first, ctx.end_ms, window_ms)
    segment = ui.segment_filter(ctx)
    buckets = queries.detector_buckets(ctx.db_url, queries.BucketQuery(ctx.model, ctx.version, first, ctx.end_ms,
                                                                       bucket_ms, segment=segment))
    scored = presentation.with_bucket_times(scores.scored(buckets), bucket_ms)
    drift = queries.breached_features(ctx.db_url, ctx.model, ctx.version, ctx.start_ms, ctx.end_ms, segment=segment)
    labels = window_options(windows, drift)
    starts = list(labels)
    if st.session_state.get("window") is not None and int(st.session_state["window"]) not in labels:
        st.session_state.pop("window")
    pick_window, pick_feature = st.columns([3, 2])
    window = pick_window.selectbox("Window", starts, format_func=labels.get, key="window", bind="query-params")

    results = queries.window_results(ctx.db_url, ctx.model, ctx.version, int(window), segment)
    summary = queries.baseline_summary(ctx.db_url, ctx.model, ctx.version) or {}
    names = [f["name"] for f in summary.get("features", [])]
    features = results[(results["feature"] != "") & ~results["detector"].isin(presentation.NOT_FEATURES)]
    names += sorted(set(features["feature"]) - set(names))
    if summary.get("prediction") is not None:
        names.append(PREDICTION)
    directions = scores.worse_direction(buckets)
    worst = {}
    for row in results.itertuples():
        if row.detector == LATENCY:
            continue
        key = PREDICTION if row.detector == PREDICTION_DRIFT else row.feature
        score = scores.relative_score(row.value, row.threshold, directions.get((row.detector, row.metric),
                                                                               scores.HIGHER), row.metric)
        if key and not math.isnan(score):
            worst[key] = max(worst.get(key, 0.0), score + (10.0 if row.breached else 0.0))
    names.sort(key=lambda n: -worst.get(n, -1.0))
    if not names:
        st.info("This version has no baseline features and no per-feature results.")
        return
    if st.session_state.get("feature") not in names:
        st.session_state.pop("feature", None)
    feature = pick_feature.selectbox("Feature (most breached first)", names, key="feature", bind="query-params",
                                     format_func=lambda n: feature_label(n) + ("  ⚠" if worst.get(n, 0) >= 10 else ""))
    label = feature_label(feature)
    own = (results[results["detector"] == PREDICTION_DRIFT] if feature == PREDICTION
           else results[(results["feature"] == feature) & ~results["detector"].isin(presentation.NOT_FEATURES)])
    decision(own, label)
    distribution_charts(feature_distributions(ctx.db_url, ctx.model, ctx.version, int(window), feature), label)
    st.subheader("Statistics and decision")
    if own.empty:
        st.caption("No detector results for this feature in this window.")
    else:
        statistics_table(own, directions)
    mine = (scored[scored["detector"] == PREDICTION_DRIFT] if feature == PREDICTION
            else scored[(scored["feature"] == feature) & ~scored["detector"].isin(presentation.NOT_FEATURES)])
    history(ctx, scored, mine, label)
    evidence(ctx, PREDICTION_DRIFT if feature == PREDICTION else DATA_DRIFT,
             "prediction" if feature == PREDICTION else feature, label)


ui.page(body)
