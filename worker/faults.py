"""Faults an operator can switch on in a running worker, so the monitor has real failures to find.

- `skew`: a serving-path bug. The worker stops calling the shared transform for
  `debt_to_income` and uses an inline copy that divides the monthly debt by the
  *annual* income instead of the monthly income, a units slip that makes the served
  feature 12 times smaller than the training transform's for the same raw input.
  The logged `inputs` are untouched, so re-running the shared transform on them
  (the parity-skew check) exposes the difference.
- `latency_ms` / `latency_fraction`: a `latency_fraction` share of requests (spread
  evenly: with 0.05, every twentieth) spends `latency_ms` more in compute (a slow
  dependency, a throttled device), which pushes p99 latency over its SLO while the
  model's outputs stay correct. With `latency_version` set, only the answers of that
  model version are slowed (a candidate slower than production, for a canary to catch).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from driftline.names import name_problem
from driftline.worker.feature_transform import transform_row

KNOWN = ("skew", "latency_ms", "latency_fraction", "latency_version")


@dataclass
class Faults:
    skew: bool = False
    latency_ms: float = 0.0
    latency_fraction: float = 0.0
    latency_version: str | None = None  # None: every version's answers are slowed
    # Accumulates latency_fraction per request; a request is slowed each time it passes 1.
    _slow_credit: float = field(default=0.0, repr=False, compare=False)

    def update(self, changes: Mapping[str, Any]) -> None:
        """Apply a partial update from the admin endpoint; raises ValueError naming the bad field."""
        unknown = set(changes) - set(KNOWN)
        if unknown:
            raise ValueError(f"unknown fault {sorted(unknown)[0]!r}; known: {', '.join(KNOWN)}")
        new = self.as_dict()
        if "skew" in changes:
            if not isinstance(changes["skew"], bool):
                raise ValueError("skew: expected true or false")
            new["skew"] = changes["skew"]
        for name, upper in (("latency_ms", 60_000.0), ("latency_fraction", 1.0)):
            if name in changes:
                value = changes[name]
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= upper:
                    raise ValueError(f"{name}: expected a number from 0 to {upper:g}")
                new[name] = float(value)
        if "latency_version" in changes:
            version = changes["latency_version"]
            if version is not None and name_problem(version) is not None:
                raise ValueError(f"latency_version: expected a version name or null, {name_problem(version)}")
            new["latency_version"] = version
        self.skew, self.latency_ms, self.latency_fraction = new["skew"], new["latency_ms"], new["latency_fraction"]
        self.latency_version = new["latency_version"]

    def as_dict(self) -> dict[str, Any]:
        return {"skew": self.skew, "latency_ms": self.latency_ms, "latency_fraction": self.latency_fraction,
                "latency_version": self.latency_version}

    def extra_latency_s(self, version: str | None = None) -> float:
        """The extra seconds the request answered by `version` spends (0.0 for most)."""
        if self.latency_ms <= 0 or self.latency_fraction <= 0:
            return 0.0
        if self.latency_version is not None and version != self.latency_version:
            return 0.0
        self._slow_credit += self.latency_fraction
        if self._slow_credit >= 1.0 - 1e-9:
            self._slow_credit -= 1.0
            return self.latency_ms / 1000.0
        return 0.0

    def serving_features(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The features the serving path computes: the shared transform, unless `skew` is on."""
        features = transform_row(inputs)
        if self.skew:
            features["debt_to_income"] = _buggy_debt_to_income(inputs)
        return features


def _buggy_debt_to_income(inputs: Mapping[str, Any]) -> float | None:
    debt, income = inputs.get("monthly_debt"), inputs.get("annual_income")
    if debt is None or income is None or income <= 0:
        return None
    return float(debt) / float(income)  # the bug: annual income where the monthly figure belongs
