"""Run the detector families on one merged window against its baseline, pure.

`run_families(baseline, state, thresholds=..., slo=..., transform=...)`
returns a flat list of `WindowResult`s (detector, feature, metric, value,
threshold, breached, details) for these families:

* ``data_drift``: per feature, the binned tests (`driftline.detectors.stats.binned`), p-values
  corrected by Benjamini-Hochberg across the window's features and prediction, verdict by
  `driftline.detectors.thresholds.decision.decide_feature`; plus one dataset-level result, detector
  ``dataset_drift`` (metric ``drifted_share``: share of drifted features against
  ``dataset_drift_share``), the name the alert rules and `detect`'s JSON use. With
  ``[drift] thresholds = "reference"`` the effect-size floors come from the baseline's
  training-chunk spreads (`driftline.detectors.thresholds.spreads`); each drift result's
  ``threshold_source`` says which applied, and ``threshold_note`` why not, when it fell back.
* ``prediction_drift``: the same tests on the model's output, in the features' family of hypotheses.
* ``data_quality``: missing rate against the training null rate, out-of-range
  share, unseen-category share, type changes, baseline features missing from
  events, features the baseline does not know.
  With a ``[freshness]`` max age for a feature, ``stale_features``: the share of its requests served
  a value older than that age (`driftline.detectors.families.freshness`).
* ``skew``: parity skew (the training transform re-run on the sample's raw
  ``inputs`` must reproduce the served features: mismatch rate per feature) and
  distribution skew (serving vs the training baseline, effect size only; it is
  data drift's comparison, so it breaches only for a feature whose parity could
  not be checked). A feature with parity skew has its ``data_drift`` result (and
  ``prediction_drift``, and the data-quality breaches the training transform's
  output does not show) reported unbreached with ``details["explained_by"] =
  "skew"``: skew is reported as skew, not as drift.
* ``latency``: p50/p95/p99 per latency part against that part's objectives in the model's
  SLO (`LatencySLO`: ``total``, a generated answer's ``ttft`` and ``tpot``, any other part),
  error rate, QPS = events / window seconds, in-flight concurrency by Little's
  law :math:`L = \\lambda W` (arrival rate times mean time in the system), and for
  generated answers the median decode rate and output tokens per second (`token_rates`).
* ``model_quality``: from joined labels (`quality_metrics`): accuracy, precision,
  recall, F1, ROC AUC, log loss (binary); MAE, RMSE (regression); accuracy and
  macro F1 (multiclass); compared with what the training relation predicts for
  the window's scores (binary, `expected_binary_quality`) or with the training
  metrics, breaching only beyond max(floor, z x standard error) (`model_quality`).
* ``estimated_quality``: a binary classifier's ROC AUC, accuracy, precision, recall
  and F1 estimated from the window's scores and the training calibration before
  labels arrive (CBPE, `estimated_quality`), each with a band; realized and the gap
  beside it once labels join.
* ``multivariate_drift``: the joint distribution of the features, from the window's
  event sample against the baseline's PCA fit and training sample: mean PCA
  reconstruction error (metric ``pca_reconstruction_error``) and a domain
  classifier's cross-validated AUC (``domain_classifier_auc``), `multivariate_drift`;
  explained by skew, like prediction drift, while any feature has parity skew.
* ``embedding_drift``: per embedding the events carry (text, image, the model's own activations),
  its window summary against the baseline's reference: MMD^2 from random features, drifted
  principal components, cluster shares and the mean's cosine distance, `embedding_drift`.

Sample-size awareness: a result with too little data behind it has
``breached=False`` and ``details["insufficient_data"] = True``. Every threshold
default lives in `driftline.defaults`. Nothing here does I/O.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from driftline.detectors.families.attribution import explain_drift_by_skew, explain_quality_by_skew
from driftline.detectors.families.data_quality import data_quality
from driftline.detectors.thresholds.decision import DriftThresholds
from driftline.detectors.families.drift import drift_results as judge_drift
from driftline.detectors.families.embedding_drift import embedding_drift
from driftline.detectors.families.estimated_quality import estimated_quality
from driftline.detectors.families.freshness import stale_features
from driftline.detectors.families.latency import latency
from driftline.detectors.families.multivariate import multivariate_drift
from driftline.detectors.families.quality import model_quality
from driftline.detectors.families.results import WindowResult
from driftline.detectors.families.skew import ParityCheck, skew_with_parity
from driftline.detectors.thresholds.spreads import label_threshold_source, streaming_thresholds
from driftline.detectors.thresholds.freshness import FreshnessThresholds
from driftline.detectors.thresholds.levels import LatencySLO, WindowThresholds
from driftline import defaults
from driftline.baseline import Baseline
from driftline.vocabulary import (
    DATA_DRIFT,
    DATA_QUALITY,
    EMBEDDING_DRIFT,
    ESTIMATED_QUALITY,
    LATENCY,
    MODEL_QUALITY,
    MULTIVARIATE_DRIFT,
    PREDICTION_DRIFT,
    SKEW,
)
from driftline.window_state import WindowState

__all__ = ["FAMILIES", "run_families"]

# The families run_families can run; data_drift's run also gives the dataset_drift result.
FAMILIES = (DATA_DRIFT, PREDICTION_DRIFT, DATA_QUALITY, SKEW, LATENCY, MODEL_QUALITY, ESTIMATED_QUALITY,
            MULTIVARIATE_DRIFT, EMBEDDING_DRIFT)


def run_families(baseline: Baseline | None, state: WindowState, *,
                 thresholds: WindowThresholds | DriftThresholds | None = None,
                 slo: LatencySLO | None = None,
                 transform: Callable[[list[Mapping[str, Any]]], list[Mapping[str, Any]]] | Any | None = None,
                 window_seconds: float | None = None,
                 families: Iterable[str] = FAMILIES,
                 freshness: FreshnessThresholds | None = None) -> list[WindowResult]:
    """The results of every family in `families` for one merged window (module docstring).

    `baseline` None (a version not registered yet): only latency results.
    `thresholds`: a `WindowThresholds`, or just `DriftThresholds` (the rest default).
    `transform`: the training feature transform, a callable (or an object with
    ``apply``) from raw input records to feature records; without it there is no
    parity-skew result (and distribution skew is the only skew evidence).
    Attribution to skew needs the ``skew`` family in `families`.
    `window_seconds` (default `defaults.WINDOW_SECONDS`) turns the event count into QPS.
    `freshness`: each feature's max age (`[freshness]`); its `stale_features` results are data quality's.
    """
    if isinstance(thresholds, DriftThresholds):
        thresholds = WindowThresholds(drift=thresholds)
    thresholds = thresholds or WindowThresholds()
    slo = slo or LatencySLO()
    if baseline is not None and state.baseline_fingerprint not in (None, baseline.fingerprint):
        raise ValueError(f"window state was binned on baseline {state.baseline_fingerprint}, "
                         f"not {baseline.fingerprint}")
    families = set(families)
    results: list[WindowResult] = []
    if baseline is not None:
        # Skew first: a feature with parity skew has its drift and data-quality findings
        # attributed to skew (`explain_drift_by_skew`, `explain_quality_by_skew`).
        skew_results, parity = (skew_with_parity(baseline, state, thresholds, transform) if SKEW in families
                                else ([], ParityCheck()))
        drift_results: list[WindowResult] = []
        # `[drift] thresholds = "reference"`: effect-size floors from the baseline's training-chunk spreads
        drift_thresholds, source, note = streaming_thresholds(baseline, thresholds.drift, state.events)
        if DATA_DRIFT in families or PREDICTION_DRIFT in families:  # one family of hypotheses (drift_results)
            drift_results += judge_drift(baseline, state, drift_thresholds, features=DATA_DRIFT in families,
                                         prediction=PREDICTION_DRIFT in families)
        label_threshold_source(drift_results, source, note)
        if MULTIVARIATE_DRIFT in families:
            drift_results += multivariate_drift(baseline, state, thresholds.multivariate)
        results += explain_drift_by_skew(drift_results, parity, thresholds.drift)
        if EMBEDDING_DRIFT in families and state.embeddings:
            results += embedding_drift(baseline, state, thresholds.embedding)
        if DATA_QUALITY in families:
            results += explain_quality_by_skew(data_quality(baseline, state, thresholds), baseline, parity)
            if freshness is not None:
                results += stale_features(state, freshness, thresholds.data_quality_min_rows)
        results += skew_results
        if MODEL_QUALITY in families:
            quality = model_quality(baseline, state, thresholds)
            for result in quality if parity.skewed else ():
                # The drop is real (the model was fed skewed values) and stays breached;
                # this says where to look first.
                result.details["skewed_features"] = sorted(parity.skewed)
            results += quality
        if ESTIMATED_QUALITY in families:
            results += estimated_quality(baseline, state, thresholds)
    if LATENCY in families:
        results += latency(state, slo, window_seconds or defaults.WINDOW_SECONDS)
    return results
