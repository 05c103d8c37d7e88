"""What every page shares: the store URL, the sidebar selectors, the self-refreshing page body.

The sidebar's selectors (time range, model, version) are bound to the URL's query
parameters, so a link such as ``/model?model=credit-default&version=2&range=6h``
(the alerts' Slack messages use these) opens the right view.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable

import pandas as pd
import streamlit as st
from sqlalchemy.exc import OperationalError, ProgrammingError

from driftline.dashboard import presentation, queries
from driftline.dashboard.commands import REFRESH_ENV
from driftline import defaults
from driftline.config import load_settings
from driftline.errors import UserError
from driftline.store.db import redacted_url

# Query-parameter value -> (label, seconds).
TIME_RANGES: dict[str, tuple[str, int]] = {
    "1h": ("Last 1 hour", 3600), "6h": ("Last 6 hours", 6 * 3600), "24h": ("Last 24 hours", 86400),
    "7d": ("Last 7 days", 7 * 86400), "30d": ("Last 30 days", 30 * 86400),
}
DEFAULT_RANGE = "24h"
REFRESH_CHOICES = (0, 10, 30, 60, 300)


@dataclass(frozen=True)
class Context:
    """The selection a page body renders: store, time range, model and version."""

    db_url: str
    range_key: str
    start_ms: int
    end_ms: int
    now_ms: int
    model: str | None
    version: str | None

    @property
    def span_ms(self) -> int:
        return self.end_ms - self.start_ms

    @property
    def range_label(self) -> str:
        return TIME_RANGES[self.range_key][0]


def db_url() -> str:
    """The store URL: DRIFTLINE_DB (set by `driftline dashboard`), the config file, or the default file."""
    return load_settings().db_url


def refresh_default() -> int:
    """Seconds between refreshes from the environment (0 turns it off)."""
    raw = os.environ.get(REFRESH_ENV, "")
    try:
        return max(int(raw), 0) if raw.strip() else defaults.DASHBOARD_REFRESH_SECONDS
    except ValueError:
        return defaults.DASHBOARD_REFRESH_SECONDS


def now_ms() -> int:
    return int(time.time() * 1000)


def current_range(range_key: str) -> tuple[int, int, int]:
    """(start, end, now) of the named range, `end` rounded to the cache TTL (presentation.bounded_range)."""
    now = now_ms()
    start, end = presentation.bounded_range(now, TIME_RANGES[range_key][1], defaults.DASHBOARD_CACHE_TTL_SECONDS)
    return start, end, now


def sidebar(url: str) -> None:
    """Time range, model, version and refresh selectors (their state lives in st.session_state)."""
    with st.sidebar:
        st.selectbox("Time range", list(TIME_RANGES), index=list(TIME_RANGES).index(DEFAULT_RANGE),
                     format_func=lambda k: TIME_RANGES[k][0], key="range", bind="query-params")
        start, end, _ = current_range(st.session_state.get("range") or DEFAULT_RANGE)
        versions = queries.model_versions(url, start, end)
        models = sorted(versions["model"].unique().tolist())
        if models:
            if st.session_state.get("model") not in models:
                st.session_state.pop("model", None)
            model = st.selectbox("Model", models, key="model", bind="query-params")
            own = versions[versions["model"] == model]
            labels = own["version"].tolist()
            production = own.loc[own["production"], "version"].tolist()
            default = labels.index(production[0]) if production else len(labels) - 1
            # another model's version number means nothing here: a model switch starts from its production
            switched = st.session_state.get("_version_of") not in (None, model)
            if switched or st.session_state.get("version") not in labels:
                st.session_state.pop("version", None)
            st.session_state["_version_of"] = model
            st.selectbox("Version", labels, index=default, key="version", bind="query-params",
                         format_func=lambda v: f"{v} (production)" if v in production else v)
        refresh = refresh_default()
        choices = sorted(set(REFRESH_CHOICES) | {refresh})
        # bound to the URL (?refresh=off) so that a shared link keeps the reader's choice
        st.selectbox("Auto-refresh", choices, index=choices.index(refresh), key="refresh", bind="query-params",
                     format_func=lambda s: "off" if s == 0 else f"every {s} s")
        st.caption(f"Store: `{redacted_url(url)}`  \nTimes are UTC.")


def context(url: str) -> Context:
    range_key = st.session_state.get("range") or DEFAULT_RANGE
    if range_key not in TIME_RANGES:
        range_key = DEFAULT_RANGE
    start, end, now = current_range(range_key)
    return Context(db_url=url, range_key=range_key, start_ms=start, end_ms=end, now_ms=now,
                   model=st.session_state.get("model"), version=st.session_state.get("version"))


def page(body: Callable[[Context], None]) -> None:
    """Run a page body inside a fragment that re-runs itself every refresh interval.

    Store errors become one readable message instead of a traceback.
    """
    url = db_url()
    refresh = st.session_state.get("refresh", refresh_default())

    def run() -> None:
        try:
            body(context(url))
        except (OperationalError, ProgrammingError) as exc:
            st.error(f"Cannot read the store at `{redacted_url(url)}`: {str(exc.orig or exc).splitlines()[0]}")
        except UserError as exc:
            st.error(str(exc))
        st.caption(f"Updated {time.strftime('%H:%M:%S', time.gmtime())} UTC"
                   + (f" · refreshes every {refresh} s" if refresh else " · auto-refresh off"))

    st.fragment(run, run_every=refresh or None)()


def needs_model(ctx: Context) -> bool:
    """True (after saying what to do) when no model is selected because the store has none."""
    if ctx.model and ctx.version:
        return False
    st.info("No models in the store yet. The **Overview** page says how to get started.")
    return True


def segment_filter(ctx: Context) -> str:
    """The segment whose results the page shows ("" for the whole population, the default); a selector
    only when the version has segment results ([segments])."""
    options = ["", *queries.segments(ctx.db_url, ctx.model, ctx.version, ctx.start_ms, ctx.end_ms)]
    if len(options) == 1:
        return ""
    if st.session_state.get("segment") not in options:
        st.session_state.pop("segment", None)
    chosen = st.selectbox("Segment", options, format_func=lambda s: s or "Whole population", key="segment",
                          bind="query-params")
    return chosen or ""


def time_col(frame: pd.DataFrame, column: str = "bucket_ms") -> pd.Series:
    return presentation.to_time(frame[column])


def window_label(start_ms: int, end_ms: int) -> str:
    start, end = presentation.to_time(start_ms), presentation.to_time(end_ms)
    return f"{start:%b %d %H:%M}–{end:%H:%M}"


def quarantine_notice(ctx: Context, model: str | None = None, version: str | None = None) -> None:
    """A warning, with the list, when windows (of one version, or any) failed evaluation and wait for a retry."""
    frame = queries.quarantined_windows(ctx.db_url, model, version)
    if frame.empty:
        return
    counts = frame.groupby(["model", "version"], sort=True).size()
    where = ", ".join(f"{m} v{v} ({n})" for (m, v), n in counts.items())
    st.warning(f"**{len(frame)} window(s) quarantined**: their evaluation failed, so they have no results and "
               f"raise no alerts until a retry succeeds (retried with backoff). {where}. "
               "`driftline status` lists them too.", icon=":material/report:")
    with st.expander("Quarantined windows"):
        shown = frame.assign(window=[window_label(s, e) for s, e in zip(frame["window_start_ms"], frame["window_end_ms"])])
        st.dataframe(shown[["model", "version", "window", "error_type", "error", "attempts", "next_retry"]],
                     hide_index=True)
