"""Report: an Evidently data-drift report of a chosen window's sample against the baseline's sample,
shown inline and downloadable as one HTML file."""
from __future__ import annotations

from typing import Any

import streamlit as st

from driftline.config import load_settings
from driftline.dashboard import queries, signon, states, ui
from driftline.dashboard.access import AccessPolicy
from driftline.dashboard.report import evidently_html

# Evidently's report is a long page; it scrolls inside a frame this tall.
REPORT_HEIGHT = 1100


@st.cache_data(ttl=3600, show_spinner=False, max_entries=16)
def build_report(db_url: str, model: str, version: str, window_start_ms: int) -> dict[str, Any]:
    """{"html", "rows", "reference_rows", "problems"} for one window (a window's sample rarely changes: 1 h TTL)."""
    summary = queries.baseline_summary(db_url, model, version)
    if summary is None:
        return {"problems": [f"v{version} has no baseline to compare with."]}
    state, problems = states.merge_states(queries.window_state_blobs(db_url, model, version, window_start_ms), None)
    if state is None:
        return {"problems": problems or ["no window state stored for this window"]}
    reference, current, numeric, categorical = states.sample_frames(summary, state.sample)
    try:
        html = evidently_html(reference, current, numeric, categorical)
    except ValueError as exc:
        return {"problems": problems + [str(exc)]}
    return {"html": html, "rows": len(current), "reference_rows": len(reference), "problems": problems}


def body(ctx: ui.Context) -> None:
    # the navigation leaves this page out for those who may not see it; checked again here all the same
    if not AccessPolicy.from_settings(load_settings()).may_see_report(signon.current_identity()):
        st.error("The Report page (sampled feature values) is not available to this account.")
        return
    if ui.needs_model(ctx):
        return
    st.title(f"Report · {ctx.model} v{ctx.version}")
    windows = queries.windows(ctx.db_url, ctx.model, ctx.version, ctx.start_ms, ctx.end_ms)
    if windows.empty:
        st.info(f"No evaluated windows for v{ctx.version} in {ctx.range_label.lower()}.")
        return
    labels = {int(s): f"{ui.window_label(s, e)} · {n:,} events"
              for s, e, n in zip(windows["window_start_ms"], windows["window_end_ms"], windows["events"])}
    if st.session_state.get("report_window") is not None and int(st.session_state["report_window"]) not in labels:
        st.session_state.pop("report_window")
    window = st.selectbox("Window", list(labels), format_func=labels.get, key="report_window", bind="query-params")
    st.caption("Evidently 0.7 `DataDriftPreset` on the window's uniform sample of events against the baseline's "
               "uniform sample of training rows: a cross-check of driftline's own verdicts, which use every event.")
    with st.spinner("Building the Evidently report…"):
        report = build_report(ctx.db_url, ctx.model, ctx.version, int(window))
    for problem in report["problems"]:
        st.warning(problem)
    if "html" not in report:
        return
    st.download_button("Download report (HTML)", report["html"], mime="text/html", icon=":material/download:",
                       file_name=f"driftline-{ctx.model}-v{ctx.version}-{int(window)}.html", on_click="ignore")
    st.caption(f"{report['rows']} sampled events vs {report['reference_rows']} baseline rows")
    st.iframe(report["html"], height=REPORT_HEIGHT)


ui.page(body)
