"""The comparisons behind a rollout verdict, as the store keeps them (`RolloutVerdictDetails`)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from driftline.detectors.families.results import json_safe
from driftline.detectors.rollout.comparisons import CANDIDATE_KEY, PRODUCTION_KEY, Comparison
from driftline.detectors.rollout.verdict import RolloutVerdict
from driftline.vocabulary import INSUFFICIENT_DATA, RolloutVerdictDetails

__all__ = ["verdict_details"]


def verdict_details(reference: str, arms: Mapping[str, Sequence[Comparison]], verdict: RolloutVerdict,
                    alpha: float) -> dict[str, Any]:
    """One window's comparisons of each arm with `reference`, its shadow examples and the verdict's winner.

    `arms` maps each candidate version to that window's comparisons (`compare_states`,
    `sample_comparisons`), their intervals at level ``1 - alpha``. JSON-safe: numpy
    numbers become Python ones and infinite bounds None.
    """
    comparisons: list[Mapping[str, Any]] = []
    examples: list[Mapping[str, Any]] = []
    for arm, found in arms.items():
        for comparison in found:
            typed = comparison.typed
            comparisons.append({"arm": arm, "metric": comparison.metric, "value": comparison.value,
                                "lower": typed.lower, "upper": typed.upper, "count": typed.count,
                                INSUFFICIENT_DATA: comparison.insufficient_data})
            for example in typed.largest_differences or ():
                examples.append({"arm": arm, "request_id": example.get("request_id"),
                                 "production": example.get(PRODUCTION_KEY),
                                 "candidate": example.get(CANDIDATE_KEY),
                                 "difference": example.get("difference")})
    details = RolloutVerdictDetails(reference=reference, alpha=alpha, comparisons=comparisons, examples=examples,
                                    winner=verdict.winner)
    return json_safe(details.to_dict())
