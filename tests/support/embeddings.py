"""Embeddings with known truth for tests and the benchmark: a mixture of Gaussian classes in d dimensions.

`draw(rng, n, d, kind)` gives n vectors: ``none`` (the reference distribution), ``class_mix`` (one class's share
from a quarter to `mix`), ``mean_shift`` (every vector moves by `shift` within-class standard deviations along a
random unit direction), ``covariance`` (same mean, the within-class spread grows by `spread` along half the axes).
"""
from __future__ import annotations

import numpy as np

CLASSES = 4
KINDS = ("none", "class_mix", "mean_shift", "covariance")


def centres(d: int, seed: int = 123) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((CLASSES, d)) * (3.0 / np.sqrt(d))


def draw(rng: np.random.Generator, n: int, d: int, kind: str = "none", shift: float = 2.0,
         spread: float = 1.25, mix: float = 0.5) -> np.ndarray:
    shares = np.full(CLASSES, 1.0 / CLASSES)
    if kind == "class_mix":
        shares = np.array([mix] + [(1.0 - mix) / (CLASSES - 1)] * (CLASSES - 1))
    labels = rng.choice(CLASSES, size=n, p=shares)
    noise = rng.standard_normal((n, d)) / np.sqrt(d)  # within-class standard deviation 1/sqrt(d) per axis
    if kind == "covariance":
        noise[:, : d // 2] *= spread
    vectors = centres(d)[labels] + noise
    if kind == "mean_shift":
        direction = np.random.default_rng(7).standard_normal(d)
        vectors += shift / np.sqrt(d) * direction / np.linalg.norm(direction)
    return vectors
