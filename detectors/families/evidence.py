"""Sequential evidence: a window's drift results folded into per-stream e-detectors, paging at a stated rate.

Each stream (a feature's or the prediction's drift, one estimated- or realized-quality metric, one embedding,
of one model version) turns its window into a normal score ``z`` and advances a mixture CUSUM
e-detector (`driftline.detectors.stats.sequential.cusum_step`):

- drift: ``z = Phi^-1(1 - p)`` of the window's own test, the p-value the per-window rule judges
  (`significance_p_value`: KS, or the pooled chi-square; with the missing-rate test beside it, two
  times the smaller p-value, Bonferroni);
- estimated quality: ``z = (training - estimate) / standard error`` (a drop is positive);
- realized quality (one stream per model_quality metric): ``z = (reference - realized) / standard error``
  (a worsening is positive: the sign flips for errors), the effect floor the threshold's distance from the
  reference. With a reference from the rows the model was fitted on (``reference_rows`` "training rows":
  in-sample, optimistic) the stream first learns the live level from its first
  `defaults.QUALITY_LIVE_REFERENCE_WINDOWS` judged windows (no evidence meanwhile), then scores
  ``z = (level - realized) / (spread * sqrt(1 + 1/N))`` with the spread the larger of the N windows'
  standard deviation and the window's standard error, and the floor ``max(floor, quality_z * spread)``;
- embedding drift (one stream per embedding name): ``z`` of the family's own rule as one p-value,
  Bonferroni over its tests (MMD², components by Simes, clusters, whitened mean); the family has
  no effect-size floor, so every window meets it.

A stream **pages** when its e-value is at or over the paging line ``A`` and its effect, averaged
over the current run of evidence, clears its floor (the per-window rule's: a distance at or over
its threshold, a missing-rate change of at least its delta, an estimate at least ``max_drop`` below
training), so a huge window never pages on a trivially small drift, and a drift under its floor does
not page on the one window noise lifted over it. The fixed Wasserstein floor (a categorical feature's
Jensen-Shannon floor) is judged on the run's average distance with its sampling noise removed in
quadrature (`distance_excess`), not on each window's distance less the whole noise as the per-window
rule does for Wasserstein: that margin, right for one window, reads a drift well over its floor as
under it for good (at 1 000 rows a drift 1.3 times the floor reads 0.9-1.07 times). The line follows
from the stated rate (`PagingPolicy`): ``A = streams * windows per month / rate``, so
the version's streams together raise at most ``rate`` false pages a month (Bonferroni on
the rates). The dataset verdict pages when at least ``dataset_drift_share`` of the judged
features page. A stream's evidence restarts when it falls back under the line after
paging (the drift ended), and a new model version starts from nothing.

The p-values compare each window with the training baseline, which all windows share: the
guarantee is exact for a baseline much larger than a window and approximate otherwise
(the effect-size floor guards large windows; bench/detection_quality.py measures it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, NamedTuple

import numpy as np

from driftline import defaults
from driftline.detectors.families.results import WindowResult
from driftline.detectors.stats.noise import distance_excess
from driftline.detectors.stats.sequential import cusum_step, evidence, window_z
from driftline.detectors.stats import registry
from driftline.detectors.thresholds.decision import THRESHOLD_SOURCES, floor_margin, significance_p_value, significance_test
from driftline.detectors.thresholds.paging import PagingPolicy
from driftline.vocabulary import (CATEGORICAL, DATA_DRIFT, EMBEDDING_DRIFT, DATASET_DRIFT, ESTIMATED_QUALITY,
                                  ESTIMATION_INVALID, EXPLAINED_BY_KEY, JENSENSHANNON, MODEL_QUALITY,
                                  PREDICTION_DRIFT, QUALITY_ERRORS, QUALITY_FROM_TRAINING_ROWS, QUALITY_SCORES,
                                  THRESHOLD_SOURCE_KEY, WASSERSTEIN)

__all__ = ["EVIDENCE_KEY", "PagingPolicy", "StreamState", "WindowScore", "advance_window", "stream_key", "stream_name",
           "window_score"]

# The key of a result's details that carries its evidence.
EVIDENCE_KEY = "evidence"
_STREAM_FAMILIES = (DATA_DRIFT, PREDICTION_DRIFT, ESTIMATED_QUALITY, EMBEDDING_DRIFT, MODEL_QUALITY)


@dataclass
class StreamState:
    """One stream's e-detector between windows (stored as JSON by the scheduler)."""

    log_state: list[float]
    # per component: the window start (ms) its current run of evidence began at
    since_ms: list[int | None] = field(default_factory=list)
    windows: int = 0
    last_window_start_ms: int | None = None
    above: bool = False  # over the line since its last restart
    effect_sum: float = 0.0  # windows' measured effect over its floor, summed over the current run of evidence
    effect_windows: int = 0
    # the fixed-floor Wasserstein distance and its sampling noise (over the floor), summed over the same run
    distance_sum: float = 0.0
    noise_sum: float = 0.0
    distance_windows: int = 0
    # realized quality against an in-sample reference: the live level's windows, their sum and sum of squares
    level_windows: int = 0
    level_sum: float = 0.0
    level_square_sum: float = 0.0

    @classmethod
    def fresh(cls, components: int) -> "StreamState":
        return cls([0.0] * components, [None] * components)

    def to_dict(self) -> dict[str, Any]:
        return {"log_state": [float(v) for v in self.log_state], "since_ms": list(self.since_ms),
                "windows": self.windows, "last_window_start_ms": self.last_window_start_ms, "above": self.above,
                "effect_sum": _finite(self.effect_sum),
                "effect_windows": self.effect_windows, "distance_sum": _finite(self.distance_sum),
                "noise_sum": _finite(self.noise_sum), "distance_windows": self.distance_windows,
                "level_windows": self.level_windows, "level_sum": _finite(self.level_sum),
                "level_square_sum": _finite(self.level_square_sum)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, components: int) -> "StreamState":
        """A stored state; a fresh one when it is missing or does not fit `components` (the grid changed)."""
        if not isinstance(data, Mapping):
            return cls.fresh(components)
        log_state = data.get("log_state")
        since = data.get("since_ms")
        if (not isinstance(log_state, list) or len(log_state) != components
                or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in log_state)):
            return cls.fresh(components)
        if not isinstance(since, list) or len(since) != components:
            since = [None] * components
        last = data.get("last_window_start_ms")
        return cls([float(v) for v in log_state], [s if isinstance(s, int) else None for s in since],
                   int(data.get("windows") or 0), last if isinstance(last, int) else None, bool(data.get("above")),
                   float(data.get("effect_sum") or 0.0), int(data.get("effect_windows") or 0),
                   float(data.get("distance_sum") or 0.0), float(data.get("noise_sum") or 0.0),
                   int(data.get("distance_windows") or 0), int(data.get("level_windows") or 0),
                   float(data.get("level_sum") or 0.0), float(data.get("level_square_sum") or 0.0))


