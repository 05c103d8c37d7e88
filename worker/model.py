"""The credit-default classifier: an MLP over the encoded features (driftline.worker.feature_transform).

Sized so that batching matters: the "default" architecture has about 3.2 M weights
(12.7 MB in float32), so one request's forward pass reads every weight from memory
for one row (about 1 ms on a laptop core) while a batch of 64 reads them once.
"""
from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import torch
from torch import nn

from driftline.private_files import open_private

# Hidden layer widths per size. "test" keeps the unit tests fast; "small" is for
# retraining on a few thousand logged rows.
ARCHITECTURES: dict[str, tuple[int, ...]] = {
    "default": (1024, 1024, 1024, 512),
    "small": (256, 128),
    "test": (32, 16),
}


class CreditMLP(nn.Module):
    """Linear -> ReLU -> Dropout blocks, then one logit: P(default) = sigmoid(logit)."""

    def __init__(self, in_features: int, hidden: tuple[int, ...] = ARCHITECTURES["default"], dropout: float = 0.1):
        super().__init__()
        self.in_features = in_features
        self.hidden = tuple(int(h) for h in hidden)
        self.dropout = dropout
        layers: list[nn.Module] = []
        width = in_features
        for h in self.hidden:
            layers += [nn.Linear(width, h), nn.ReLU(), nn.Dropout(dropout)]
            width = h
        layers.append(nn.Linear(width, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)

    def config(self) -> dict[str, Any]:
        return {"in_features": self.in_features, "hidden": list(self.hidden), "dropout": self.dropout}


def save_model(model: CreditMLP, path: Path) -> str:
    """Write the weights and architecture to `path` (which must not exist); returns its sha256."""
    buffer = io.BytesIO()
    torch.save({"config": model.config(), "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()}},
               buffer)
    data = buffer.getvalue()
    with open_private(path) as fh:  # "x": an artifact is never overwritten; 0600
        fh.write(data)
    return hashlib.sha256(data).hexdigest()


def load_model(path: Path, expected_sha256: str | None = None, device: str = "cpu") -> CreditMLP:
    """Read an artifact written by `save_model`, checking its sha256 when given; eval mode on `device`."""
    data = Path(path).read_bytes()
    if expected_sha256 is not None:
        actual = hashlib.sha256(data).hexdigest()
        if actual != expected_sha256:
            raise ValueError(f"model artifact {path} has sha256 {actual}, but the registry recorded {expected_sha256}; "
                             "the file was changed after registration")
    checkpoint = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    config = checkpoint["config"]
    model = CreditMLP(config["in_features"], tuple(config["hidden"]), config["dropout"])
    model.load_state_dict(checkpoint["state_dict"])
    return model.to(device).eval()


def resolve_device(device: str) -> str:
    """"auto" -> "cuda" when a GPU is visible, else "cpu"; "cuda" without a GPU is an error."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda was asked for, but torch sees no CUDA device "
                           f"(torch {torch.__version__}); use --device auto or cpu")
    if device not in ("cpu", "cuda"):
        raise RuntimeError(f"unknown device {device!r}; expected auto, cpu or cuda")
    return device
