"""The LLM page: a version of traced LLM requests shows its tokens, cost, retrieval relevance, answer shares and
descriptor drift; a version without descriptors says how to send traces."""
from __future__ import annotations

import random
import time

import orjson
import streamlit as st

from driftline.collector.folding import FolderSetup, InferenceFolder
from driftline.config import TOPIC_INFERENCE
from driftline.llm_settings import LlmSettings
from driftline.otlp.mapping import trace_event
from driftline.otlp.rag_standin import (ANSWERING_MODEL, MODEL, SERVICE, SUPPORT, RagStandin, export_request,
                                        questions)
from driftline.otlp.spans import decode_protobuf
from driftline.segments import SegmentSpec
from driftline.store.db import session_scope
from driftline.store.models import ModelVersion, WindowStateRecord
from tests.dashboard.test_app import assert_clean, charts, metric, open_app
from tests.support.demo_store import CREDIT

WINDOW_MS = 60_000


def _add_traced_windows(url: str) -> int:
    """The stand-in's traced requests folded into windows as the collector folds them; returns the events stored."""
    settings = LlmSettings(prices={MODEL: {"input_per_million": 1.0, "output_per_million": 4.0}},
                           models={SERVICE: {"model": MODEL, "version": ANSWERING_MODEL}})  # its cache hits
    rng, standin = random.Random(2), RagStandin(seed=2)
    folder = InferenceFolder(TOPIC_INFERENCE, 0, FolderSetup(WINDOW_MS, 0, 10_000, segments=SegmentSpec()),
                             baseline_for=lambda m, v: None, stored_watermark=lambda m, v: None)
    first = (int(time.time() * 1000) // WINDOW_MS - 3) * WINDOW_MS
    values = [orjson.dumps(trace_event(decode_protobuf(export_request(standin.request(q, first + i * 400))
                                                       .SerializeToString()).spans, settings, settings.refusal()))
              for i, q in enumerate(questions(SUPPORT, 300, rng))]
    folder.process(list(range(len(values))), values)
    stored = 0
    with session_scope(url) as session:
        session.add(ModelVersion(model=MODEL, version=ANSWERING_MODEL))
        for key, partial in folder.take().windows.items():  # the closed windows
            session.add(WindowStateRecord(model=key.model, version=key.version, window_start_ms=key.window_start_ms,
                                          window_end_ms=key.window_end_ms, partition=0, events=partial.events,
                                          state=partial.state.to_bytes()))
            stored += partial.events
    return stored


def test_the_llm_page_shows_traced_requests_and_says_how_to_send_them(seeded):
    url, _summary = seeded
    plain = open_app("llm", model=CREDIT, version="2")
    assert any("POST /v1/traces" in i.value for i in plain.info)
    stored = _add_traced_windows(url)
    st.cache_data.clear()  # the first run's store reads are cached for a while, as in a live dashboard
    at = open_app("llm", model=MODEL)  # its one version is selected
    assert_clean(at)
    assert metric(at, "Requests (24h)") == f"{stored:,}" and stored > 100
    assert float(metric(at, "Token cost")) > 0 and metric(at, "Cache hits").endswith("%")
    text = " ".join(m.value for m in at.markdown)
    for title in ("Token cost per request", "Retrieval relevance", "Answer shares"):
        assert title in text, title
    assert charts(at) >= 3
