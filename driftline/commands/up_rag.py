"""`driftline up --scenario rag_topic_shift`: the stack without the bundled worker, watching a RAG service's traces.

The RAG stand-in (driftline/otlp/rag_standin.py) is the service: its baseline is registered once from a file of its
help-desk traces (`driftline baseline --traces`), and its traffic (driftline/otlp/rag_traffic.py) exports each
request's trace to the receiver's `POST /v1/traces`; after the warm-up the questions move to topics the corpus
cannot answer. The scenario's `[latency]` objectives suit a chat model (hundreds of milliseconds an answer).
"""
from __future__ import annotations

import random
import sys
from pathlib import Path

import orjson

from driftline.config import Settings
from driftline.errors import UserError
from driftline.private_files import open_private
from driftline.supervisor import Component, Supervisor
from driftline.vocabulary import LATENCY

RAG_SCENARIO = "rag_topic_shift"
BASELINE_TRACES = 1_000
SCENARIO_TABLES = """
# added by `driftline up --scenario rag_topic_shift`: the stand-in's cache hits name no model, only the service
[llm.models."rag-standin"]
model = "standin-chat"
version = "standin-chat-0001"

# and a chat model's latency objectives
[latency.models."standin-chat"]
p50_ms = 1000.0
p95_ms = 2000.0
p99_ms = 3000.0
"""


def rag_config(settings: Settings) -> Path | None:
    """The user's TOML file plus the stand-in's [llm] mapping and its chat model's latency objectives, when the file
    sets no [llm] or [latency] itself."""
    if settings.section(LATENCY) or settings.section("llm"):
        return settings.config_path
    text = settings.config_path.read_text() if settings.config_path is not None else ""
    path = settings.home / f"up-{RAG_SCENARIO}.toml"
    with open_private(path, "w") as fh:
        fh.write(text + SCENARIO_TABLES)
    return path


def register_rag_baseline(settings: Settings, env: dict[str, str], out: Supervisor, command: list[str]) -> None:
    """`driftline baseline --traces` from the stand-in's help-desk traces, once (the version stays registered)."""
    from driftline.otlp.rag_standin import ANSWERING_MODEL, MODEL, SUPPORT, RagStandin, export_request, questions
    from driftline.store import db as store_db
    from driftline.store.aliases import alias_version

    with store_db.session_scope(settings.db_url) as session:
        if alias_version(session, MODEL) is not None:
            return
    from driftline.otlp.spans import to_otlp_json

    out.log("up", f"no baseline of {MODEL} yet: registering one from {BASELINE_TRACES} traces of the RAG stand-in ...")
    path = settings.home / "rag-baseline-traces.jsonl"
    rng, standin = random.Random(1), RagStandin(seed=1)  # its cache too: the live hit rate is the baseline's
    with open_private(path, "wb") as fh:
        for i, question in enumerate(questions(SUPPORT, BASELINE_TRACES, rng)):
            spans = standin.request(question, 1_780_000_000_000 + i * 1000)
            fh.write(orjson.dumps(to_otlp_json(export_request(spans))) + b"\n")
    step = out.add(Component("baseline", command + ["baseline", "--model", MODEL, "--version", ANSWERING_MODEL,
                                                    "--traces", str(path)], env=env, restart=False))
    out.start(step)
    code = step.process.wait()
    out.components.remove(step)
    if code != 0:
        raise UserError(f"`driftline baseline --traces` failed with exit code {code}; see the baseline| lines above")


def rag_traffic(receiver_port: int, rate: float, warmup: float, duration: float) -> list[str]:
    return [sys.executable, "-m", "driftline.otlp.rag_traffic", "--url", f"http://127.0.0.1:{receiver_port}/v1/traces",
            "--rate", str(rate), "--warmup", str(warmup), "--duration", str(duration)]
