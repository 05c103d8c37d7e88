"""SLOs on any latency part (`[latency]`, one pydantic model) and the token rates of generated answers."""
from __future__ import annotations

import math

import numpy as np
import pytest

from driftline import defaults
from driftline.detectors.families.latency import latency, token_rates
from driftline.errors import UserError
from driftline.latency_slo import LatencySLO
from driftline.vocabulary import (LATENCY, OUTPUT_TOKENS_PER_SECOND, P50_MS, P99_MS, TOKENS_PER_SECOND_P50,
                                  LatencyDetails)
from driftline.window_state import EventBatch, WindowState

T0 = 1_790_000_040_000


def state(n: int = 400, *, ttft: float = 150.0, tpot: float = 20.0, total: float = 30.0, tokens_out: int | None = 50,
          slow_ttft_share: float = 0.0, seed: int = 0) -> WindowState:
    rng = np.random.default_rng(seed)
    events = []
    for i in range(n):
        first = ttft * (20.0 if rng.random() < slow_ttft_share else 1.0) * rng.uniform(0.9, 1.1)
        event = {"event_id": f"e-{i}", "ts_ms": T0 + i, "features": {}, "prediction": "stop", "status": "ok",
                 "latency_ms": {"total": total * rng.uniform(0.9, 1.1), "ttft": first,
                                "tpot": tpot * rng.uniform(0.9, 1.1)}}
        if tokens_out is not None:
            event.update(tokens_in=30, tokens_out=tokens_out)
        events.append(event)
    return WindowState.empty(None).add_batch(EventBatch.from_events(events))


def by_key(results):
    return {(r.feature, r.metric): r for r in results if r.detector == LATENCY}


def breached(results):
    return {(r.feature, r.metric) for r in results if r.breached}


def test_a_ttft_breach_fires_the_ttft_slo_only():
    quiet = latency(state(), LatencySLO(), 60.0)
    assert breached(quiet) == set()
    slow = latency(state(slow_ttft_share=0.05), LatencySLO(), 60.0)  # 5 % of answers wait 20x for their first token
    assert breached(slow) == {("ttft", P99_MS)}
    result = by_key(slow)[("ttft", P99_MS)]
    assert result.threshold == defaults.LATENCY_SLO_TTFT_P99_MS and result.value > result.threshold
    assert by_key(slow)[("total", P99_MS)].threshold == defaults.LATENCY_SLO_P99_MS
    assert by_key(slow)[("ttft", P50_MS)].threshold is None  # no p50 objective on ttft by default


def test_parts_objectives_come_from_the_table_and_its_model_overrides():
    table = {"p99_ms": 500, "parts": {"ttft": {"p50_ms": 140}, "tpot": {"p99_ms": 15}, "queue": {"p95_ms": 5}},
             "models": {"chat": {"parts": {"ttft": {"p99_ms": 100}}, "min_tokens_per_second": 60}}}
    slo = LatencySLO.from_mapping(table)
    assert slo.objectives("ttft") == {"p50_ms": 140, "p95_ms": None, "p99_ms": defaults.LATENCY_SLO_TTFT_P99_MS}
    assert slo.objectives("tpot")["p99_ms"] == 15 and slo.objectives("queue")["p95_ms"] == 5
    assert slo.objectives("total")["p99_ms"] == 500 and slo.objectives("compute") == dict.fromkeys(
        ("p50_ms", "p95_ms", "p99_ms"))
    chat = LatencySLO.from_mapping(table, model="chat")
    assert chat.objectives("ttft") == {"p50_ms": 140, "p95_ms": None, "p99_ms": 100}
    assert chat.min_tokens_per_second == 60 and chat.p99_ms == 500
    fired = breached(latency(state(ttft=150.0, tpot=20.0), chat, 60.0))
    # ttft p50 ~150 > 140 and p99 > 100; tpot p99 ~22 > 15; decode rate ~50/s < 60
    assert fired == {("ttft", P50_MS), ("ttft", P99_MS), ("tpot", P99_MS), (None, TOKENS_PER_SECOND_P50)}
    assert LatencySLO(p99_ms=300).objectives("total")["p99_ms"] == 300  # in code, as before


@pytest.mark.parametrize("table, words", [
    ({"p99_ms": -1}, "[latency] p99_ms"),
    ({"p99_ms": math.nan}, "[latency] p99_ms"),
    ({"p99_ms": "250"}, "[latency] p99_ms"),
    ({"error_rate": 1.5}, "[latency] error_rate"),
    ({"parts": {"ttft": {"p99_ms": -3}}}, "[latency] parts.ttft.p99_ms"),
    ({"models": {"chat": {"p95_ms": -3}}}, "[latency] models.chat.p95_ms"),
    ({"parts": {"ttft": {"p98_ms": 3}}}, "unknown key 'parts.ttft.p98_ms'"),
    ({"parts": {"total": {"p99_ms": 3}}}, "'total''s objectives are [latency]'s own"),
    ({"parts": {"bad name": {"p99_ms": 3}}}, "part name 'bad name'"),
    ({"min_tokens_per_second": 0}, "min_tokens_per_second"),
    ({"models": {"chat": {"parts": {"tpot": {"p99_ms": math.inf}}}}}, "parts.tpot.p99_ms"),
])
def test_a_bad_table_is_an_error_naming_the_key(table, words):
    with pytest.raises(UserError) as error:
        LatencySLO.from_mapping(table, model="chat")
    assert words in str(error.value)


def test_token_rates_are_defined_from_tpot_and_the_windows_output_tokens():
    window = state(n=301, tpot=20.0, tokens_out=50)
    per_request, throughput = token_rates(window, 60.0)
    median_tpot = window.latency["tpot"].quantile(0.5)
    assert per_request == pytest.approx(1000.0 / median_tpot)
    assert 1000.0 / 22.0 < per_request < 1000.0 / 18.0
    assert throughput == pytest.approx(301 * 50 / 60.0)
    results = by_key(latency(window, LatencySLO(), 60.0))
    rate = results[(None, TOKENS_PER_SECOND_P50)]
    assert rate.value == per_request and rate.threshold is None and not rate.breached
    assert results[(None, OUTPUT_TOKENS_PER_SECOND)].details["tokens_out"] == 301 * 50
    assert results[(None, OUTPUT_TOKENS_PER_SECOND)].details["tokens_in"] == 301 * 30
    for r in results.values():  # every detail is a typed latency detail
        assert LatencyDetails.from_dict(r.details).to_dict() == r.details


def test_a_window_without_generated_answers_gets_no_new_results():
    events = [{"event_id": f"e-{i}", "ts_ms": T0 + i, "features": {}, "prediction": 0.5, "status": "ok",
               "latency_ms": {"total": 10.0, "compute": 8.0}} for i in range(200)]
    plain = WindowState.empty(None).add_batch(EventBatch.from_events(events))
    results = latency(plain, LatencySLO(), 60.0)
    assert {r.feature for r in results} == {"total", "compute", None}
    assert not {TOKENS_PER_SECOND_P50, OUTPUT_TOKENS_PER_SECOND} & {r.metric for r in results}
    assert token_rates(plain, 60.0) == (None, None)


def test_too_few_events_judge_nothing():
    results = latency(state(n=50, slow_ttft_share=0.5), LatencySLO(), 60.0)
    assert breached(results) == set()
    assert all(r.details.get("insufficient_data") for r in results)
