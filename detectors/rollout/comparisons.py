"""One window of a rollout: the candidate version compared with production (or arm B with arm A).

Every function is pure and returns `Comparison`s, candidate minus production, each with the
interval of the difference at level ``1 - alpha`` and the counts behind it (`RolloutDetails`).
A comparison never judges: `driftline.detectors.rollout.verdict` holds them to the policy.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from driftline import defaults
from driftline.baseline import BINARY, MULTICLASS, REGRESSION, LabelSummary
from driftline.detectors.stats import two_sample
from driftline.vocabulary import INSUFFICIENT_DATA_REASON
from driftline.detectors.stats.intervals import mean_difference_interval, newcombe_interval, wilson_interval
from driftline.detectors.families.results import WindowResult, json_safe
from driftline.vocabulary import (
    ACCURACY,
    CANDIDATE_DRIFT,
    ERROR_RATE_DELTA,
    FLIP_RATE,
    INSUFFICIENT_DATA,
    LATENCY_TOTAL,
    MAE,
    P50_DELTA_MS,
    P95_DELTA_MS,
    P99_DELTA_MS,
    QUALITY_DELTA,
    REASON_KEY,
    SCORE_KS,
    SCORE_WASSERSTEIN,
    RolloutDetails,
)
from driftline.window_state import LatencyHistogram, WindowState

__all__ = [
    "Comparison",
    "compare_states",
    "drift_comparison",
    "error_rate_comparison",
    "latency_comparisons",
    "quality_comparison",
    "quality_sums",
    "sample_comparisons",
    "sample_pairs",
    "shadow_comparisons",
]

PRODUCTION_KEY = "production"
CANDIDATE_KEY = "candidate"


@dataclass(frozen=True)
class Comparison:
    """One metric of one window: ``value`` is candidate minus production (shadow: the rate or distance).

    ``details`` holds `RolloutDetails`' keys: each side's value, the interval (``lower``,
    ``upper``), the rows behind it (``count``), the per-side sums a sequential test pools.
    """

    metric: str
    value: float | None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def insufficient_data(self) -> bool:
        return bool(self.details.get(INSUFFICIENT_DATA))

    @property
    def typed(self) -> RolloutDetails:
        return RolloutDetails.from_dict(self.details)

    def to_dict(self) -> dict[str, Any]:
        return json_safe({"metric": self.metric, "value": self.value, "details": self.details})


def _insufficient(metric: str, reason: str, /, **details: Any) -> Comparison:
    return Comparison(metric, None, {**details, INSUFFICIENT_DATA: True,
                                     REASON_KEY: f"{INSUFFICIENT_DATA_REASON}: {reason}"})


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")


# --- shadow: the same requests through both versions --------------------------------

def _decisions(scores: np.ndarray, threshold: float | None) -> np.ndarray:
    return scores >= threshold if threshold is not None else scores


def shadow_comparisons(request_ids: Sequence[Any], production: Sequence[Any], candidate: Sequence[Any], *,
                       alpha: float, threshold: float | None = defaults.ROLLOUT_DECISION_THRESHOLD,
                       top: int = defaults.ROLLOUT_TOP_DIFFERENCES,
                       min_pairs: int = defaults.ROLLOUT_MIN_EVENTS) -> list[Comparison]:
    r"""Disagreement of the candidate with production on the same requests (paired by request id).

    * ``flip_rate``: the share of requests whose decision differs (score at or above
      `threshold` on one side only; ``threshold=None`` compares the predictions
      themselves, for class labels), with its Wilson interval; details list the
      `top` largest score differences with their request ids.
    * ``score_ks`` and ``score_wasserstein``: the KS statistic and the normalised
      Wasserstein distance (production as the reference) of the two score
      distributions (`driftline.detectors.stats.two_sample`), numeric scores only.

    A pair with a missing or non-finite score on either side is dropped; fewer than
    `min_pairs` pairs is insufficient data.
    """
    _check_alpha(alpha)
    ids = np.asarray(request_ids, dtype=object)
    prod = np.asarray(production, dtype=object)
    cand = np.asarray(candidate, dtype=object)
    if not (ids.shape == prod.shape == cand.shape) or ids.ndim != 1:
        raise ValueError(f"shadow pairs need three equal-length 1-d arrays, got {ids.shape}, {prod.shape}, "
                         f"{cand.shape}")
    if top < 0:
        raise ValueError(f"top must not be negative, got {top}")
    numeric = threshold is not None or _all_numeric(prod, cand)
    if numeric:
        prod_scores, cand_scores = _as_floats(prod), _as_floats(cand)
        keep = np.isfinite(prod_scores) & np.isfinite(cand_scores)
        ids, prod_scores, cand_scores = ids[keep], prod_scores[keep], cand_scores[keep]
        flipped = _decisions(prod_scores, threshold) != _decisions(cand_scores, threshold)
    else:
        keep = np.array([p is not None and c is not None for p, c in zip(prod, cand)], dtype=bool)
        ids, prod, cand = ids[keep], prod[keep], cand[keep]
        flipped = prod != cand
    pairs = int(ids.size)
    if pairs < min_pairs:
        return [_insufficient(metric, f"{pairs} paired requests < {min_pairs}", count=pairs)
                for metric in ((FLIP_RATE, SCORE_KS, SCORE_WASSERSTEIN) if numeric else (FLIP_RATE,))]
    flips = int(np.count_nonzero(flipped))
    lower, upper = wilson_interval(flips, pairs, alpha)
    flip_details: dict[str, Any] = {"count": pairs, "flips": flips, "lower": lower, "upper": upper,
                                    "sums": {CANDIDATE_KEY: [pairs, flips, flips]}}
    results = []
    if numeric:
        difference = cand_scores - prod_scores
        order = np.argsort(-np.abs(difference), kind="stable")[:top]
        flip_details["largest_differences"] = [
            {"request_id": ids[i], PRODUCTION_KEY: float(prod_scores[i]), CANDIDATE_KEY: float(cand_scores[i]),
             "difference": float(difference[i])} for i in order]
        results.append(Comparison(FLIP_RATE, flips / pairs, flip_details))
        ks, p_value = two_sample.ks_2samp(prod_scores, cand_scores)
        means = {PRODUCTION_KEY: float(prod_scores.mean()), CANDIDATE_KEY: float(cand_scores.mean()),
                 "count": pairs}
        results.append(Comparison(SCORE_KS, ks, {**means, "p_value": p_value}))
        results.append(Comparison(SCORE_WASSERSTEIN, two_sample.wasserstein_normed(prod_scores, cand_scores), means))
    else:
        flip_details["largest_differences"] = [
            {"request_id": ids[i], PRODUCTION_KEY: prod[i], CANDIDATE_KEY: cand[i]}
            for i in np.flatnonzero(flipped)[:top]]
        results.append(Comparison(FLIP_RATE, flips / pairs, flip_details))
    return results


def _all_numeric(*arrays: np.ndarray) -> bool:
    return all(v is None or (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool))
               for array in arrays for v in array)


def _as_floats(values: np.ndarray) -> np.ndarray:
    try:
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("shadow scores must be numbers when a decision threshold is given") from None


def sample_pairs(production: Sequence[Mapping[str, Any]], candidate: Sequence[Mapping[str, Any]]
                 ) -> tuple[list[Any], list[Any], list[Any]]:
    """``(request ids, production's predictions, the candidate's)`` of the requests both samples hold.

    The window states' samples are keyed by request id (coordinated bottom-k), so a shadow's
    window samples the requests production's does. A record without a request id or a
    prediction is left out, as is a request id's second record on one side. Predictions are
    made comparable: lists of two class probabilities become the positive class's, longer
    ones the winning class's index, other values are kept as they are (a list that is not
    of finite numbers pairs as nothing).
    """
    theirs: dict[Any, Any] = {}
    for record in candidate:
        request_id, prediction = record.get("request_id"), _comparable(record.get("prediction"))
        if request_id is not None and prediction is not None:
            theirs.setdefault(request_id, prediction)
    ids, prod, cand, seen = [], [], [], set()
    for record in production:
        request_id, prediction = record.get("request_id"), _comparable(record.get("prediction"))
        if request_id in theirs and prediction is not None and request_id not in seen:
            seen.add(request_id)
            ids.append(request_id)
            prod.append(prediction)
            cand.append(theirs[request_id])
    return ids, prod, cand


def _comparable(prediction: Any) -> Any:
    if isinstance(prediction, (list, tuple)):
        try:
            probabilities = np.asarray(prediction, dtype=np.float64)
        except (TypeError, ValueError):
            return None
        if probabilities.ndim != 1 or probabilities.size == 0 or not np.isfinite(probabilities).all():
            return None
        return float(probabilities[1]) if probabilities.size == 2 else f"class {int(np.argmax(probabilities))}"
    return prediction


def sample_comparisons(production: Sequence[Mapping[str, Any]], candidate: Sequence[Mapping[str, Any]], *,
                       alpha: float, threshold: float | None = defaults.ROLLOUT_DECISION_THRESHOLD,
                       top: int = defaults.ROLLOUT_TOP_DIFFERENCES,
                       min_pairs: int = defaults.ROLLOUT_MIN_PAIRS) -> list[Comparison]:
    """`shadow_comparisons` of the requests two windows' samples share (`sample_pairs`).

    Numeric predictions (scores, two-class probabilities) flip at `threshold`; class labels
    (and a window mixing them with scores) flip on any difference.
    """
    ids, prod, cand = sample_pairs(production, candidate)
    numeric = _all_numeric(np.asarray(prod, dtype=object), np.asarray(cand, dtype=object))
    return shadow_comparisons(ids, prod, cand, alpha=alpha, threshold=threshold if numeric else None, top=top,
                              min_pairs=min_pairs)


# --- canary and A/B: each version's own traffic ---------------------------------------

def error_rate_comparison(production_errors: int, production_events: int, candidate_errors: int,
                          candidate_events: int, *, alpha: float,
                          min_events: int = defaults.ROLLOUT_MIN_EVENTS) -> Comparison:
    """Candidate error rate minus production's, with Newcombe's interval (`newcombe_interval`).

    Fewer than `min_events` events on either side is insufficient data.
    """
    _check_alpha(alpha)
    sums = {PRODUCTION_KEY: [production_events, production_errors, production_errors],
            CANDIDATE_KEY: [candidate_events, candidate_errors, candidate_errors]}
    count = min(production_events, candidate_events)
    if count < min_events:
        return _insufficient(ERROR_RATE_DELTA, f"{count} events < {min_events}", count=count, sums=sums)
    difference, lower, upper = newcombe_interval(production_errors, production_events, candidate_errors,
                                                 candidate_events, alpha)
    return Comparison(ERROR_RATE_DELTA, difference, {
        PRODUCTION_KEY: production_errors / production_events, CANDIDATE_KEY: candidate_errors / candidate_events,
        "lower": lower, "upper": upper, "count": count, "sums": sums})


def latency_comparisons(production: LatencyHistogram | None, candidate: LatencyHistogram | None, *,
                        min_events: int = defaults.ROLLOUT_MIN_EVENTS) -> list[Comparison]:
    """Candidate p50 / p95 / p99 latency minus production's (ms), from the two windows' histograms.

    Details carry each side's quantile and ``relative`` (candidate / production - 1). The
    histograms are within 1 % of the exact quantiles (`LatencyHistogram`); there is no
    interval. Fewer than `min_events` latencies on either side is insufficient data.
    """
    counts = [0 if h is None else h.count for h in (production, candidate)]
    count = min(counts)
    metrics = ((0.5, P50_DELTA_MS), (0.95, P95_DELTA_MS), (0.99, P99_DELTA_MS))
    if count < min_events or production is None or candidate is None:
        return [_insufficient(metric, f"{count} latencies < {min_events}", count=count) for _, metric in metrics]
    results = []
    for q, metric in metrics:
        prod, cand = production.quantile(q), candidate.quantile(q)
        relative = cand / prod - 1.0 if prod else None
        results.append(Comparison(metric, cand - prod, {PRODUCTION_KEY: prod, CANDIDATE_KEY: cand,
                                                        "relative": relative, "count": count}))
    return results


def quality_sums(summary: LabelSummary | None) -> tuple[str, int, float, float, bool] | None:
    """``(metric, rows, sum, sum of squares, higher is better)`` of the per-row quality a mean compares.

    Binary and multiclass: accuracy (a row is 1 when right; binary at threshold 0.5, as
    `quality_metrics` counts it); regression: the mean absolute error. None without labels.
    """
    if summary is None or summary.task is None or summary.n == 0:
        return None
    if summary.task == BINARY:
        cut = summary.bins // 2
        correct = float(summary.positives[cut:].sum() + summary.negatives[:cut].sum())
        return ACCURACY, int(summary.n), correct, correct, True
    if summary.task == MULTICLASS:
        correct = float(sum(c for (label, guess), c in summary.confusion.items() if label == guess))
        return ACCURACY, int(summary.n), correct, correct, True
    if summary.task == REGRESSION:
        return MAE, int(summary.n), float(summary.sum_abs_error), float(summary.sum_sq_error), False
    raise ValueError(f"unknown label task {summary.task!r}")


def quality_comparison(production: LabelSummary | None, candidate: LabelSummary | None, *, alpha: float,
                       min_labels: int = defaults.ROLLOUT_MIN_LABELS) -> Comparison:
    """Candidate quality minus production's on the labels joined so far, with a normal interval.

    Accuracy (binary, multiclass: a difference of proportions, Newcombe's interval) or
    MAE (regression: Welch's interval), `quality_sums`; ``higher_is_better`` says which
    way is better. Fewer than `min_labels` labels on either side, or different tasks, is
    insufficient data (the sums still travel, so a sequential test can pool them).
    """
    _check_alpha(alpha)
    prod, cand = quality_sums(production), quality_sums(candidate)
    if prod is None or cand is None:
        return _insufficient(QUALITY_DELTA, "no labels joined on one side", count=0)
    if prod[0] != cand[0]:
        return _insufficient(QUALITY_DELTA, f"the versions' label tasks differ ({production.task}, "
                                            f"{candidate.task})", count=0)
    metric, higher_is_better = prod[0], prod[4]
    sums = {PRODUCTION_KEY: list(prod[1:4]), CANDIDATE_KEY: list(cand[1:4])}
    count = min(prod[1], cand[1])
    common = {"metric": metric, "higher_is_better": higher_is_better, "count": count, "sums": sums}
    if count < min_labels:
        return _insufficient(QUALITY_DELTA, f"{count} labels < {min_labels}", **common)
    if metric == ACCURACY:
        difference, lower, upper = newcombe_interval(int(prod[2]), prod[1], int(cand[2]), cand[1], alpha)
    else:
        difference, lower, upper = mean_difference_interval(*prod[1:4], *cand[1:4], alpha)
    return Comparison(QUALITY_DELTA, difference, {**common, PRODUCTION_KEY: prod[2] / prod[1],
                                                  CANDIDATE_KEY: cand[2] / cand[1], "lower": lower, "upper": upper})


def drift_comparison(result: WindowResult | None) -> Comparison:
    """The candidate's prediction drift against its own baseline (`prediction_drift`'s result), as a comparison."""
    if result is None:
        return _insufficient(CANDIDATE_DRIFT, "no prediction drift result (no baseline for the candidate)")
    if result.insufficient_data:
        return _insufficient(CANDIDATE_DRIFT, str(result.details.get(REASON_KEY, "too few predictions")))
    value = result.value if result.value is None or math.isfinite(result.value) else None
    return Comparison(CANDIDATE_DRIFT, value, {"drift": bool(result.breached), "count": result.details.get("rows")})


def compare_states(production: WindowState, candidate: WindowState, *, alpha: float,
                   min_events: int = defaults.ROLLOUT_MIN_EVENTS, min_labels: int = defaults.ROLLOUT_MIN_LABELS,
                   candidate_drift: WindowResult | None = None,
                   latency_part: str = LATENCY_TOTAL) -> list[Comparison]:
    """Every canary / A/B comparison of one window from the two versions' window states.

    Error rate, latency (the whole request, ``total``; a shadow passes ``compute``, since its
    copies wait in a deprioritised queue that says nothing of how it would serve), quality on
    joined labels, and the candidate's prediction drift when `candidate_drift` is given.
    """
    results = [error_rate_comparison(production.errors, production.events, candidate.errors, candidate.events,
                                     alpha=alpha, min_events=min_events)]
    if latency_part not in production.latency or latency_part not in candidate.latency:
        latency_part = LATENCY_TOTAL  # producers that log only the whole request's time
    results += latency_comparisons(production.latency.get(latency_part), candidate.latency.get(latency_part),
                                   min_events=min_events)
    results.append(quality_comparison(production.labels, candidate.labels, alpha=alpha, min_labels=min_labels))
    if candidate_drift is not None:
        results.append(drift_comparison(candidate_drift))
    return results
