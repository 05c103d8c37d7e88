"""The scheduler's Prometheus metrics: the monitoring results in the store, served at http://127.0.0.1:PORT/metrics.

Values are read from the store (driftline.store.monitoring), never from this process' memory, so
several schedulers, or a restarted one, export the same values. A read is cached for
`defaults.SCHEDULER_METRICS_CACHE_SECONDS`: a scrape storm costs the store one read per interval.
Gauges describe each live model version's latest evaluated window (production and the active
rollout plan's versions; see driftline.store.monitoring). Segment results ([segments]) are exported only with
`scheduler_metrics_segments` (their number is bounded by `SEGMENT_MAX_VALUES` per column). Per-feature series
(a feature's drift scores, its decision, its evidence stream) only for the models `scheduler_metrics_detail_models`
names (globs); every version's drift is summed up in the store instead (drifted and judged features, the worst
statistic), so a fleet's series grow with its models, not with models x features.

| metric | type | labels | meaning |
|---|---|---|---|
| `driftline_feature_drift_score` | gauge | model, version, feature, test | detail models: a drift test's statistic: every statistic of the drift registry a feature ran (psi, ks, chi2, wasserstein, jensenshannon, and those the configuration turns on) and the missing rate |
| `driftline_feature_drifted` | gauge | model, version, feature | detail models: 1 when the feature drifted by the documented decision rule, else 0 |
| `driftline_drifted_features` | gauge | model, version | features that drifted (every feature, whatever the cap) |
| `driftline_judged_features` | gauge | model, version | features judged for drift |
| `driftline_max_feature_drift_score` | gauge | model, version, test | the highest decision statistic (`psi`) over the version's features |
| `driftline_dataset_drifted` | gauge | model, version | 1 when the dataset drifted (share of drifted features) |
| `driftline_prediction_drifted` | gauge | model, version | 1 when the model's output drifted |
| `driftline_data_quality_issues` | gauge | model, version, check | features (or the window) breaching a data-quality check |
| `driftline_estimated_quality` | gauge | model, version, metric, bound | quality estimated before labels; bound value, lower, upper |
| `driftline_estimated_quality_threshold` | gauge | model, version, metric | the estimate's alarm threshold (training less the allowed drop) |
| `driftline_estimation_invalid` | gauge | model, version | 1 when the estimates no longer hold (realized left their bands too often over the recent labelled windows): read the estimates as unreliable; 0 while they hold |
| `driftline_training_quality` | gauge | model, version, metric | the metric on the version's training data |
| `driftline_realized_quality` | gauge | model, version, metric | quality measured on joined labels |
| `driftline_window_end_timestamp_seconds` | gauge | model, version | end of the latest evaluated window (event time) |
| `driftline_window_events` | gauge | model, version | events in that window |
| `driftline_alerts_firing` | gauge | model, severity | alerts in the firing state |
| `driftline_windows_quarantined` | gauge | | windows whose evaluation failed, waiting for a retry |
| `driftline_dead_letters_total` | counter | | dead letters recorded in the store since it began |
| `driftline_rollout_verdict` | gauge | model, candidate, verdict | 1 for the rollout's latest verdict, 0 for the others: active rollouts, and those ended within `ROLLOUT_ENDED_VISIBLE_SECONDS` (their final verdict) |
| `driftline_metrics_store_read_seconds` | gauge | | how long the last read of the store took |
| `driftline_metrics_store_up` | gauge | | 1 when the last read of the store succeeded; 0: the other families are absent until it does |
| `driftline_segment_drifted_features` | gauge | model, version, segment | with `scheduler_metrics_segments`: features that drifted within the segment (`column=value`) |
| `driftline_segment_dataset_drifted` | gauge | model, version, segment | with `scheduler_metrics_segments`: 1 when the segment's dataset drifted |
| `driftline_embedding_drifted`, `driftline_embedding_drift_score` | gauge | model, version, embedding (, test) | embedding drift (driftline.scheduler.embedding_metrics) |
| `driftline_evidence_e_value`, `driftline_evidence_paging_line` | gauge | model, version, stream | sequential evidence and its paging line (driftline.scheduler.evidence_metrics) |
| `driftline_latency_seconds`, `driftline_latency_objective_seconds`, `driftline_tokens_per_second` | gauge | model, version, part, percentile / measure | latency quantiles per part, their objectives, token rates (driftline.scheduler.serving_metrics) |
| `driftline_scheduler_judging_lag_seconds` | gauge | model | now less the end of the model's latest judged window (any version) |
| `driftline_stream_watermark_timestamp_seconds` | gauge | | the collectors' low watermark (driftline.watermarks); absent before a collector records one, or while a partition has stored nothing |

Cardinality (docs/contract.md has the formula): a fixed number of series per live version (26 for a version with
one latency part and one estimate), whatever its features; a detail model's version adds at most
`defaults.SCHEDULER_METRICS_MAX_FEATURES` features with series of their own (drifted first, then by score), each
with one series per test it ran, and as many evidence streams (paging first, then the nearest to their line).
"""
from __future__ import annotations

