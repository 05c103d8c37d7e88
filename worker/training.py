"""Train and evaluate the classifier on raw inputs + labels (no I/O: the registry stores the result)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy.stats import mannwhitneyu
from torch import nn

from driftline.worker.feature_transform import FeatureTransform
from driftline.worker.dataset import data_sha256
from driftline.worker.model import ARCHITECTURES, CreditMLP


@dataclass
class TrainConfig:
    size: str = "default"
    epochs: int = 2
    # None: 512 rows (GEMMs big enough to run efficiently on CPU), or fewer when the
    # training set is small, so that an epoch still takes at least MIN_STEPS_PER_EPOCH steps.
    batch_size: int | None = None
    learning_rate: float | None = None  # None: the size's own (LEARNING_RATES)
    holdout_fraction: float = 0.2
    seed: int = 7
    device: str = "cpu"


DEFAULT_BATCH_SIZE = 512
MIN_STEPS_PER_EPOCH = 20
# Adam step sizes per architecture: the small nets need larger steps to converge in a few epochs.
LEARNING_RATES = {"default": 1e-3, "small": 3e-3, "test": 1e-2}


@dataclass
class TrainResult:
    model: CreditMLP
    transform: FeatureTransform
    metrics: dict[str, Any]
    # All rows (train + holdout): the training baseline is computed from these.
    features: list[dict[str, Any]]
    predictions: np.ndarray
    labels: np.ndarray
    data_sha256: str
    holdout_index: np.ndarray = field(repr=False, default_factory=lambda: np.empty(0, dtype=np.int64))


def classification_metrics(probability: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """AUC, log loss, accuracy at 0.5, Brier score, positive rate.

    AUC = U / (n_pos · n_neg), U the Mann-Whitney statistic of the positives' scores
    against the negatives' (ties count one half); None when one class is absent.
    log loss = −mean(y·log p + (1 − y)·log(1 − p)) with p clipped to [1e-7, 1 − 1e-7].
    """
    p = np.clip(np.asarray(probability, dtype=np.float64), 1e-7, 1 - 1e-7)
    y = np.asarray(labels, dtype=np.float64)
    positives, negatives = p[y == 1], p[y == 0]
    auc = None
    if positives.size and negatives.size:
        auc = float(mannwhitneyu(positives, negatives).statistic / (positives.size * negatives.size))
    return {
        "rows": int(y.size),
        "auc": auc,
        "log_loss": float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))),
        "accuracy": float(np.mean((p >= 0.5) == (y == 1))),
        "brier": float(np.mean((p - y) ** 2)),
        "positive_rate": float(y.mean()),
    }


def is_better(candidate: dict[str, Any], incumbent: dict[str, Any]) -> bool:
    """The promotion rule: a lower log loss on the same holdout (a proper scoring rule, unlike AUC)."""
    return candidate["log_loss"] < incumbent["log_loss"]


def is_not_worse(candidate: dict[str, Any], incumbent: dict[str, Any], margin: float) -> bool:
    """The guard on trusted data: the candidate's log loss at most (1 + margin) times the incumbent's."""
    return candidate["log_loss"] <= incumbent["log_loss"] * (1.0 + margin)


def predict_proba(model: CreditMLP, matrix: np.ndarray, device: str = "cpu", batch_rows: int = 8192) -> np.ndarray:
    model.eval()
    out = np.empty(len(matrix), dtype=np.float64)
    with torch.inference_mode():
        for start in range(0, len(matrix), batch_rows):
            chunk = torch.from_numpy(matrix[start:start + batch_rows]).to(device)
            out[start:start + len(chunk)] = torch.sigmoid(model(chunk)).double().cpu().numpy()
    return out


def train_model(inputs: pd.DataFrame, labels: np.ndarray, config: TrainConfig = TrainConfig()) -> TrainResult:
    """Fit the transform and the MLP on a random (1 − holdout) split; evaluate on the holdout."""
    if config.size not in ARCHITECTURES:
        raise ValueError(f"unknown model size {config.size!r}; expected one of {sorted(ARCHITECTURES)}")
    labels = np.asarray(labels, dtype=np.int64)
    rows = len(inputs)
    if rows != len(labels):
        raise ValueError(f"{rows} input rows but {len(labels)} labels")
    holdout_rows = max(1, int(round(rows * config.holdout_fraction)))
    if rows - holdout_rows < 10:
        raise ValueError(f"too few rows to train on ({rows}); need at least {10 + holdout_rows}")
    started = time.perf_counter()
    rng = np.random.default_rng(config.seed)
    order = rng.permutation(rows)
    holdout_index, train_index = order[:holdout_rows], order[holdout_rows:]

    features = FeatureTransform().apply(inputs.to_dict("records"))
    transform = FeatureTransform.fit([features[i] for i in train_index])
    matrix = transform.encode(features)

    torch.manual_seed(config.seed)
    model = CreditMLP(transform.encoded_width, ARCHITECTURES[config.size]).to(config.device)
    optimiser = torch.optim.Adam(model.parameters(), lr=config.learning_rate or LEARNING_RATES[config.size])
    loss_fn = nn.BCEWithLogitsLoss()
    x_train = torch.from_numpy(matrix[train_index]).to(config.device)
    y_train = torch.from_numpy(labels[train_index].astype(np.float32)).to(config.device)
    generator = torch.Generator().manual_seed(config.seed)
    batch_size = config.batch_size or max(8, min(DEFAULT_BATCH_SIZE, len(x_train) // MIN_STEPS_PER_EPOCH))
    for _ in range(config.epochs):
        model.train()
        permutation = torch.randperm(len(x_train), generator=generator).to(config.device)
        for start in range(0, len(x_train), batch_size):
            batch = permutation[start:start + batch_size]
            optimiser.zero_grad(set_to_none=True)
            loss = loss_fn(model(x_train[batch]), y_train[batch])
            loss.backward()
            optimiser.step()
    model.eval()

    predictions = predict_proba(model, matrix, config.device)
    metrics = classification_metrics(predictions[holdout_index], labels[holdout_index])
    metrics.update({
        "train_rows": int(len(train_index)),
        "holdout_rows": int(holdout_rows),
        "train_auc": classification_metrics(predictions[train_index], labels[train_index])["auc"],
        "epochs": config.epochs,
        "batch_size": batch_size,
        "size": config.size,
        "seed": config.seed,
        "train_seconds": round(time.perf_counter() - started, 2),
    })
    metrics = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in metrics.items()}
    return TrainResult(model=model.cpu().eval(), transform=transform, metrics=metrics, features=features,
                       predictions=predictions, labels=labels, data_sha256=data_sha256(inputs, labels),
                       holdout_index=holdout_index)
