"""Embeddings with known truth for tests and the benchmark: a mixture of Gaussian classes in d dimensions.

`draw(rng, n, d, kind)` gives n vectors: ``none`` (the reference distribution), ``class_mix`` (one class's share
triples), ``mean_shift`` (every vector moves by `shift` along a random unit direction), ``covariance`` (same mean,
the within-class spread grows by a quarter along half the axes).
"""
from __future__ import annotations

import numpy as np

CLASSES = 4
KINDS = ("none", "class_mix", "mean_shift", "covariance")


def centres(d: int, seed: int = 123) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((CLASSES, d)) * (3.0 / np.sqrt(d))


def draw(rng: np.random.Generator, n: int, d: int, kind: str = "none", shift: float = 0.25,
         spread: float = 1.25) -> np.ndarray:
    shares = np.full(CLASSES, 1.0 / CLASSES)
    if kind == "class_mix":
        shares = np.array([0.5, 0.5 / 3, 0.5 / 3, 0.5 / 3])
    labels = rng.choice(CLASSES, size=n, p=shares)
    noise = rng.standard_normal((n, d)) / np.sqrt(d) * 3.0 / 3.0
    if kind == "covariance":
        noise[:, : d // 2] *= spread
    vectors = centres(d)[labels] + noise
    if kind == "mean_shift":
        direction = np.random.default_rng(7).standard_normal(d)
        vectors += shift * direction / np.linalg.norm(direction)
    return vectors
