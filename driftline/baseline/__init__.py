"""The training baseline of a model version: everything the detectors need, computed once.

`compute_baseline(features, categorical=..., predictions=..., labels=...)` reads a
model version's training data once; from then on detectors compare windows with
this summary and never re-read the raw training set. The store keeps it as JSON
(`Baseline.to_dict()` / `Baseline.from_dict()`).

Per numeric feature (`NumericProfile`):

* **fine bins** at the training quantiles 1/B, 2/B, ..., (B-1)/B
  (B = `defaults.BASELINE_FINE_BINS` = 1000), with the two outermost 1/B of
  probability each split into `defaults.BASELINE_TAIL_BINS` (50) finer quantile
  bins (heavy tails are wide, and out-of-range window values land there);
  the training min and max are edges too; repeated edges are merged so the edges
  are strictly increasing. Every bin is ``[e_i, e_{i+1})`` (numpy
  ``searchsorted(edges, x, side="right")``) and the two outer bins are open,
  ``(-inf, min)`` and ``[max, +inf)``, so any window value lands in a bin and a
  value out of the training range stays visible there. Open outer bins lose
  nothing thanks to the per-bin **sums**: the Wasserstein integral over a bin is
  exact from its count and sum (see detectors/stats/binned.py).
* **counts and sums** of the training values per fine bin;
* the **decile edges** (`driftline.detectors.stats.two_sample.decile_edges`, the same arithmetic), a
  subset of the fine edges, so decile PSI re-aggregates fine bins exactly;
* min, max, mean, standard deviation (``ddof=0``, as the normalised Wasserstein
  uses it), null count and rate.

Per categorical feature (`CategoricalProfile`): counts per category key
(`category_key`: strings as they are, integral numbers without ".0", booleans as
"true"/"false"), null count, and the JSON types the values had.

The prediction (`Baseline.prediction`) is profiled like a feature: a numeric
score (regression output or probability) as a numeric profile, class labels as
a categorical one. A list of class probabilities becomes one number: the positive
class's probability ``p[1]`` when there are two classes, else the winning class's
probability ``max(p)`` (the model's confidence); `prediction_values` does this for
the baseline and the window alike.

With labels, `Baseline.quality` is the `LabelSummary` of the training predictions
against their labels, from which detectors compute the training metrics that
production quality is compared with.

A bounded uniform sample of training rows (features, prediction, label) is kept
for drill-down, reports, skew checks and the multivariate domain classifier.

`Baseline.reconstruction` is the PCA fit of the training features
(`driftline.baseline.reconstruction`) that multivariate drift measures each window's
reconstruction error against; baselines registered before it existed have none.

`Baseline.threshold_spreads` (`driftline.baseline.spreads`) keeps each feature's effect sizes
over training chunks of several sizes, from which the service derives reference-based drift
thresholds; it is measured by `driftline.detectors.thresholds.spreads` when a version is
registered, and absent from older baselines.
"""
from __future__ import annotations

from driftline.baseline.labels import BINARY, MULTICLASS, REGRESSION, LabelSummary
from driftline.baseline.predictions import CLASS, PROBABILITY, SCORE, prediction_values
from driftline.baseline.profiles import (CATEGORICAL, NUMERIC, CategoricalProfile, NumericProfile, Profile,
                                         count_categories, profile_from_dict)
from driftline.baseline.reconstruction import ReconstructionFit, fit_reconstruction
from driftline.baseline.spreads import QualitySpreads, ThresholdSpreads
from driftline.baseline.summary import BASELINE_FORMAT, Baseline, compute_baseline
from driftline.baseline.values import category_key, is_null, json_type, stored_sum

__all__ = ["BASELINE_FORMAT", "BINARY", "CATEGORICAL", "CLASS", "MULTICLASS", "NUMERIC", "PROBABILITY", "REGRESSION",
           "SCORE", "Baseline", "CategoricalProfile", "LabelSummary", "NumericProfile", "Profile", "ReconstructionFit",
           "QualitySpreads", "ThresholdSpreads",
           "category_key", "compute_baseline", "count_categories", "fit_reconstruction", "is_null", "json_type",
           "prediction_values", "profile_from_dict", "stored_sum"]
