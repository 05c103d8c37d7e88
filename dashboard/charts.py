"""Altair charts of the dashboard: frames in, `alt.Chart` out (no queries, no Streamlit).

Times are drawn in UTC (the store's clock); colours mean the same everywhere: green
is fine, amber is near the threshold, red is past it; the baseline is grey-blue and the
window orange in every distribution chart.
"""
from __future__ import annotations

import altair as alt
import pandas as pd

from driftline.vocabulary import (ALERT_FIRING, ALERT_PENDING, ALERT_RESOLVED, NOTIFICATION_FAILED,
                                  NOTIFICATION_PENDING, NOTIFICATION_SENDING, NOTIFICATION_SENT)

BASELINE_COLOUR = "#5b7fa6"
WINDOW_COLOUR = "#e8772e"
SOURCE_SCALE = alt.Scale(domain=["baseline", "window"], range=[BASELINE_COLOUR, WINDOW_COLOUR])
# 0 = far from the threshold, 1 = at it, 2 and more = twice past it.
SCORE_SCALE = alt.Scale(domain=[0, 0.5, 1, 2], range=["#e8f5e9", "#a5d6a7", "#ffb74d", "#c62828"], clamp=True)
STATE_SCALE = alt.Scale(domain=[ALERT_FIRING, ALERT_PENDING, ALERT_RESOLVED], range=["#c62828", "#f9a825", "#2e7d32"])
# notifications' states, and retraining requests' (requested, running, succeeded, failed, rejected)
STATUS_COLOURS = {NOTIFICATION_SENT: "#2e7d32", "succeeded": "#2e7d32", NOTIFICATION_PENDING: "#f9a825",
                  NOTIFICATION_SENDING: "#fb8c00", "running": "#fb8c00", "requested": "#90a4ae",
                  NOTIFICATION_FAILED: "#c62828", "rejected": "#6d4c41"}


def _status_scale(values) -> alt.Scale:
    """Colours for the statuses present (a legend of only what is drawn); unknown ones grey."""
    domain = sorted(set(values), key=lambda v: (list(STATUS_COLOURS).index(v) if v in STATUS_COLOURS else 99, v))
    return alt.Scale(domain=domain, range=[STATUS_COLOURS.get(v, "#9e9e9e") for v in domain])
ACTION_SCALE = alt.Scale(domain=["promote", "retrain", "rollback"], range=["#1565c0", "#2e7d32", "#c62828"])
# Ticks at least a minute apart: a few minutes of windows would otherwise get half-minute ticks, labelled twice.
TIME_AXIS = alt.Axis(format="%H:%M", labelAngle=0, title=None, tickMinStep=60_000)
DAY_TIME_AXIS = alt.Axis(format="%b %d %H:%M", labelAngle=0, title=None, tickMinStep=60_000)


def _time(field: str, span_ms: int | None = None, **kwargs) -> alt.X:
    axis = DAY_TIME_AXIS if span_ms is not None and span_ms > 86_400_000 else TIME_AXIS
    return alt.X(field, type="temporal", scale=alt.Scale(type="utc"), axis=axis, **kwargs)


def score_heatmap(cells: pd.DataFrame, features: list[str], span_ms: int, height_per_row: int = 22) -> alt.Chart:
    """Features x time buckets, coloured by the relative score (1 = at the threshold); breaches outlined.

    `cells`: feature, start, end, score, metric, worst, threshold, windows, breached.
    """
    base = alt.Chart(cells).encode(
        x=_time("start:T", span_ms), x2="end:T",
        y=alt.Y("feature:N", sort=features, title=None, axis=alt.Axis(labelLimit=180, labelOverlap=False)),
        tooltip=[alt.Tooltip("feature:N"), alt.Tooltip("start:T", title="from (UTC)", format="%b %d %H:%M"),
                 alt.Tooltip("metric:N", title="worst metric"), alt.Tooltip("worst:Q", title="value", format=".4g"),
                 alt.Tooltip("threshold:Q", format=".4g"), alt.Tooltip("score:Q", title="score (1 = threshold)",
                                                                       format=".2f"),
                 alt.Tooltip("breached:Q", title="windows breached"), alt.Tooltip("windows:Q")])
    fill = base.mark_rect().encode(color=alt.Color("score:Q", scale=SCORE_SCALE,
                                                   legend=alt.Legend(title="value / threshold", orient="right")))
    outline = base.transform_filter(alt.datum.breached > 0).mark_rect(fillOpacity=0, stroke="#7f0000",
                                                                      strokeWidth=1.2)
    return (fill + outline).properties(height=max(len(features), 1) * height_per_row + 40)