import fnmatch
import logging
import threading
import time
from typing import Any, Callable, Iterable, Iterator, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.exc import InterfaceError, OperationalError, ProgrammingError

from driftline import defaults, vocabulary
from driftline.detectors.stats import registry as statistics
from driftline.metrics_endpoint import MetricsEndpoint
from driftline.store import db as store_db
from driftline.store.monitoring import MonitoringSnapshot, VersionWindow, monitoring_snapshot
from driftline.store.watermarks import judged_up_to, partition_marks
from driftline.watermarks import PartitionMark, low_watermark
from driftline.scheduler.embedding_metrics import embedding_families
from driftline.scheduler.evidence_metrics import evidence_families
from driftline.scheduler.serving_metrics import serving_families

log = logging.getLogger("driftline.scheduler.metrics")

_PREFIX = "driftline_"
# the estimate's band, as `bound` values
_BOUNDS = ("value", "lower", "upper")
# the results exported, and those whose details are read (the drift tests; the estimate's band)
EXPORTED = (vocabulary.DATA_DRIFT, vocabulary.DATASET_DRIFT, vocabulary.PREDICTION_DRIFT, vocabulary.ESTIMATED_QUALITY,
            vocabulary.MODEL_QUALITY, vocabulary.EMBEDDING_DRIFT, vocabulary.LATENCY)
DETAILED = (vocabulary.DATA_DRIFT, vocabulary.PREDICTION_DRIFT, vocabulary.ESTIMATED_QUALITY, vocabulary.EMBEDDING_DRIFT)
COUNTED = (vocabulary.DATA_QUALITY,)  # one result per feature and check: exported as counts per check
SEGMENTED = (vocabulary.DATA_DRIFT, vocabulary.DATASET_DRIFT)  # per segment, with `segments` on
# one result per feature: rows (and so series) only for the detail models, tallied in the store for every model
PER_FEATURE = (vocabulary.DATA_DRIFT,)


def detail_filter(patterns: Sequence[str] | str) -> Callable[[str], bool]:
    """Whether a model gets per-feature series: its name matches one of `patterns` (globs, `*` for every model; a
    string is the setting's comma-separated list)."""
    found = detail_patterns(patterns) if isinstance(patterns, str) else tuple(p for p in patterns if p)
    return lambda model: any(fnmatch.fnmatchcase(model, p) for p in found)


def detail_patterns(setting: str) -> tuple[str, ...]:
    """The `scheduler_metrics_detail_models` setting (comma-separated model names or globs) as patterns."""
    return tuple(p.strip() for p in setting.split(",") if p.strip())


