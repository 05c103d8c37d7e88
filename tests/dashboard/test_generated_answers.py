"""The model page's serving section shows generated answers (ttft, tpot, token rates and counts) when a version's
windows have them, and nothing new when they do not."""
from __future__ import annotations

import numpy as np
import streamlit as st
from sqlalchemy import select

from driftline.store.db import session_scope
from driftline.store.models import DetectorResult, WindowStateRecord
from driftline.vocabulary import DATASET_DRIFT, LATENCY
from driftline.window_state import WindowState
from driftline.window_state.latency import LatencyHistogram
from tests.dashboard.test_app import assert_clean, charts, open_app
from tests.support.demo_store import CREDIT

RESULTS = [("ttft", "p50_ms", 180.0, None), ("ttft", "p99_ms", 2400.0, 2000.0), ("tpot", "p50_ms", 19.0, None),
           ("tpot", "p99_ms", 31.0, 200.0), ("", "tokens_per_second_p50", 52.0, None),
           ("", "output_tokens_per_second", 1400.0, None)]


def _add_generated_answers(url: str) -> None:
    with session_scope(url) as session:
        windows = session.scalars(select(DetectorResult).where(
            DetectorResult.model == CREDIT, DetectorResult.version == "2", DetectorResult.detector == DATASET_DRIFT,
            DetectorResult.segment == "")).all()
        assert windows
        for i, window in enumerate(windows):
            for part, metric, value, threshold in RESULTS:
                session.add(DetectorResult(
                    model=CREDIT, version="2", window_start_ms=window.window_start_ms,
                    window_end_ms=window.window_end_ms, detector=LATENCY, feature=part, metric=metric,
                    value=value * (1 + 0.01 * i), threshold=threshold,
                    breached=threshold is not None and value > threshold, details={"events": 500}, segment=""))
        for record in session.scalars(select(WindowStateRecord).where(
                WindowStateRecord.model == CREDIT, WindowStateRecord.version == "2",
                WindowStateRecord.partition >= 0)):
            state = WindowState.from_bytes(record.state)
            for name, count in (("tokens_in", 30.0), ("tokens_out", 90.0)):
                histogram = state.tokens[name] = LatencyHistogram()
                histogram.add(np.full(max(state.events, 1), count))
            record.state = state.to_bytes()


def _page(seeded):
    at = open_app("model", model=CREDIT, version="2")
    assert_clean(at)
    return at


def test_generated_answers_are_shown_when_the_windows_have_them(seeded):
    url, _summary = seeded
    before = _page(seeded)
    assert "Generated answers" not in [s.value for s in before.subheader]  # nothing new without them
    plain_charts = charts(before)
    _add_generated_answers(url)
    st.cache_data.clear()  # the first run's store reads are cached for a while, as in a live dashboard
    at = _page(seeded)
    assert "Generated answers" in [s.value for s in at.subheader]
    text = " ".join(m.value for m in at.markdown)
    for title in ("Time to first token", "Time per output token", "Tokens per second", "Tokens per window"):
        assert title in text, title
    assert "p99 objective: 2000 ms" in [c.value for c in at.caption]
    assert charts(at) >= plain_charts + 4  # ttft, tpot, tokens per second, tokens per window