def _finite(value: float) -> float:
    return float(value) if math.isfinite(value) else 1e300


class WindowScore(NamedTuple):
    """One window's evidence: its normal score and its effects over their floors (1: at the floor)."""

    z: float
    margin: float  # the effects judged window by window (PSI and the missing rate beyond their noise; a drop)
    # the fixed-floor distance averaged over the run (a numeric feature's Wasserstein, a categorical one's
    # Jensen-Shannon) over its floor, as measured, and its sampling noise over the same floor
    distance: float | None = None
    noise: float = 0.0
    rule_margin: float | None = None  # the per-window rule's largest margin (None: `margin`)

    def window_margin(self) -> float:
        """The per-window rule's margin: the largest effect over its floor, each beyond its noise."""
        return self.margin if self.rule_margin is None else self.rule_margin


def stream_key(result: WindowResult) -> str | None:
    """The stream a result feeds ("detector/feature/metric"), or None when it feeds none."""
    if result.segment or result.detector not in _STREAM_FAMILIES or result.metric == ESTIMATION_INVALID:
        return None  # estimation_invalid is a test over windows already: it alerts on its own verdict
    if result.detector == MODEL_QUALITY and result.metric not in QUALITY_SCORES and result.metric not in QUALITY_ERRORS:
        return None  # a metric without a direction (bias, R^2) is reported, never judged
    return stream_name(result.detector, result.feature, result.metric)


