"""The replay's simulated online feature store: when each served feature value was computed.

Features fetched from an online store (a credit bureau's score, the count of late payments) are
recomputed on a schedule, so the value a request is served is up to one refresh period old: here
each of `ONLINE_FEATURES` is refreshed every `REPLAY_FEATURE_REFRESH_SECONDS`, at a random phase per
request (applicants are refreshed at different times), and `computed_at` gives the event time of
each value, which the replay sends to the worker as the request's `feature_ts` and the worker puts
in the event. `stop_updating(name, at_ms)` is the `stale_features` scenario's incident: that
feature's pipeline stops at `at_ms`, so from then on every value served was computed before it and
its age grows, while the values themselves (each applicant's) stay as they were: no drift test sees it.
"""
from __future__ import annotations

import random

from driftline import defaults

__all__ = ["ONLINE_FEATURES", "FeatureClock", "freshness_table"]

ONLINE_FEATURES = ("credit_score", "num_late_payments")


class FeatureClock:
    """Event time (epoch ms) of each online feature's value at a request; see the module docstring."""

    def __init__(self, features: tuple[str, ...] = ONLINE_FEATURES, seed: int = 0,
                 refresh_s: float = defaults.REPLAY_FEATURE_REFRESH_SECONDS):
        self.features = features
        self.refresh_ms = refresh_s * 1000.0
        self.stopped: dict[str, int] = {}  # feature -> when its updates stopped (epoch ms)
        self._rng = random.Random(seed)

    def stop_updating(self, name: str, at_ms: int) -> None:
        if name not in self.features:
            raise ValueError(f"{name!r} is not an online feature; expected one of {', '.join(self.features)}")
        self.stopped.setdefault(name, int(at_ms))

    def computed_at(self, now_ms: int) -> dict[str, int]:
        """{feature: epoch ms its served value was computed} for a request at `now_ms`."""
        out = {}
        for name in self.features:
            last_update = min(now_ms, self.stopped.get(name, now_ms))
            out[name] = int(last_update - self._rng.uniform(0.0, self.refresh_ms))
        return out


def freshness_table(scenario: str) -> str:
    """The `[freshness]` TOML table `up` and the tests configure for a scenario that serves online features."""
    ages = ", ".join(f"{name} = {defaults.REPLAY_FEATURE_MAX_AGE_SECONDS}" for name in ONLINE_FEATURES)
    return f"\n# added by `driftline up --scenario {scenario}`\n[freshness]\nmax_age = {{{ages}}}\n"