class StoreMetrics(Collector):
    """A prometheus_client collector whose `collect()` turns a (cached) store read into metric families."""

    def __init__(self, db_url: str, cache_seconds: float = defaults.SCHEDULER_METRICS_CACHE_SECONDS,
                 max_features: int = defaults.SCHEDULER_METRICS_MAX_FEATURES, segments: bool = False,
                 detail_models: Sequence[str] | str = (), clock: Callable[[], float] = time.monotonic, wall_clock: Callable[[], float] = time.time,
                 idle_ms: int = defaults.IDLE_PARTITION_SECONDS * 1000) -> None:
        self.db_url = db_url
        self.segments = segments
        self.detail = detail_filter(detail_models)  # the models with per-feature series
        self.cache_seconds = cache_seconds
        self.max_features = max_features
        self.idle_ms = idle_ms  # Settings.idle_partition_seconds: an idle partition stops holding the watermark
        self._clock = clock
        self._wall_clock = wall_clock  # epoch seconds: the judging lag is measured against it
        self._lock = threading.Lock()  # one store read at a time; concurrent scrapes share it
        self._cached: list[Metric] | None = None
        self._read_at = 0.0

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            now = self._clock()
            if self._cached is None or now - self._read_at >= self.cache_seconds:
                self._cached = self._read()
                self._read_at = now
            cached = self._cached
        yield from cached

    def _read(self) -> list[Metric]:
        """The families of a fresh store read; a store that cannot be read gives `driftline_metrics_store_up 0`
        alone (and one log line), so Prometheus scrapes on and an alert can name the cause."""
        started = time.perf_counter()
        try:
            with store_db.session_scope(self.db_url) as session:
                snapshot = monitoring_snapshot(session, EXPORTED, DETAILED, COUNTED, SEGMENTED if self.segments else (),
                                               PER_FEATURE, self.detail)
                judged, marks = judged_up_to(session), partition_marks(session)
        except (OperationalError, InterfaceError, ProgrammingError) as exc:
            log.warning("metrics: cannot read the store (%s: %s)", type(exc).__name__,
                        str(exc.orig if getattr(exc, "orig", None) is not None else exc).splitlines()[0][:300])
            return [_store_up(False)]
        read_seconds = time.perf_counter() - started
        return [*families(snapshot, self.max_features, read_seconds, segments=self.segments),
                *progress_families(judged, marks, int(self._wall_clock() * 1000), self.idle_ms), _store_up(True)]


def _store_up(ok: bool) -> Metric:
    return GaugeMetricFamily(_PREFIX + "metrics_store_up", "1 when the last read of the store succeeded.",
                             value=float(ok))