def stream_name(detector: str, feature: str | None, metric: str) -> str:
    """A stream's name, "detector/feature/metric" (as stored and as /metrics labels it)."""
    return f"{detector}/{feature or ''}/{metric}"


def _drift_score(details: Mapping[str, Any]) -> WindowScore | None:
    tests = details.get("tests")
    if not isinstance(tests, Mapping):
        return None
    kind = str(details.get("kind"))
    significance = tests.get(significance_test(kind))
    if not isinstance(significance, Mapping) or significance.get("p_value") is None:
        return None
    p_value = significance_p_value(significance)  # the per-window rule's p-value, before its BH correction
    source = str(details.get(THRESHOLD_SOURCE_KEY) or "fixed")
    judged = [name for name in (s.key for s in registry.effects(kind))
              if isinstance(tests.get(name), Mapping) and tests[name].get("value") is not None
              and tests[name].get("threshold") is not None]
    margins = {name: floor_margin(name, tests[name], float(tests[name]["threshold"]), source) for name in judged}
    distance, noise = None, 0.0
    averaged = JENSENSHANNON if kind == CATEGORICAL else WASSERSTEIN
    if averaged in judged and float(tests[averaged]["threshold"]) > 0:
        # judged on the run's average, its noise removed there (`_run_effect`), not on each window's
        floor = float(tests[averaged]["threshold"])
        distance = float(tests[averaged]["value"]) / floor
        if source != THRESHOLD_SOURCES[1]:  # a floor from the reference already allows for the noise
            noise = float(tests[averaged].get("noise") or 0.0) / floor
    rule_margin = max(margins.values(), default=0.0)
    if distance is not None:
        margins.pop(averaged)
    missing = tests.get("missing")
    if isinstance(missing, Mapping) and missing.get("p_value") is not None:
        p_value = min(1.0, 2.0 * min(p_value, float(missing["p_value"])))
        if missing.get("threshold") is not None:
            margins["missing"] = floor_margin("missing", {"value": abs(float(missing["value"])
                                                                        - float(missing["reference"]))},
                                              float(missing["threshold"]), THRESHOLD_SOURCES[1])
            rule_margin = max(rule_margin, margins["missing"])
    margin = max(margins.values(), default=0.0)
    if details.get(EXPLAINED_BY_KEY):  # a serving bug (skew) explains it: the skew alert says so, not a drift page
        return WindowScore(float(window_z(p_value)), 0.0)
    return WindowScore(float(window_z(p_value)), margin, distance, noise, rule_margin)


def _embedding_score(details: Mapping[str, Any]) -> WindowScore | None:
    """The embedding family's own rule as one p-value: Bonferroni over its tests (the component test's
    p-value is Simes', the smallest BH-adjusted one); no effect-size floor, as the family has none."""
    found = [part.get("p_value") for part in (details.get("mmd"), details.get("clusters"), details.get("mean"))
             if isinstance(part, Mapping)]
    components = details.get("drifted_components")
    if isinstance(components, Mapping) and components.get("p_values"):
        found.append(min(float(p) for p in components["p_values"]))
    p_values = [float(p) for p in found if isinstance(p, (int, float)) and math.isfinite(p)]
    if not p_values:
        return None
    return WindowScore(float(window_z(min(1.0, len(p_values) * min(p_values)))), 1.0)


def window_score(result: WindowResult) -> WindowScore | None:
    """One result's evidence (`WindowScore`), or None when the window carries no evidence."""
    if result.insufficient_data:
        return None
    details = result.details or {}
    if result.detector in (DATA_DRIFT, PREDICTION_DRIFT):
        return _drift_score(details)
    if result.detector == EMBEDDING_DRIFT:
        return _embedding_score(details)
    if result.detector == ESTIMATED_QUALITY:
        training, error = details.get("training"), details.get("standard_error")
        if result.value is None or training is None or not error or not error > 0:
            return None
        z = (float(training) - float(result.value)) / float(error)
        if not math.isfinite(z):
            return None
        drop = float(training) - float(result.threshold) if result.threshold is not None else 0.0
        margin = (float(training) - float(result.value)) / drop if drop > 0 else float(result.threshold is not None
                                                                                      and result.value <= result.threshold)
        return WindowScore(float(np.clip(z, -10.0, 37.0)), margin)
    if result.detector == MODEL_QUALITY:
        return _quality_score(result, details)
    return None


