"""docs/examples/streamed_answer.py, run against the embedded broker: the event it logs carries ttft, tpot and the
token counts, valid by the contract, and folds into a window whose latency family judges them."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from driftline.client import InferenceLogger
from driftline.client.inference_call import InferenceCall
from driftline.config import TOPIC_INFERENCE
from driftline.detectors.families.latency import latency, token_rates
from driftline.events import parse_inference
from driftline.latency_slo import LatencySLO
from driftline.window_state import EventBatch, WindowState
from tests.support.worker_helpers import read_topic

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "streamed_answer.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("streamed_answer", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_logs_a_streamed_answer_with_its_parts_and_counts(broker, unique_id, example, capsys):
    request_id = f"answer-{unique_id}"
    assert example.main(["--bootstrap-servers", broker, "--tokens", "12", "--request-id", request_id]) == request_id
    assert capsys.readouterr().out.startswith("word0 word1 ")  # streamed to the user as it came
    (raw,) = read_topic(broker, TOPIC_INFERENCE, {request_id}).values()
    event = parse_inference(raw)
    assert (event.model, event.prediction, event.raw["tokens_out"], event.raw["tokens_in"]) == ("chat", "stop", 12, 5)
    parts = event.latency_ms
    # fake_model sleeps 50 ms before the first token, then 10 ms per token
    assert parts["ttft"] >= 50.0 and parts["tpot"] >= 10.0
    assert parts["total"] == pytest.approx(parts["ttft"] + 11 * parts["tpot"], rel=1e-9)
    state = WindowState.empty(None).add_batch(EventBatch.from_events([event]))
    assert state.tokens["tokens_out"].sum == 12 and state.latency["tpot"].count == 1
    per_request, _ = token_rates(state, 60.0)
    assert per_request == pytest.approx(1000.0 / parts["tpot"], rel=0.02)  # the sketch's 1 %
    results = latency(state, LatencySLO(min_events=1), 60.0)
    assert {r.feature for r in results if r.metric == "p99_ms"} == {"total", "ttft", "tpot"}


def test_a_stream_that_fails_or_is_dropped_is_still_logged(broker, unique_id, example):
    def broken():
        yield "a "
        raise RuntimeError("GPU fell over")

    failed, dropped = f"failed-{unique_id}", f"dropped-{unique_id}"
    with InferenceLogger(broker, model="chat", version="1") as logger:
        stream = example.logged_stream(logger, broken(), prompt_tokens=3, features={}, request_id=failed)
        with pytest.raises(RuntimeError):
            list(stream)
        stream = example.logged_stream(logger, example.fake_model("q", tokens=5, first_token_s=0, per_token_s=0),
                                       prompt_tokens=1, features={}, request_id=dropped)
        next(stream), next(stream)
        stream.close()  # the user hung up after two tokens
    events = {key: parse_inference(raw) for key, raw in read_topic(broker, TOPIC_INFERENCE, {failed, dropped}).items()}
    error = events[failed]
    assert error.status == "error" and "GPU fell over" in error.raw["error"] and error.raw["tokens_out"] == 1
    assert "ttft" in error.latency_ms and "tpot" not in error.latency_ms  # one token: no time between tokens
    cancelled = events[dropped]
    assert cancelled.prediction == "cancelled" and cancelled.raw["tokens_out"] == 2
    assert {"ttft", "tpot"} <= set(cancelled.latency_ms)


def test_the_client_refuses_a_count_the_contract_would_dead_letter(broker):
    import numpy as np

    with InferenceLogger(broker, model="chat", version="1") as logger:
        for bad in (-1, 2.5, True, "7", 10 ** 12):
            with pytest.raises(ValueError, match="tokens_out must be a whole number"):
                logger.log({}, "stop", {"total": 5.0}, tokens_out=bad)
        event = InferenceCall({}, "stop", {"total": 5.0}, 0, "e-1", tokens_in=np.int64(7),
                              tokens_out=0).event(logger.identity)
    assert event["tokens_in"] == 7 and type(event["tokens_in"]) is int and event["tokens_out"] == 0
