"""The names detectors emit and that alert rules, inhibit rules and the retraining policy use.

One place for both sides, so a rule can only name something a detector reports.
A stored result is (detector, feature, metric): `DETECTORS` are the detector names
(per-feature `data_drift` and the window-level `dataset_drift` are two names, so
rules, inhibition and the retraining policy can tell them apart), and the metric
names below are those a configuration may refer to.
"""
from __future__ import annotations

DATA_DRIFT = "data_drift"
DATASET_DRIFT = "dataset_drift"
PREDICTION_DRIFT = "prediction_drift"
DATA_QUALITY = "data_quality"
SKEW = "skew"
LATENCY = "latency"
MODEL_QUALITY = "model_quality"
DETECTORS = (DATA_DRIFT, DATASET_DRIFT, PREDICTION_DRIFT, DATA_QUALITY, SKEW, LATENCY, MODEL_QUALITY)

# The metric of the dataset_drift result: the share of judged features that drifted.
DRIFTED_SHARE = "drifted_share"

# Model-quality metrics compared with a reference: higher is better for scores, lower for errors.
QUALITY_SCORES = frozenset(("accuracy", "precision", "recall", "f1", "roc_auc", "macro_f1"))
QUALITY_ERRORS = frozenset(("log_loss", "mae", "rmse"))
QUALITY_METRICS = QUALITY_SCORES | QUALITY_ERRORS