def families(snapshot: MonitoringSnapshot, max_features: int, read_seconds: float | None = None,
             segments: bool = False) -> Iterable[Metric]:
    """The metric families of one store read (the segment families only with `segments`)."""
    score = GaugeMetricFamily(_PREFIX + "feature_drift_score", "A drift test's statistic on the feature, latest window.",
                              labels=["model", "version", "feature", "test"])
    drifted = GaugeMetricFamily(_PREFIX + "feature_drifted",
                                "1 when the feature drifted by the documented decision rule, latest window.",
                                labels=["model", "version", "feature"])
    count = GaugeMetricFamily(_PREFIX + "drifted_features", "Features that drifted in the latest window.",
                              labels=["model", "version"])
    judged = GaugeMetricFamily(_PREFIX + "judged_features", "Features judged for drift in the latest window.",
                               labels=["model", "version"])
    worst = GaugeMetricFamily(_PREFIX + "max_feature_drift_score",
                              "The highest decision statistic over the version's features, latest window.",
                              labels=["model", "version", "test"])
    dataset = GaugeMetricFamily(_PREFIX + "dataset_drifted", "1 when the dataset drifted in the latest window.",
                                labels=["model", "version"])
    prediction = GaugeMetricFamily(_PREFIX + "prediction_drifted",
                                   "1 when the model's output drifted in the latest window.", labels=["model", "version"])
    quality = GaugeMetricFamily(_PREFIX + "data_quality_issues",
                                "Features (or the window) breaching a data-quality check, latest window.",
                                labels=["model", "version", "check"])
    estimated = GaugeMetricFamily("driftline_estimated_quality",  # the contract's metric name, not the family
                                  "Quality estimated before labels (bound: value, lower, upper), latest window.",
                                  labels=["model", "version", "metric", "bound"])
    threshold = GaugeMetricFamily(_PREFIX + "estimated_quality_threshold",
                                  "The estimate's alarm threshold (training less the allowed drop), latest window.",
                                  labels=["model", "version", "metric"])
    invalid = GaugeMetricFamily(_PREFIX + "estimation_invalid",
                                "1 when the estimates no longer hold (realized left their bands too often over the "
                                "recent labelled windows), latest window.", labels=["model", "version"])
    training = GaugeMetricFamily(_PREFIX + "training_quality", "The metric on the version's training data.",
                                 labels=["model", "version", "metric"])
    realized = GaugeMetricFamily(_PREFIX + "realized_quality", "Quality measured on joined labels, latest window.",
                                 labels=["model", "version", "metric"])
    window_end = GaugeMetricFamily(_PREFIX + "window_end_timestamp_seconds",
                                   "End (event time) of the latest evaluated window.", labels=["model", "version"])
    events = GaugeMetricFamily(_PREFIX + "window_events", "Events in the latest evaluated window.",
                               labels=["model", "version"])
    by_name = {vocabulary.DATASET_DRIFT: dataset, vocabulary.PREDICTION_DRIFT: prediction,
               **{family.name: family for family in (quality, estimated, threshold, training, realized, invalid)}}
    for window in snapshot.windows:
        labels = [window.model, window.version]
        window_end.add_metric(labels, window.window_end_ms / 1000.0)
        events.add_metric(labels, float(window.events))
        _tallies(window, count, judged, worst)
        _drift(window, max_features, score, drifted)
        # keyed by their labels: one series per label set, whatever the stored rows repeat (a valid exposition)
        found: dict[tuple[str, tuple[str, ...]], float] = {}  # (family name, extra labels) -> value
        for r in window.results:
            if r.detector in (vocabulary.DATASET_DRIFT, vocabulary.PREDICTION_DRIFT):
                key = (r.detector, ())
                found[key] = max(found.get(key, 0.0), float(r.breached))
            elif r.detector == vocabulary.ESTIMATED_QUALITY and r.metric == vocabulary.ESTIMATION_INVALID:
                if not r.details.get(vocabulary.INSUFFICIENT_DATA):  # nothing checked yet: no series
                    found[(invalid.name, ())] = float(r.breached)
            elif r.detector == vocabulary.ESTIMATED_QUALITY and r.value is not None:
                for bound in _BOUNDS:
                    value = r.value if bound == "value" else r.details.get(bound)
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        found[(estimated.name, (r.metric, bound))] = float(value)
                if r.threshold is not None:
                    found[(threshold.name, (r.metric,))] = float(r.threshold)
                reference = r.details.get("training")
                if isinstance(reference, (int, float)) and not isinstance(reference, bool):
                    found[(training.name, (r.metric,))] = float(reference)
            elif r.detector == vocabulary.MODEL_QUALITY and r.value is not None:
                found[(realized.name, (r.metric,))] = float(r.value)
        for (detector, metric), n in window.breaches.items():
            if detector == vocabulary.DATA_QUALITY:
                found[(quality.name, (metric,))] = float(n)
        for (name, extra), value in sorted(found.items()):
            by_name[name].add_metric([*labels, *extra], value)
    alerts = GaugeMetricFamily(_PREFIX + "alerts_firing", "Alerts in the firing state.", labels=["model", "severity"])
    for (model, severity), n in sorted(snapshot.alerts_firing.items()):
        alerts.add_metric([model, severity], float(n))
    quarantined = GaugeMetricFamily(_PREFIX + "windows_quarantined",
                                    "Windows whose evaluation failed, waiting for a retry.",
                                    value=float(snapshot.quarantined_windows))
    dead_letters = CounterMetricFamily(_PREFIX + "dead_letters", "Dead letters recorded in the store since it began.",
                                       value=float(snapshot.dead_letters))
    verdicts = GaugeMetricFamily(_PREFIX + "rollout_verdict",
                                 "1 for the rollout's latest verdict (active, or ended within the visibility period), "
                                 "0 for the other verdicts.",
                                 labels=["model", "candidate", "verdict"])
    for model, candidate, verdict in snapshot.verdicts:
        for name in vocabulary.VERDICTS:
            verdicts.add_metric([model, candidate, name], float(name == verdict))
    yield from (score, drifted, count, judged, worst, dataset, prediction, quality, estimated, threshold, invalid, training, realized,
                window_end, events, alerts, quarantined, dead_letters, verdicts)
    yield from embedding_families(snapshot)
    yield from evidence_families(snapshot, max_features)
    yield from serving_families(snapshot)
    if segments:
        yield from _segment_families(snapshot)
    if read_seconds is not None:
        yield GaugeMetricFamily(_PREFIX + "metrics_store_read_seconds", "How long the last read of the store took.",
                                value=read_seconds)


