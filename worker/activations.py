"""The bundled model's own representation as an embedding: its penultimate-layer activations.

Monitoring what the model computes, not only what it is fed: a change in how the features combine can
move the representation while each single feature moves little (the `embedding_shift` scenario). The
baseline learns the activations of the training rows under the name `ACTIVATIONS`; the worker logs
each request's activations under that name when `worker_log_embeddings` is on (`driftline worker
--log-embeddings`), at the cost of a second, one-row pass through the hidden layers per request.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from driftline.embeddings.reference import EmbeddingReference, fit_reference
from driftline.worker.feature_transform import FeatureTransform
from driftline.worker.model import CreditMLP

# The embedding name the worker logs its activations under, and its baseline learns them as.
ACTIVATIONS = "activations"


def penultimate(net: CreditMLP, matrix: np.ndarray, device: str = "cpu", block: int = 8_192) -> np.ndarray:
    """Each encoded row's activations after the last hidden block (dropout off), rows x last hidden width."""
    hidden = net.net[:-1]  # every block but the output layer
    training = net.training
    net.eval()
    try:
        with torch.inference_mode():
            parts = [hidden(torch.from_numpy(matrix[i:i + block]).to(device)).cpu().numpy()
                     for i in range(0, matrix.shape[0], block)]
    finally:
        net.train(training)
    return np.concatenate(parts).astype(np.float64) if parts else np.empty((0, net.hidden[-1]))


def activations(net: CreditMLP, transform: FeatureTransform, records: Sequence[dict[str, Any]],
                device: str = "cpu") -> np.ndarray:
    return penultimate(net, transform.encode(records), device)


def activation_reference(net: CreditMLP, transform: FeatureTransform, records: Sequence[dict[str, Any]],
                         seed: int = 0) -> EmbeddingReference:
    """The training rows' activations as the baseline's reference for `ACTIVATIONS`."""
    return fit_reference(activations(net, transform, records), ACTIVATIONS, seed=seed)


def activation_event(loaded: Any, features: dict[str, Any], enabled: bool) -> dict[str, np.ndarray] | None:
    """The `embeddings` of one served request's event (a `LoadedVersion`'s activations); None when not `enabled`."""
    if not enabled:
        return None
    return {ACTIVATIONS: activations(loaded.net, loaded.transform, [features], loaded.device)[0]}
