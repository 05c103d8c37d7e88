"""Embedding drift of one window, streaming or batch: the ``embedding_drift`` family.

For each embedding the baseline learned (`driftline.embeddings.reference.EmbeddingReference`), the
window's merged summary (`driftline.embeddings.window.EmbeddingWindow`) is compared with the
reference in five tests and one effect size:

* **mmd**: MMD^2 of the RBF kernel from the window's summed random features, with its p-value under
  the null of a same-distribution window of this size (`driftline.detectors.stats.embeddings`);
  ``threshold`` is the null band's upper end at the test's level;
* **drifted_components**: per principal component, the two-sample chi-square of the window's counts
  on the reference's decile bins; p-values corrected by Benjamini-Hochberg across components; the
  ``share`` of components rejected;
* **clusters**: the two-sample chi-square of the counts per k-means cluster (clusters where the window
  expects fewer than five rows pooled) and their Jensen-Shannon distance, with the clusters whose share moved most and example request ids from each;
* **mean**: the window mean's whitened squared distance from the reference mean (each principal
  component in its own standard deviations, the rest in the residual's), with its p-value under the
  same exact null as the MMD^2: a small shift of every vector that the kernel's width hides;
* **domain_classifier**: the classifier two-sample test of
  `driftline.detectors.stats.multivariate.domain_classifier` telling the window's bounded sample
  (`EmbeddingWindow.sample`, up to `WINDOW_SAMPLE_SIZE` vectors) from the reference's held-out sample
  (`EmbeddingReference.classifier_sample`), each vector seen as its principal-component scores and its
  distance from their subspace; ``auc`` against ``threshold`` (the larger of ``classifier_auc`` and
  0.5 + ``classifier_z`` null standard deviations), and the inputs that told them apart most
  (``top_features``: ``pc1``... and ``residual``, for a drifted verdict only): a change of spread or shape in few rows, which
  the summed statistics above need many rows to see;
* **cosine_distance** between the window's and the reference's mean embeddings (reported, no vote).

Decision rule (one): the embedding drifts when any of the five tests rejects, Bonferroni over
the five: the four with exact nulls at alpha / 5 (`EmbeddingThresholds.test_level`), the component
test meaning a share of BH-rejected components of at least ``drifted_components_share``; the
classifier above its threshold, whose z of 3 is nominally 0.13 % and measured at 0-1 % of no-drift
windows (its cross-validated AUC is wider than Mann-Whitney's null; bench/embeddings.py), inside its
alpha / 5. So a window without drift is flagged at most alpha (`defaults.EMBEDDING_ALPHA`) of the
time, whatever its size. A classifier without enough sampled rows (or a reference fitted before it)
does not vote.

A window with fewer than ``min_rows`` vectors of an embedding, or an embedding the baseline has no
reference for, gives a result with ``insufficient_data``, never an error. Nothing here does I/O.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from driftline.baseline import Baseline
from driftline.detectors.families.results import WindowResult, insufficient
from driftline.detectors.stats.multivariate import MultivariateThresholds, domain_classifier
from driftline.detectors.stats.embeddings import (binned_two_sample, cosine_distance, mmd_null_quantile,
                                                  mmd_p_value, pooled_small_bins)
from driftline.detectors.stats.two_sample import jensenshannon
from driftline.detectors.thresholds.decision import benjamini_hochberg
from driftline.detectors.thresholds.embeddings import EmbeddingThresholds
from driftline.embeddings.reference import EmbeddingReference
from driftline.embeddings.window import EmbeddingWindow
from driftline.vocabulary import CHI2, EMBEDDING_DRIFT, INSUFFICIENT_DATA, INSUFFICIENT_DATA_REASON, JENSENSHANNON, MMD2
from driftline.window_state import WindowState

__all__ = ["embedding_drift", "judge_embedding"]


def judge_embedding(reference: EmbeddingReference, window: EmbeddingWindow,
                    thresholds: EmbeddingThresholds | None = None) -> dict[str, Any]:
    """The verdict on one embedding (module docstring), as `detect`'s JSON shows it."""
    thresholds = thresholds or EmbeddingThresholds()
    rows = window.binned
    if window.component_counts is None or rows < thresholds.min_rows:
        return {"drift": False, "rows": rows, INSUFFICIENT_DATA: True,
                "reason": f"{INSUFFICIENT_DATA_REASON}: {rows} vectors binned on the baseline, {thresholds.min_rows} needed"}
    level = thresholds.test_level
    assert window.feature_sum is not None and window.cluster_counts is not None
    mmd2 = float(((window.feature_sum / rows - reference.rff_mean) ** 2).sum())
    mmd_p = mmd_p_value(mmd2, reference.rff_eigenvalues, rows, reference.rff_rows)
    mmd = {"value": mmd2, "threshold": mmd_null_quantile(1.0 - level, reference.rff_eigenvalues, rows,
                                                         reference.rff_rows),
           "p_value": mmd_p, "drift": mmd_p < level, "bandwidth": reference.bandwidth}

    p_values = np.array([binned_two_sample(w, r)[1] for w, r in zip(window.component_counts,
                                                                     reference.component_counts)])
    rejected, adjusted = benjamini_hochberg(p_values, level)
    share = float(rejected.mean()) if rejected.size else 0.0
    components = {"share": share, "threshold": thresholds.drifted_components_share,
                  "drift": bool(share >= thresholds.drifted_components_share and rejected.any()),
                  "level": level,
                  "drifted": [int(i) for i in np.flatnonzero(rejected)],
                  "p_values": [float(p) for p in adjusted]}

    statistic, cluster_p = binned_two_sample(*pooled_small_bins(window.cluster_counts, reference.cluster_counts))
    window_share = window.cluster_counts / max(window.cluster_counts.sum(), 1)
    reference_share = reference.cluster_counts / max(reference.cluster_counts.sum(), 1)
    change = window_share - reference_share
    moved = [{"cluster": int(i), "share": float(window_share[i]), "reference_share": float(reference_share[i]),
              "change": float(change[i]), "examples": [rid for _, rid in window.examples.get(int(i), [])]}
             for i in np.argsort(-np.abs(change))[: thresholds.top_clusters]]
    clusters = {CHI2: statistic, "p_value": cluster_p, "drift": cluster_p < level,
                JENSENSHANNON: jensenshannon(reference.cluster_counts, window.cluster_counts), "moved": moved}
    window_mean = window.sum / max(window.count, 1)
    classifier = _domain_classifier(reference, window, thresholds)
    out = {"drift": bool(mmd["drift"] or components["drift"] or clusters["drift"] or classifier["drift"]), "rows": rows,
           "dimension": reference.dimension, "mmd": mmd, "drifted_components": components, "clusters": clusters,
           "cosine_distance": cosine_distance(window_mean, reference.mean),
           "domain_classifier": classifier}
    if reference.mean_weights is not None:
        # every vector counts here, binned or not: the sum vector holds them all
        distance = reference.whitened_distance(window_mean)
        mean_p = mmd_p_value(distance, reference.mean_weights, max(window.count, 1), reference.rows)
        out["mean"] = {"value": distance, "p_value": mean_p, "drift": mean_p < level,
                       "threshold": mmd_null_quantile(1.0 - level, reference.mean_weights, max(window.count, 1),
                                                      reference.rows)}
        out["drift"] = bool(out["drift"] or mean_p < level)
    return out