def metric_lines(series: pd.DataFrame, title: str, span_ms: int, height: int = 150) -> alt.Chart:
    """One metric over time (`time`, `value`, optional `threshold`, `breached`): line, threshold, breaches in red."""
    base = alt.Chart(series).encode(x=_time("time:T", span_ms))
    line = base.mark_line(point=alt.OverlayMarkDef(size=12), interpolate="monotone", color="#37474f").encode(
        y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=False)),
        tooltip=[alt.Tooltip("time:T", title="from (UTC)", format="%b %d %H:%M"),
                 alt.Tooltip("value:Q", format=".4g"), alt.Tooltip("threshold:Q", format=".4g")])
    layers = [line]
    if "threshold" in series and series["threshold"].notna().any():
        layers.append(base.mark_line(strokeDash=[5, 4], color="#c62828").encode(y="threshold:Q"))
    if "breached" in series and (series["breached"] > 0).any():
        layers.append(base.transform_filter(alt.datum.breached > 0).mark_point(color="#c62828", filled=True, size=40)
                      .encode(y="value:Q"))
    return alt.layer(*layers).properties(title=title, height=height)


def estimate_band(series: pd.DataFrame, title: str, span_ms: int, height: int = 170) -> alt.Chart:
    """Estimated (line, its band shaded) vs realized (points, once labels joined) over time, with the alert level.

    `series`: ``time``, ``value`` (estimate), ``lower``, ``upper``, ``realized``, ``threshold``, ``breached``.
    """
    base = alt.Chart(series).encode(x=_time("time:T", span_ms))
    tooltip = [alt.Tooltip("time:T", title="from (UTC)", format="%b %d %H:%M"),
               alt.Tooltip("value:Q", title="estimated", format=".3f"), alt.Tooltip("lower:Q", format=".3f"),
               alt.Tooltip("upper:Q", format=".3f"), alt.Tooltip("realized:Q", format=".3f")]
    layers = [base.mark_area(opacity=0.25, color="#1e88e5").encode(y=alt.Y("lower:Q", title=None,
                                                                           scale=alt.Scale(zero=False)), y2="upper:Q"),
              base.mark_line(color="#1565c0").encode(y="value:Q", tooltip=tooltip)]
    if series["realized"].notna().any():
        layers.append(base.transform_filter("isValid(datum.realized)").mark_line(
            color="#ef6c00", strokeDash=[2, 2], point=alt.OverlayMarkDef(size=14, color="#ef6c00"))
            .encode(y="realized:Q", tooltip=tooltip))
    if series["threshold"].notna().any():
        layers.append(base.mark_line(strokeDash=[5, 4], color="#c62828").encode(y="threshold:Q"))
    if (series["breached"] > 0).any():
        layers.append(base.transform_filter(alt.datum.breached > 0).mark_point(color="#c62828", filled=True, size=40)
                      .encode(y="upper:Q"))
    return alt.layer(*layers).properties(title=title, height=height)


def evidence_chart(series: pd.DataFrame, span_ms: int, height: int = 170) -> alt.Chart:
    """A stream's e-value over time (log scale) against its paging line; paging windows in red.

    `series`: ``time``, ``e_value``, ``line``, ``paging``."""
    series = series.assign(e_value=series["e_value"].clip(lower=1e-3, upper=1e300))
    base = alt.Chart(series).encode(x=_time("time:T", span_ms))
    tooltip = [alt.Tooltip("time:T", title="from (UTC)", format="%b %d %H:%M"),
               alt.Tooltip("e_value:Q", title="e-value", format=".3g"), alt.Tooltip("line:Q", title="paging line",
                                                                                   format=".3g")]
    layers = [base.mark_line(point=alt.OverlayMarkDef(size=12), color="#37474f").encode(
                  y=alt.Y("e_value:Q", title="evidence (e-value)", scale=alt.Scale(type="log")), tooltip=tooltip),
              base.mark_line(strokeDash=[5, 4], color="#c62828").encode(y="line:Q")]
    if series["paging"].any():
        layers.append(base.transform_filter(alt.datum.paging).mark_point(color="#c62828", filled=True, size=40)
                      .encode(y="e_value:Q"))
    return alt.layer(*layers).properties(title="Evidence against its paging line", height=height)


