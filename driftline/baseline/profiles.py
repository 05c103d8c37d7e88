"""Training distributions of one feature: `NumericProfile` (fine bins, moments) and `CategoricalProfile`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

from driftline import defaults
from driftline.baseline.values import category_key, finite_or_none, json_type
from driftline.errors import UserError
from driftline.vocabulary import CATEGORICAL, NUMERIC


def fine_probabilities(fine_bins: int) -> np.ndarray:
    """0, 1/B ... (B-1)/B, 1, with each outer 1/B split into `BASELINE_TAIL_BINS` parts.

    The tails are where a window's values go past the training data and where the
    ECDFs cross inside a wide bin; finer tail bins keep the Wasserstein distance
    from bins exact there too. The training min and max (probabilities 0 and 1)
    are edges, so the open outer bins hold exactly the out-of-range values, where
    one ECDF is flat and the Wasserstein integral has no sign change.
    """
    tail = np.arange(1, defaults.BASELINE_TAIL_BINS) / (defaults.BASELINE_TAIL_BINS * fine_bins)
    return np.concatenate(([0.0], tail, np.arange(1, fine_bins) / fine_bins, 1.0 - tail[::-1], [1.0]))


@dataclass
class NumericProfile:
    """Training distribution of one numeric feature (module docstring)."""

    edges: np.ndarray  # strictly increasing inner edges of the fine bins (float64)
    counts: np.ndarray  # int64, len(edges) + 1
    sums: np.ndarray  # float64 sum of the values in each fine bin
    decile_edges: np.ndarray  # inner edges of the ten PSI bins, a subset of `edges`
    count: int  # finite values
    nulls: int  # None / NaN
    nonfinite: int  # +/-inf, kept out of bins and moments
    min: float | None
    max: float | None
    mean: float | None
    std: float | None  # population (ddof=0)
    distinct: int = 0  # distinct finite values (a feature with few is binned value by value for JS)

    kind = NUMERIC

    @property
    def rows(self) -> int:
        return self.count + self.nulls + self.nonfinite

    @property
    def null_rate(self) -> float:
        return self.nulls / self.rows if self.rows else 0.0

    @property
    def value_types(self) -> dict[str, int]:
        return {"number": self.count + self.nonfinite}

    @property
    def decile_index(self) -> np.ndarray:
        """Positions of the decile edges among the fine edges (for re-aggregation)."""
        return np.searchsorted(self.edges, self.decile_edges)

    @classmethod
    def from_values(cls, values: Any, fine_bins: int = defaults.BASELINE_FINE_BINS) -> "NumericProfile":
        array = np.asarray(values, dtype=np.float64).ravel()
        nan = np.isnan(array)
        finite_mask = np.isfinite(array)
        finite = np.sort(array[finite_mask])
        n = finite.size
        nonfinite = int(array.size - n - nan.sum())
        if n:
            edges = np.unique(np.quantile(finite, fine_probabilities(fine_bins)))
            decile = np.unique(np.quantile(finite, np.arange(1, defaults.PSI_NUMERIC_BINS) / defaults.PSI_NUMERIC_BINS))
            # Same probabilities (k/10 == 100k/1000 exactly in floating point) and
            # the same data, so every decile is one of the fine edges.
            if not np.isin(decile, edges).all():  # pragma: no cover - arithmetic guarantee
                edges = np.union1d(edges, decile)
            index = np.searchsorted(edges, finite, side="right")
            counts = np.bincount(index, minlength=edges.size + 1).astype(np.int64)
            sums: np.ndarray = np.bincount(index, weights=finite, minlength=edges.size + 1)
            mean, std = float(finite.mean()), float(finite.std())
            low, high = float(finite[0]), float(finite[-1])
            distinct = int(np.count_nonzero(np.diff(finite))) + 1
        else:
            distinct = 0
            edges = np.empty(0)
            decile = np.empty(0)
            counts = np.zeros(1, dtype=np.int64)
            sums = np.zeros(1)
            mean = std = low = high = None
        return cls(edges=edges, counts=counts, sums=sums, decile_edges=decile, count=int(n),
                   nulls=int(nan.sum()), nonfinite=nonfinite, min=low, max=high, mean=mean, std=std,
                   distinct=distinct)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": NUMERIC, "edges": self.edges.tolist(), "counts": self.counts.tolist(),
                "sums": self.sums.tolist(), "decile_edges": self.decile_edges.tolist(), "count": self.count,
                "nulls": self.nulls, "nonfinite": self.nonfinite, "min": finite_or_none(self.min),
                "max": finite_or_none(self.max), "mean": finite_or_none(self.mean),
                "std": finite_or_none(self.std), "distinct": self.distinct}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "NumericProfile":
        edges = np.asarray(data["edges"], dtype=np.float64)
        counts = np.asarray(data["counts"], dtype=np.int64)
        sums = np.asarray(data["sums"], dtype=np.float64)
        if counts.size != edges.size + 1 or sums.size != counts.size:
            raise UserError(f"baseline numeric profile is inconsistent: {edges.size} edges, "
                            f"{counts.size} counts, {sums.size} sums")
        return cls(edges=edges, counts=counts, sums=sums,
                   decile_edges=np.asarray(data["decile_edges"], dtype=np.float64), count=int(data["count"]),
                   nulls=int(data["nulls"]), nonfinite=int(data.get("nonfinite", 0)), min=data["min"],
                   max=data["max"], mean=data["mean"], std=data["std"], distinct=int(data.get("distinct", 0)))


@dataclass
class CategoricalProfile:
    """Training distribution of one categorical feature: counts per `category_key`."""

    counts: dict[str, int]
    nulls: int
    value_types: dict[str, int]  # JSON type -> count of non-null values

    kind = CATEGORICAL

    @property
    def count(self) -> int:
        return int(sum(self.counts.values()))

    @property
    def rows(self) -> int:
        return self.count + self.nulls

    @property
    def null_rate(self) -> float:
        return self.nulls / self.rows if self.rows else 0.0

    @property
    def frequencies(self) -> dict[str, float]:
        total = self.count
        return {k: v / total for k, v in self.counts.items()} if total else {}

    @classmethod
    def from_values(cls, values: Any) -> "CategoricalProfile":
        counts, nulls, types = count_categories(values)
        return cls(counts=counts, nulls=nulls, value_types=types)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": CATEGORICAL, "counts": dict(self.counts), "nulls": self.nulls,
                "value_types": dict(self.value_types)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "CategoricalProfile":
        return cls(counts={str(k): int(v) for k, v in data["counts"].items()}, nulls=int(data["nulls"]),
                   value_types={str(k): int(v) for k, v in data.get("value_types", {}).items()})


Profile = NumericProfile | CategoricalProfile


def count_categories(values: Any) -> tuple[dict[str, int], int, dict[str, int]]:
    """``(counts per category_key, nulls, counts per JSON type)`` of a column, vectorised by pandas.

    pandas hashes the Python objects once (C speed); only the distinct values are
    turned into keys in Python.
    """
    series = values if isinstance(values, pd.Series) else pd.Series(np.asarray(values, dtype=object), dtype=object)
    counted = series.value_counts(dropna=True, sort=False)
    counts: dict[str, int] = {}
    types: dict[str, int] = {}
    for value, count in zip(counted.index.tolist(), counted.to_numpy().tolist()):
        key = category_key(value)
        counts[key] = counts.get(key, 0) + int(count)
        kind = json_type(value)
        types[kind] = types.get(kind, 0) + int(count)
    nulls = int(len(series) - sum(counts.values()))
    return counts, nulls, types


def profile_from_dict(data: Mapping[str, Any]) -> Profile:
    kind = data.get("kind")
    if kind == NUMERIC:
        return NumericProfile.from_dict(data)
    if kind == CATEGORICAL:
        return CategoricalProfile.from_dict(data)
    raise UserError(f"baseline profile has unknown kind {kind!r}")