def _worsening(result: WindowResult, level: float) -> float:
    """How much worse the window is than `level`: a score's drop, an error's rise."""
    return (level - float(result.value)) * (1.0 if result.metric in QUALITY_SCORES else -1.0)


def _quality_score(result: WindowResult, details: Mapping[str, Any]) -> WindowScore | None:
    """Realized quality against the reference it was judged on; the effect floor is the threshold's distance."""
    reference = details.get("expected", details.get("training"))
    error = details.get("standard_error")
    if result.value is None or result.threshold is None or reference is None or not error or not error > 0:
        return None
    worse = _worsening(result, float(reference))
    z = worse / float(error)
    if not math.isfinite(z):
        return None
    drop = abs(float(reference) - float(result.threshold))
    margin = worse / drop if drop > 0 else float(result.breached)
    return WindowScore(float(np.clip(z / _pooled(details), -10.0, 37.0)), margin)


def _pooled(details: Mapping[str, Any]) -> float:
    """sqrt(k) for a window judged on labels pooled over k windows: consecutive pools share labels, and the
    sum of their z's grows sqrt(k) times faster than independent windows' would under no drift."""
    return math.sqrt(max(1, int(details.get("pooled_windows") or 1)))


def _in_sample(result: WindowResult) -> bool:
    """Whether a realized-quality result was judged against a reference measured on the training rows."""
    return result.detector == MODEL_QUALITY and (result.details or {}).get("reference_rows") == QUALITY_FROM_TRAINING_ROWS


def _live_level_score(result: WindowResult, state: StreamState, warmup: int) -> tuple[WindowScore | None, StreamState]:
    """An in-sample reference is optimistic: the first `warmup` windows set the live level and its spread, the
    later ones are scored against them (module docstring). Returns the score and the state with the level."""
    details = result.details or {}
    if result.insufficient_data or result.value is None or result.threshold is None \
            or not math.isfinite(float(result.value)):
        return None, state
    value = float(result.value)
    if state.level_windows < warmup:
        return None, replace(state, level_windows=state.level_windows + 1, level_sum=state.level_sum + value,
                             level_square_sum=state.level_square_sum + value * value)
    n = state.level_windows
    level = state.level_sum / n
    spread = math.sqrt(max(0.0, (state.level_square_sum - n * level * level) / max(n - 1, 1)))
    spread = max(spread, float(details.get("standard_error") or 0.0)) * math.sqrt(1.0 + 1.0 / n)
    if not spread > 0:
        return None, state
    worse = _worsening(result, level)
    reference = details.get("expected", details.get("training"))
    floor = float(details.get("minimum_margin") or 0.0)
    if result.metric not in QUALITY_SCORES and reference:  # an error's floor is relative to the level it is from
        floor *= level / float(reference)
    drop = max(floor, float(details.get("z") or defaults.QUALITY_Z) * spread)
    return WindowScore(float(np.clip(worse / spread / _pooled(details), -10.0, 37.0)), worse / drop), state


def _run_effect(state: StreamState, score: WindowScore, running: bool) -> tuple[StreamState, float]:
    """The run's sums with this window added (a new run when the evidence was not running) and its effect over
    the floor: the largest of the measured effects' average and the average distance beyond its noise."""
    past = state if running else StreamState([])
    seen = score.distance is not None
    run = StreamState([], effect_sum=past.effect_sum + score.margin, effect_windows=past.effect_windows + 1,
                      distance_sum=past.distance_sum + (score.distance if seen else 0.0),
                      noise_sum=past.noise_sum + (score.noise if seen else 0.0),
                      distance_windows=past.distance_windows + int(seen))
    effect = run.effect_sum / run.effect_windows
    if run.distance_windows:
        effect = max(effect, distance_excess(run.distance_sum / run.distance_windows,
                                             run.noise_sum / run.distance_windows, run.distance_windows))
    return run, effect