def progress_families(judged: dict[tuple[str, str], int], marks: list[PartitionMark], now_ms: int,
                      idle_ms: int) -> Iterable[Metric]:
    """Event-time progress: each model's judging lag (over its versions, the latest judged window counts) and the
    collectors' low watermark (absent without a collector's watermark, or while a partition has stored nothing)."""
    lag = GaugeMetricFamily(_PREFIX + "scheduler_judging_lag_seconds",
                            "Now less the end (event time) of the model's latest judged window.", labels=["model"])
    latest: dict[str, int] = {}
    for (model, _version), end_ms in judged.items():
        latest[model] = max(latest.get(model, end_ms), end_ms)
    for model, end_ms in sorted(latest.items()):
        lag.add_metric([model], max(now_ms - end_ms, 0) / 1000.0)
    watermark = GaugeMetricFamily(_PREFIX + "stream_watermark_timestamp_seconds",
                                  "The collectors' low watermark: every event before it is stored (event time).")
    # without marks low_watermark is the wall clock (windows close on it): no collector's progress to show
    low = low_watermark(marks, now_ms, idle_ms) if marks else None
    if low is not None:
        watermark.add_metric([], low / 1000.0)
    yield from (lag, watermark)


def _tallies(window: VersionWindow, count: GaugeMetricFamily, judged: GaugeMetricFamily,
             worst: GaugeMetricFamily) -> None:
    """Every version's drift over its features, from the store's tallies: drifted, judged, worst per statistic."""
    tallies = {metric: t for (detector, metric), t in window.features.items() if detector == vocabulary.DATA_DRIFT}
    if not tallies:
        return
    labels = [window.model, window.version]
    count.add_metric(labels, float(sum(t.breached for t in tallies.values())))
    judged.add_metric(labels, float(sum(t.judged for t in tallies.values())))
    for metric, t in sorted(tallies.items()):
        if t.max_value is not None:
            worst.add_metric([*labels, metric], t.max_value)


def _drift(window: VersionWindow, max_features: int, score: GaugeMetricFamily, drifted: GaugeMetricFamily) -> None:
    """Per-feature drift series of a detail model's window, capped at `max_features` (drifted first, then the
    highest PSI)."""
    features = list({r.feature: r for r in window.results if r.detector == vocabulary.DATA_DRIFT and r.feature}.values())
    labels = [window.model, window.version]
    features.sort(key=lambda r: (not r.breached, -(r.value if r.value is not None else float("-inf")), r.feature))
    for r in sorted(features[:max_features], key=lambda r: r.feature):
        drifted.add_metric([*labels, r.feature], float(r.breached))
        tests = r.details.get("tests")
        tests = tests if isinstance(tests, dict) else {}
        if r.metric not in tests and r.value is not None:
            score.add_metric([*labels, r.feature, r.metric], float(r.value))
        for test in sorted(tests):
            found = tests[test]
            value = found.get(_score_field(test), found.get("statistic")) if isinstance(found, dict) else None
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                score.add_metric([*labels, r.feature, test], float(value))


def _score_field(test: str) -> str:
    """The field of a feature's test that its score series exports: the registered statistic's own (a distance's
    ``value``, a test's ``statistic``); ``value`` for the missing-rate test."""
    found = statistics.statistic(test)
    return found.field if found is not None else "value"


def _segment_families(snapshot: MonitoringSnapshot) -> Iterable[Metric]:
    features = GaugeMetricFamily(_PREFIX + "segment_drifted_features",
                                 "Features that drifted within the segment, latest window.",
                                 labels=["model", "version", "segment"])
    dataset = GaugeMetricFamily(_PREFIX + "segment_dataset_drifted",
                                "1 when the segment's dataset drifted, latest window.",
                                labels=["model", "version", "segment"])
    for window in snapshot.windows:
        for (segment, detector), n in sorted(window.segment_breaches.items()):
            if detector == vocabulary.DATA_DRIFT:
                features.add_metric([window.model, window.version, segment], float(n))
            elif detector == vocabulary.DATASET_DRIFT:
                dataset.add_metric([window.model, window.version, segment], float(min(n, 1)))
    yield from (features, dataset)


class SchedulerMetrics(MetricsEndpoint):
    """The scheduler's registry and its /metrics server."""

    def __init__(self, db_url: str, **options: Any) -> None:
        self.registry = CollectorRegistry()
        self.store = StoreMetrics(db_url, **options)
        self.registry.register(self.store)
        self._server = None

