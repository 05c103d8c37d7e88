"""A RAG service's traces judged end to end, without a stack: a baseline from a file of past traces (`driftline
baseline --traces`), then live windows of the stand-in's traces (driftline/otlp/rag_standin.py) mapped as the
receiver maps them, folded by the collector's folder and judged by the scheduler's jobs. The questions move to
topics the corpus cannot answer: the prompt embedding and the retrieval scores drift, the lengths, tokens, finish
reasons and latencies do not."""
from __future__ import annotations

import random
import time

import orjson
from click.testing import CliRunner
from sqlalchemy import select

from driftline.cli import cli
from driftline.collector.folding import FolderSetup, InferenceFolder
from driftline.config import TOPIC_INFERENCE, load_settings
from driftline.llm_settings import LlmSettings
from driftline.otlp.mapping import trace_event
from driftline.otlp.rag_standin import ANSWERING_MODEL, MODEL, OFF_TOPIC, SUPPORT, RagStandin, export_request, \
    questions
from driftline.otlp.spans import decode_protobuf
from driftline.scheduler.jobs import SchedulerJobs
from driftline.segments import SegmentSpec
from driftline.store import db
from driftline.store.models import DetectorResult, WindowStateRecord
from tests.support.otlp_traces import otlp_json

WINDOW_S, LATENESS_S, PER_WINDOW = 60, 2, 300
SETTINGS = LlmSettings()


def test_a_topic_shift_moves_the_embedding_and_the_retrieval_and_nothing_else(sqlite_url, tmp_path):
    rng, standin = random.Random(3), RagStandin(seed=3, cache_entries=0)
    window_ms = WINDOW_S * 1000
    first = (int(time.time() * 1000) // window_ms - 4) * window_ms
    past = tmp_path / "traces.jsonl"
    with past.open("wb") as out:
        for i, question in enumerate(questions(SUPPORT, 800, rng)):
            out.write(orjson.dumps(otlp_json(export_request(standin.request(question, first - 3_600_000 + i))))
                      + b"\n")
    done = CliRunner().invoke(cli, ["baseline", "--model", MODEL, "--version", ANSWERING_MODEL, "--traces", str(past),
                                    "--db", sqlite_url])
    assert done.exit_code == 0, done.output
    assert "embeddings prompt" in done.output

    config = tmp_path / "driftline.toml"  # an answer takes hundreds of ms: objectives for a chat model
    config.write_text("[latency]\np50_ms = 1000.0\np95_ms = 2000.0\np99_ms = 3000.0\n"
                      "[latency.parts.ttft]\np99_ms = 500.0\n[latency.parts.tpot]\np99_ms = 50.0\n")
    settings = load_settings(config, db=sqlite_url, window_seconds=WINDOW_S, allowed_lateness_seconds=LATENESS_S)
    jobs = SchedulerJobs(settings)
    with db.session_scope(sqlite_url) as session:
        baseline = jobs.cache.baseline(session, MODEL, ANSWERING_MODEL)
    folder = InferenceFolder(TOPIC_INFERENCE, 0, FolderSetup(window_ms, LATENESS_S * 1000, 100_000,
                                                            segments=SegmentSpec.from_settings(settings)),
                             baseline_for=lambda m, v: baseline, stored_watermark=lambda m, v: None)
    refusal = SETTINGS.refusal()
    for window, topic in enumerate((SUPPORT, OFF_TOPIC)):
        start = first + window * window_ms
        values = []
        for i, question in enumerate(questions(topic, PER_WINDOW, rng)):
            spans = standin.request(question, start + i * (window_ms // PER_WINDOW))
            decoded = decode_protobuf(export_request(spans).SerializeToString())
            values.append(orjson.dumps(trace_event(decoded.spans, SETTINGS, refusal)))
        folder.process(list(range(window * PER_WINDOW, (window + 1) * PER_WINDOW)), values)
        with db.session_scope(sqlite_url) as session:
            for key, partial in folder.take().windows.items():
                session.add(WindowStateRecord(model=key.model, version=key.version, window_start_ms=key.window_start_ms,
                                              window_end_ms=key.window_end_ms, partition=0,
                                              events=partial.events, state=partial.state.to_bytes()))
        jobs.evaluate_and_analyse(now_ms=start + window_ms + LATENESS_S * 1000)
    with db.session_scope(sqlite_url) as session:
        results = list(session.scalars(select(DetectorResult).where(DetectorResult.model == MODEL)))
    db.get_engine(sqlite_url).dispose()
    breached = {(r.window_start_ms == first + window_ms, r.detector, r.feature) for r in results if r.breached}
    judged = {(r.detector, r.feature) for r in results}
    assert {("latency", "ttft"), ("latency", "tpot"), ("embedding_drift", "prompt")} <= judged
    shifted = {(detector, feature) for late, detector, feature in breached if late}
    assert not {key for key in breached if not key[0]}, "the clean window breached nothing"
    assert ("embedding_drift", "prompt") in shifted
    assert {("data_drift", "retrieval_top_score"), ("data_drift", "retrieval_mean_score")} <= shifted
    quiet = {"prompt_tokens", "answer_tokens", "prompt_chars", "answer_chars", "finish_reason", "answer_refused",
             "answer_empty", "cache_hit", "llm_calls", "retrieval_documents", "retrieval_empty"}
    assert not {feature for _, feature in shifted} & quiet, shifted
