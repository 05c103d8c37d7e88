"""Latency of one window against the model's SLO: quantiles per part, error rate, QPS, concurrency, and the token
rates of generated answers."""
from __future__ import annotations

from typing import Any

from driftline.vocabulary import INSUFFICIENT_DATA_REASON
from driftline.baseline.values import finite_or_none
from driftline.detectors.families.results import WindowResult, insufficient
from driftline.latency_slo import QUANTILES, LatencySLO
from driftline.vocabulary import (CONCURRENCY, ERROR_RATE, LATENCY, LATENCY_TOTAL, LATENCY_TPOT,
                                  OUTPUT_TOKENS_PER_SECOND, QPS, TOKENS_IN, TOKENS_OUT, TOKENS_PER_SECOND_P50)
from driftline.window_state import WindowState

__all__ = ["latency", "token_rates"]


def latency(state: WindowState, slo: LatencySLO, window_seconds: float) -> list[WindowResult]:
    """Latency quantiles of every part the window holds, each against its objective in `slo` (``total``: the
    top-level keys; ``ttft``, ``tpot`` or any other: ``[latency.parts.NAME]``), error rate, QPS, concurrency,
    and, when events carry them, the token rates of generated answers (`token_rates`)."""
    events = state.events
    enough = events >= slo.min_events
    results = []

    def result(feature: str | None, metric: str, value: float | None, threshold: float | None,
               details: dict[str, Any], below: bool = False) -> None:
        breached = threshold is not None and value is not None and (value < threshold if below else value > threshold)
        if not enough:
            insufficient(details, f"{INSUFFICIENT_DATA_REASON}: {events} events < {slo.min_events}")
            breached = False
        results.append(WindowResult(LATENCY, feature, metric, value, threshold, bool(breached),
                                      dict(details, events=events)))

    for part, histogram in state.latency.items():
        objectives = slo.objectives(part)
        for metric, q in QUANTILES.items():
            result(part, metric, histogram.quantile(q), objectives[metric],
                   {"count": histogram.count, "max_ms": finite_or_none(histogram.max)})
    error_rate = state.errors / events if events else 0.0
    result(None, ERROR_RATE, error_rate, slo.error_rate, {"errors": state.errors})
    qps = events / window_seconds if window_seconds > 0 else 0.0
    result(None, QPS, qps, slo.max_qps, {"window_seconds": window_seconds})
    total = state.latency.get(LATENCY_TOTAL)
    mean_seconds = (total.mean or 0.0) / 1000.0 if total is not None and total.count else 0.0
    # Little's law: requests in flight = arrival rate x mean time each spends inside.
    result(None, CONCURRENCY, qps * mean_seconds, slo.max_concurrency,
           {QPS: qps, "mean_latency_ms": mean_seconds * 1000.0})
    per_request, throughput = token_rates(state, window_seconds)
    tpot = state.latency.get(LATENCY_TPOT)
    if tpot is not None and tpot.count:
        result(None, TOKENS_PER_SECOND_P50, per_request, slo.min_tokens_per_second,
               {"requests": tpot.count, "tpot_p50_ms": tpot.quantile(0.5), "direction": "below"}, below=True)
    counts = {name: state.tokens[name] for name in (TOKENS_IN, TOKENS_OUT) if name in state.tokens}
    if TOKENS_OUT in counts:
        result(None, OUTPUT_TOKENS_PER_SECOND, throughput, None,
               {"window_seconds": window_seconds, "requests": counts[TOKENS_OUT].count,
                **{name: int(histogram.sum) for name, histogram in counts.items()}})
    return results


def token_rates(state: WindowState, window_seconds: float) -> tuple[float | None, float | None]:
    r"""(median decode rate per request, output tokens per window second) of a window's generated answers.

    *Decode rate per request*: :math:`1000 / \mathrm{tpot}` output tokens per second, tpot being the request's
    milliseconds per output token after the first (what it spends generating, without the wait for the first
    token). Its window median is :math:`1000 / \mathrm{median}(\mathrm{tpot})`, as the median of a decreasing
    function of a value is that function of its median: it comes from the tpot sketch, within its 1 %. None when no
    event gave a tpot (or its median is 0).

    *Output tokens per second*: the window's ``tokens_out`` summed, over the window's length in seconds (the same
    length QPS divides by): what the model version generated, all requests together. None when no event gave
    ``tokens_out``.
    """
    tpot = state.latency.get(LATENCY_TPOT)
    median = tpot.quantile(0.5) if tpot is not None else None
    per_request = 1000.0 / median if median else None
    out = state.tokens.get(TOKENS_OUT)
    throughput = (out.sum / window_seconds if window_seconds > 0 else 0.0) if out is not None and out.count else None
    return per_request, throughput
