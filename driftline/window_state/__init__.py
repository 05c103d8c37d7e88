"""The mergeable summary of one (model, version, window, partition): `WindowState`.

Collectors fold batches of events into a `WindowState` (`add_batch`, vectorised
with numpy per batch); any number of partial states for one window merge into one
(`merge`: associative and commutative), and the detectors evaluate the merged
state against the version's `Baseline`. The cost of a window is constant however
many events it holds. The store keeps a state as a compact blob (`to_bytes` /
`from_bytes`, in `codec`). See docs/window-state.md for the layout and measured sizes.

What a state counts:

* per **feature** (`FeatureWindow`; names outside the baseline beyond
  `defaults.WINDOW_MAX_NEW_FEATURES` share one `OTHER_FEATURES` entry, see `other_features`): absent keys, nulls, JSON value types (a
  string where a number is expected is a type change); for numeric features the
  counts and per-value sums on the baseline's fine bins, count/sum/sum of
  squares/min/max, +/-inf, and how many values lie below the training min / above
  the training max; for categorical features the counts per `category_key`
  (unseen categories are those the baseline lacks);
* the **prediction**, as a feature against the baseline's prediction profile;
* **latency** per part (total, queue, compute, any other): a log-bucket histogram
  (`LatencyHistogram`) with 1 % relative error on quantiles, count, sum, max;
* **status** counts, cache hits/misses, batch-size counts, event count, min/max
  event time;
* a bounded uniform **sample** of events (features, inputs, prediction,
  request id): the `sample_size` events with the smallest hashed request id, else
  event id ("bottom-k" sampling), so the merge of two samples is the sample of the
  union, exactly, whatever the split, and two versions answering the same requests
  (production and its shadow) sample the same ones;
* **labels** joined with predictions (`add_labels`, a `LabelSummary`).

Without a baseline (a version not registered yet) everything but the numeric
fine bins is still counted; the numeric values are counted in ``unbinned`` and
drift waits for a baseline.
"""
from __future__ import annotations

from driftline.window_state.batch import EventBatch
from driftline.window_state.codec import STATE_FORMAT, WindowStateError
from driftline.window_state.columns import prediction_column
from driftline.window_state.feature import OTHER_CATEGORY, FeatureWindow
from driftline.window_state.latency import LatencyHistogram
from driftline.window_state.other_features import OTHER_FEATURES
from driftline.window_state.state import PREDICTION, WindowState

__all__ = ["EventBatch", "FeatureWindow", "LatencyHistogram", "WindowState", "WindowStateError", "PREDICTION",
           "OTHER_CATEGORY", "OTHER_FEATURES", "STATE_FORMAT", "prediction_column"]