def latency_chart(series: pd.DataFrame, slo: float | None, span_ms: int, height: int = 220) -> alt.Chart:
    """p50/p95/p99 (`time`, `quantile`, `value`) against the SLO (dashed red rule)."""
    lines = alt.Chart(series).mark_line(interpolate="monotone").encode(
        x=_time("time:T", span_ms), y=alt.Y("value:Q", title="ms"),
        color=alt.Color("quantile:N", scale=alt.Scale(domain=["p50", "p95", "p99"],
                                                      range=["#90caf9", "#1e88e5", "#0d47a1"]),
                        legend=alt.Legend(title=None, orient="top")),
        tooltip=[alt.Tooltip("time:T", title="from (UTC)", format="%b %d %H:%M"), "quantile:N",
                 alt.Tooltip("value:Q", title="ms", format=".1f")])
    if slo is None:
        return lines.properties(height=height)
    rule = alt.Chart(pd.DataFrame({"slo": [slo], "label": [f"SLO p99 {slo:g} ms"]})).mark_rule(
        color="#c62828", strokeDash=[6, 4]).encode(y="slo:Q")
    text = alt.Chart(pd.DataFrame({"slo": [slo], "label": [f"SLO {slo:g} ms"]})).mark_text(
        align="left", dx=4, dy=-6, color="#c62828").encode(y="slo:Q", text="label:N", x=alt.value(0))
    return (lines + rule + text).properties(height=height)


def multi_series(series: pd.DataFrame, y_title: str | None, span_ms: int, height: int = 190,
                 percent: bool = False) -> alt.Chart:
    """Several named series over time (`time`, `series`, `value`)."""
    axis = alt.Axis(format="%") if percent else alt.Axis()
    return alt.Chart(series).mark_line(interpolate="monotone").encode(
        x=_time("time:T", span_ms), y=alt.Y("value:Q", title=y_title, axis=axis),
        color=alt.Color("series:N", legend=alt.Legend(title=None, orient="top")),
        tooltip=[alt.Tooltip("time:T", title="from (UTC)", format="%b %d %H:%M"), "series:N",
                 alt.Tooltip("value:Q", format=".3g")]).properties(height=height)


def delta_intervals(series: pd.DataFrame, y_title: str, span_ms: int, height: int = 200) -> alt.Chart:
    """Each window's difference per arm (`time`, `series`, `value`) with its interval (`lower`, `upper`) as a bar,
    and the zero line: an interval that leaves zero is a difference the window shows."""
    base = alt.Chart(series).encode(x=_time("time:T", span_ms), color=alt.Color(
        "series:N", legend=alt.Legend(title=None, orient="top")))
    tooltip = [alt.Tooltip("time:T", title="from (UTC)", format="%b %d %H:%M"), "series:N",
               alt.Tooltip("value:Q", format=".4g"), alt.Tooltip("lower:Q", format=".4g"),
               alt.Tooltip("upper:Q", format=".4g")]
    bars = base.transform_filter("isValid(datum.lower) && isValid(datum.upper)").mark_rule(
        strokeWidth=2, opacity=0.6).encode(y=alt.Y("lower:Q", title=y_title), y2="upper:Q")
    points = base.mark_point(filled=True, size=40).encode(y=alt.Y("value:Q", title=y_title), tooltip=tooltip)
    zero = alt.Chart(pd.DataFrame({"zero": [0.0]})).mark_rule(color="#9e9e9e", strokeDash=[4, 3]).encode(y="zero:Q")
    return alt.layer(zero, bars, points).properties(height=height)