def _step(state: StreamState, score: WindowScore, window_start_ms: int, log_line: float,
          policy: PagingPolicy) -> tuple[StreamState, dict[str, Any]]:
    drifts = np.asarray(policy.drifts, dtype=np.float64)
    before = np.asarray(state.log_state, dtype=np.float64)
    # a component that had fallen to 1 or below starts its run of evidence at this window
    since = [window_start_ms if b <= 0.0 or s is None else s for b, s in zip(before, state.since_ms)]
    z = score.z
    after = cusum_step(before, z, drifts)
    after = np.minimum(after, log_line + math.log(len(drifts) * policy.cap))
    log_e = evidence(after)
    above = log_e >= log_line
    # the effect's size over the run of evidence, not one window's noisy value: a drift just over its floor
    # pages once the evidence is in, one under it never does (however many windows luck lifts over it)
    run, effect = _run_effect(state, score, evidence(before) > 0.0)
    paging = bool(above and effect >= 1.0)
    info = {"e_value": float(math.exp(min(log_e, 700.0))), "log_e_value": log_e, "line": float(math.exp(log_line)),
            "z": z, "floor": bool(effect >= 1.0), "effect_over_floor": effect, "paging": paging, "since_window_start_ms": since[int(np.argmax(after))],
            "windows": state.windows + 1}
    if state.above and not above:  # the drift ended: the next episode starts from nothing
        fresh = StreamState.fresh(len(drifts))
        fresh.windows, fresh.last_window_start_ms = state.windows + 1, window_start_ms
        info["restarted"] = True
        return fresh, info
    return StreamState([float(v) for v in after], since, state.windows + 1, window_start_ms,
                       bool(state.above or above), run.effect_sum, run.effect_windows, run.distance_sum, run.noise_sum,
                       run.distance_windows), info


def advance_window(results: Iterable[WindowResult], states: Mapping[str, StreamState], window_start_ms: int,
                   policy: PagingPolicy) -> dict[str, StreamState]:
    """Advance every stream with this window's results; writes ``details["evidence"]`` on each (in place).

    `states` holds the streams' states before the window (missing: fresh). Returns the states
    after it, for the streams that took a step. A stream whose state already saw this window
    or a later one (a window evaluated again, or out of order) is not advanced.
    The dataset result's evidence lists the paging features.
    """
    results = list(results)
    keyed = [(stream_key(r), r) for r in results]
    streams = sum(1 for key, _ in keyed if key is not None)
    log_line = math.log(policy.line(streams))
    updated: dict[str, StreamState] = {}
    paging_features: list[str] = []
    judged_features = 0
    for key, result in keyed:
        if key is None:
            continue
        state = states.get(key) or StreamState.fresh(len(policy.drifts))
        if len(state.log_state) != len(policy.drifts):
            state = StreamState.fresh(len(policy.drifts))
        if state.last_window_start_ms is not None and state.last_window_start_ms >= window_start_ms:
            continue
        if _in_sample(result):
            learned = state.level_windows
            score, state = _live_level_score(result, state, policy.live_reference_windows)
            if score is None:
                if state.level_windows != learned:  # a window of the live level: kept, not scored
                    updated[key] = replace(state, last_window_start_ms=window_start_ms)
                    result.details[EVIDENCE_KEY] = {"paging": False, "level_windows": state.level_windows,
                                                    "line": float(math.exp(log_line))}
                continue
        else:
            score = window_score(result)
        if score is None:
            continue
        new_state, info = _step(state, score, window_start_ms, log_line, policy)
        if state.level_windows:  # the live level outlives a restart: it is the model's, not the episode's
            new_state = replace(new_state, level_windows=state.level_windows, level_sum=state.level_sum,
                                level_square_sum=state.level_square_sum)
            info["level"] = state.level_sum / state.level_windows
        updated[key] = new_state
        result.details[EVIDENCE_KEY] = info
        if result.detector == DATA_DRIFT:
            judged_features += 1
            if info["paging"]:
                paging_features.append(result.feature or "")
    for result in results:
        if result.detector == DATASET_DRIFT and not result.segment and judged_features:
            share = len(paging_features) / judged_features
            needed = result.threshold if result.threshold is not None else defaults.DATASET_DRIFT_SHARE
            result.details[EVIDENCE_KEY] = {"paging": bool(share >= needed), "paging_features": sorted(paging_features),
                                            "share": share, "line": float(math.exp(log_line))}
    return updated
