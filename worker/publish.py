"""Train -> baseline -> register -> (maybe) promote: the one path every new version takes.

Used by `driftline train` (the bundled data set) and by the worker's retraining
endpoint (recent labelled traffic), so both produce the same kind of version.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from driftline import defaults
from driftline.worker.activations import ACTIVATIONS, activation_reference
from driftline.worker.feature_transform import FeatureTransform
from driftline.worker.registry import Registry, TrainedVersion
from driftline.worker.training import TrainConfig, TrainResult, train_model


@dataclass(frozen=True)
class Published:
    version: str
    promoted: bool
    previous_production: str | None
    metrics: dict[str, Any]


def training_baseline(result: TrainResult, seed: int = 0) -> dict[str, Any]:
    """The version's baseline (driftline.baseline) over all its training rows' features and predictions."""
    from driftline.baseline import compute_baseline
    from driftline.detectors.thresholds.spreads import measure_spreads

    frame = pd.DataFrame(result.features, columns=[entry["name"] for entry in FeatureTransform.feature_schema()])
    for name in FeatureTransform.numeric_features:
        frame[name] = frame[name].astype(np.float64)  # all-null columns would otherwise be object
    baseline = compute_baseline(frame, categorical=FeatureTransform.categorical_features,
                                predictions=result.predictions, labels=holdout_labels(result),
                                sample_size=defaults.BASELINE_SAMPLE_SIZE, seed=seed)
    # the chunk spreads `[drift] thresholds = "reference"` derives the service's thresholds from
    baseline.threshold_spreads = measure_spreads(frame, {name: baseline.kind(name) for name in baseline.feature_names},
                                                 result.predictions)
    # the model's own representation, for embedding drift when the worker logs it (driftline.worker.activations)
    baseline.add_embeddings({ACTIVATIONS: activation_reference(result.model, result.transform, result.features, seed)})
    return baseline.to_dict()


def holdout_labels(result: TrainResult) -> np.ndarray:
    """The labels of the holdout rows only (None elsewhere: skipped by the quality summary).

    The model was fitted on the other rows, so its quality and calibration there are optimistic; fresh
    traffic then looks worse than "training" by that gap, and with hundreds of pooled labels a window's
    margin is narrow enough to page on it. The holdout is what new traffic is like."""
    labels = np.full(len(result.labels), None, dtype=object)
    if len(result.holdout_index) == 0:  # nothing held out: all rows, as before
        return np.asarray(result.labels, dtype=object)
    labels[result.holdout_index] = np.asarray(result.labels, dtype=object)[result.holdout_index]
    return labels


def publish(registry: Registry, model: str, result: TrainResult, *, promote: bool | None = None,
            description: str | None = None, action: str = "promote", reason: str | None = None) -> Published:
    """Register `result` as a new version; promote it when `promote` is True, or None and no production exists."""
    baseline = training_baseline(result, seed=int(result.metrics.get("seed", 0)))
    holdout = {"features": [result.features[i] for i in result.holdout_index],
               "labels": result.labels[result.holdout_index]}
    version = registry.register(model, TrainedVersion(result.model, result.transform, result.metrics,
                                                      result.data_sha256, baseline, len(result.features),
                                                      description, holdout))
    current = registry.alias(model)
    should_promote = promote if promote is not None else current is None
    if should_promote:
        registry.promote(model, version, action=action, reason=reason)
    registry.prune(model)  # every new version is a chance to drop artifacts no one will serve again
    return Published(version, bool(should_promote), current, result.metrics)


def train_and_publish(registry: Registry, model: str, inputs: pd.DataFrame, labels: np.ndarray,
                      config: TrainConfig, **kwargs: Any) -> Published:
    return publish(registry, model, train_model(inputs, labels, config), **kwargs)