def batch_sizes(frame: pd.DataFrame, height: int = 160) -> alt.Chart:
    return alt.Chart(frame).mark_bar(color="#5b7fa6").encode(
        x=alt.X("batch_size:O", title="batch size"), y=alt.Y("requests:Q", title="requests"),
        tooltip=["batch_size:O", "requests:Q"]).properties(height=height)


def histogram(bins: pd.DataFrame, feature: str, height: int = 240) -> alt.Chart:
    """Baseline and window densities on the same bins (`left`, `right`, `source`, `share`, `density`)."""
    return alt.Chart(bins).mark_rect(opacity=0.55).encode(
        x=alt.X("left:Q", title=feature, scale=alt.Scale(zero=False, nice=False)), x2="right:Q",
        y=alt.Y("density:Q", title="density", stack=None), y2=alt.datum(0),
        color=alt.Color("source:N", scale=SOURCE_SCALE, legend=alt.Legend(title=None, orient="top")),
        tooltip=["source:N", alt.Tooltip("left:Q", format=".4g"), alt.Tooltip("right:Q", format=".4g"),
                 alt.Tooltip("share:Q", format=".1%")]).properties(height=height)


def ecdf(curves: pd.DataFrame, gap: dict | None, feature: str, height: int = 240) -> alt.Chart:
    """Both cumulative distributions, with the largest vertical gap (the KS distance) marked."""
    lines = alt.Chart(curves).mark_line(interpolate="step-after").encode(
        x=alt.X("x:Q", title=feature, scale=alt.Scale(zero=False, nice=False)),
        y=alt.Y("cdf:Q", title="share of values below", axis=alt.Axis(format="%")),
        color=alt.Color("source:N", scale=SOURCE_SCALE, legend=alt.Legend(title=None, orient="top")),
        tooltip=["source:N", alt.Tooltip("x:Q", format=".4g"), alt.Tooltip("cdf:Q", format=".1%")])
    if not gap:
        return lines.properties(height=height)
    marker = pd.DataFrame({"x": [gap["x"]], "low": [min(gap["baseline"], gap["window"])],
                           "high": [max(gap["baseline"], gap["window"])], "gap": [gap["gap"]]})
    rule = alt.Chart(marker).mark_rule(color="#c62828", strokeWidth=2).encode(
        x="x:Q", y="low:Q", y2="high:Q", tooltip=[alt.Tooltip("gap:Q", title="largest gap", format=".3f")])
    return (lines + rule).properties(height=height)


def category_bars(shares: pd.DataFrame, height: int = 240) -> alt.Chart:
    """Category shares side by side (`category`, `source`, `share`, `unseen`); unseen categories outlined red."""
    order = shares[shares["source"] == "window"].sort_values("share", ascending=False)["category"].tolist()
    return alt.Chart(shares).mark_bar().encode(
        x=alt.X("category:N", sort=order, title=None, axis=alt.Axis(labelAngle=-30)),
        xOffset=alt.XOffset("source:N", scale=alt.Scale(domain=["baseline", "window"])),
        y=alt.Y("share:Q", axis=alt.Axis(format="%"), title="share"),
        color=alt.Color("source:N", scale=SOURCE_SCALE, legend=alt.Legend(title=None, orient="top")),
        stroke=alt.condition(alt.datum.unseen, alt.value("#c62828"), alt.value(None)),
        tooltip=["category:N", "source:N", alt.Tooltip("share:Q", format=".1%"), "unseen:N"]).properties(height=height)


def alias_timeline(events: pd.DataFrame, span_ms: int | None = None, height: int = 120) -> alt.Chart:
    """Production alias moves (`at`, `model`, `version`, `action`, `reason`) as labelled points."""
    base = alt.Chart(events).encode(x=_time("at:T", span_ms),
                                    y=alt.Y("model:N", title=None, axis=alt.Axis(labelOverlap=False)))
    points = base.mark_point(filled=True, size=120).encode(
        color=alt.Color("action:N", scale=ACTION_SCALE, legend=alt.Legend(title=None, orient="top")),
        shape=alt.Shape("action:N", legend=None),
        tooltip=[alt.Tooltip("at:T", title="at (UTC)", format="%b %d %H:%M"), "model:N", "version:N",
                 "previous_version:N", "action:N", "reason:N"])
    labels = base.mark_text(dy=-12, fontSize=11).encode(text=alt.Text("label:N"))
    return (points + labels).transform_calculate(label="'v' + datum.version").properties(height=height)