def _domain_classifier(reference: EmbeddingReference, window: EmbeddingWindow,
                       thresholds: EmbeddingThresholds) -> dict[str, Any]:
    """The classifier two-sample test on the window's sample (module docstring); insufficient data without one."""
    rows = 0 if window.sample is None else int(window.sample.shape[0])
    reference_rows = 0 if reference.classifier_sample is None else int(reference.classifier_sample.shape[0])
    if min(rows, reference_rows) < thresholds.min_rows:
        why = ("the baseline has no classifier sample (fitted before it); register it again" if reference_rows == 0
               else f"{rows} sampled vectors, {thresholds.min_rows} needed")
        return {"auc": None, "threshold": None, "drift": False, "rows": rows, "top_features": [],
                INSUFFICIENT_DATA: True, "reason": f"{INSUFFICIENT_DATA_REASON}: {why}"}
    assert window.sample is not None and reference.classifier_sample is not None
    names = [f"pc{i + 1}" for i in range(window.sample.shape[1] - 1)] + ["residual"]
    verdict = domain_classifier(reference.classifier_sample, window.sample, names, MultivariateThresholds(
        domain_classifier_auc=thresholds.classifier_auc, domain_classifier_z=thresholds.classifier_z,
        max_rows=max(rows, reference_rows)))
    return {"auc": verdict.auc, "threshold": verdict.threshold, "drift": verdict.drift, "rows": verdict.rows,
            "reference_rows": verdict.reference_rows, "auc_std": verdict.auc_std, "top_features": verdict.top_features}


def embedding_drift(baseline: Baseline, state: WindowState,
                    thresholds: EmbeddingThresholds | None = None) -> list[WindowResult]:
    """One result per embedding the window's events carried: metric ``mmd2``, breached by the decision rule.

    A reference no event of the window used gives no result (a model version may log embeddings behind a
    setting that is off)."""
    thresholds = thresholds or EmbeddingThresholds()
    results = []
    for name, window in state.embeddings.items():
        reference = baseline.embeddings.get(name)
        if reference is None:
            details = insufficient({"rows": window.count}, f"{INSUFFICIENT_DATA_REASON}: the baseline has no reference for "
                                   f"embedding {name!r}; register one with `driftline baseline --embedding`")
            results.append(WindowResult(EMBEDDING_DRIFT, name, MMD2, None, None, False, details))
            continue
        verdict = judge_embedding(reference, window, thresholds)
        if verdict.get(INSUFFICIENT_DATA):
            results.append(WindowResult(EMBEDDING_DRIFT, name, MMD2, None, None, False,
                                        insufficient({"rows": verdict["rows"]}, verdict["reason"])))
            continue
        results.append(WindowResult(EMBEDDING_DRIFT, name, MMD2, verdict["mmd"]["value"],
                                    verdict["mmd"]["threshold"], verdict["drift"], verdict))
    return results