def alert_timeline(alerts: pd.DataFrame, span_ms: int | None = None) -> alt.Chart:
    """One bar per alert from start to resolve (or now), coloured by state (`label`, `start`, `end`, `state`)."""
    rows = max(alerts["label"].nunique(), 1)
    return alt.Chart(alerts).mark_bar(cornerRadius=3, height=14).encode(
        x=_time("start:T", span_ms), x2="end:T",
        y=alt.Y("label:N", title=None, axis=alt.Axis(labelLimit=320, labelOverlap=False)),
        color=alt.Color("state:N", scale=STATE_SCALE, legend=alt.Legend(title=None, orient="top")),
        tooltip=["label:N", "state:N", "severity:N", "summary:N",
                 alt.Tooltip("start:T", title="started (UTC)", format="%b %d %H:%M"),
                 alt.Tooltip("end:T", title="until (UTC)", format="%b %d %H:%M")]).properties(height=rows * 28 + 90)


def status_counts(frame: pd.DataFrame, y: str, height: int = 160) -> alt.Chart:
    """Stacked counts per `y` coloured by `status` (`y`, `status`, `count`)."""
    return alt.Chart(frame).mark_bar().encode(
        y=alt.Y(f"{y}:N", title=None, axis=alt.Axis(labelOverlap=False)),
        x=alt.X("count:Q", title=None, axis=alt.Axis(tickMinStep=1)),
        color=alt.Color("status:N", scale=_status_scale(frame["status"]), legend=alt.Legend(title=None, orient="top")),
        tooltip=[f"{y}:N", "status:N", "count:Q"]).properties(height=max(height, 30 * frame[y].nunique() + 90))


def retraining_timeline(events: pd.DataFrame, span_ms: int | None = None) -> alt.Chart:
    """Retraining requests and production moves on one time axis.

    `events`: at, lane ("retraining request" or "production"), kind (a request status or an
    alias action), label (text above the mark), detail (tooltip).
    """
    colours = {**STATUS_COLOURS, "promote": "#1565c0", "retrain": "#2e7d32", "rollback": "#c62828"}
    kinds = sorted(set(events["kind"]))
    scale = alt.Scale(domain=kinds, range=[colours.get(k, "#9e9e9e") for k in kinds])
    base = alt.Chart(events).encode(
        x=_time("at:T", span_ms),
        y=alt.Y("lane:N", title=None, sort=["retraining request", "production"],
                axis=alt.Axis(labelOverlap=False, labelLimit=200)))
    marks = base.mark_point(filled=True, size=150).encode(
        color=alt.Color("kind:N", scale=scale, legend=alt.Legend(title=None, orient="top")),
        shape=alt.Shape("lane:N", scale=alt.Scale(domain=["retraining request", "production"],
                                                  range=["diamond", "circle"]), legend=None),
        tooltip=[alt.Tooltip("at:T", title="at (UTC)", format="%b %d %H:%M"), "lane:N", "kind:N", "label:N",
                 "detail:N"])
    labels = base.mark_text(dy=-14, fontSize=11).encode(text="label:N")
    return (marks + labels).properties(height=150)


def version_metrics(frame: pd.DataFrame, height: int = 200) -> alt.Chart:
    """Training metrics side by side per version (`version`, `metric`, `value`, `production`)."""
    return alt.Chart(frame).mark_bar().encode(
        x=alt.X("metric:N", title=None, axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("version:N", sort=None),
        y=alt.Y("value:Q", title=None),
        color=alt.Color("version:N", sort=None, legend=alt.Legend(title="version", orient="top")),
        opacity=alt.condition(alt.datum.production, alt.value(1.0), alt.value(0.45)),
        tooltip=["version:N", "metric:N", alt.Tooltip("value:Q", format=".4g"), "production:N"],
    ).properties(height=height)
