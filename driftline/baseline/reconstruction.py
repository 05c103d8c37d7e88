"""`ReconstructionFit`: the PCA of a reference's features that multivariate drift measures windows against.

Encoding (NannyML's data reconstruction): a numeric feature is its value, a
categorical one the reference share of its category (count encoding: unseen
categories, and those beyond the `defaults.CATEGORY_MAX_DISTINCT` most frequent, 0;
null is a category of its own); missing or non-finite numbers take
the reference mean; every column is then standardised with the reference mean and
standard deviation. The PCA keeps the fewest components whose cumulative share of
the standardised variance reaches `variance_share` (at most features - 1, so the
reconstruction can differ from the row). A row's reconstruction error is the
Euclidean distance between its encoded vector and its projection back from the
components; ``error_mean`` / ``error_std`` describe that error over reference rows
and ``residual_means`` the mean squared residual of each feature, against which a
window's per-feature increase is measured. The components are fitted on one half of
the reference (a seeded split) and the error statistics taken on the other, so a
window's rows and the reference's are both scored by a fit that never saw them (on
too few rows to split, both come from all rows).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from driftline import defaults
from driftline.baseline.profiles import NUMERIC
from driftline.baseline.values import category_key, is_null

__all__ = ["NULL_CATEGORY", "ReconstructionFit", "fit_reconstruction"]

# The key a null categorical value is counted under (not a string any value maps to).
NULL_CATEGORY = "\x00null"
# Standardised values are clipped here: a million standard deviations is drift whatever it
# was, and squares of 1e300 would overflow the error to infinity.
_MAX_STANDARDISED = 1e6


def _keys(values: pd.Series) -> list[str]:
    return [NULL_CATEGORY if is_null(v) else category_key(v) for v in values.tolist()]


def _coded_keys(values: pd.Series) -> tuple[np.ndarray, list[str]]:
    """(a code per row, a key per code): row i's key is ``keys[codes[i]]``, the key `_keys` gives it.

    Each distinct value is keyed once (equal values of one dtype get one key). Object columns
    other than all-text are keyed row by row: there 1 == 1.0 == True, which are keyed apart.
    """
    if values.dtype == object and pd.api.types.infer_dtype(values, skipna=True) not in ("string", "empty"):
        return np.arange(len(values)), _keys(values)
    codes, uniques = pd.factorize(values)
    keys = [category_key(v) for v in uniques.tolist()]
    missing = np.flatnonzero(codes < 0)
    if missing.size:  # null-like values: each keyed as `_keys` keys it (None, NaN, pd.NA differ there)
        codes = codes.copy()
        codes[missing] = np.arange(len(keys), len(keys) + missing.size)
        keys += _keys(values.iloc[missing])
    return codes, keys


def _raw_numeric(values: pd.Series) -> np.ndarray:
    numbers = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    return np.where(np.isfinite(numbers), numbers, np.nan)


@dataclass(frozen=True, eq=False)
class ReconstructionFit:
    """The fitted encoding and PCA (module docstring); JSON through `to_dict` / `from_dict`."""

    features: tuple[str, ...]
    kinds: tuple[str, ...]
    means: np.ndarray  # per feature, of the encoded value before standardising
    scales: np.ndarray
    shares: tuple[Mapping[str, float] | None, ...]  # per categorical feature: category key -> reference share
    components: np.ndarray  # components x features, orthonormal rows
    variance_share: float  # the share the kept components explain
    rows: int  # reference rows the fit saw
    error_mean: float
    error_std: float
    error_rows: int  # reference rows behind error_mean (the held-out half)
    residual_means: np.ndarray  # per feature: mean squared residual over the reference

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReconstructionFit) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def encode(self, frame: pd.DataFrame) -> np.ndarray:
        """Rows x features, standardised; a feature missing from `frame` is all missing (the reference mean)."""
        out = np.empty((len(frame), len(self.features)), dtype=np.float64)
        for j, (name, kind, shares) in enumerate(zip(self.features, self.kinds, self.shares)):
            column = frame[name] if name in frame.columns else pd.Series([None] * len(frame), dtype=object)
            if kind == NUMERIC:
                values = _raw_numeric(column)
            else:
                assert shares is not None
                codes, keys = _coded_keys(column)
                values = np.array([shares.get(key, 0.0) for key in keys], dtype=np.float64)[codes]
            values = np.where(np.isnan(values), self.means[j], values)
            out[:, j] = (values - self.means[j]) / self.scales[j]
        return np.clip(out, -_MAX_STANDARDISED, _MAX_STANDARDISED)

    def residuals(self, encoded: np.ndarray) -> np.ndarray:
        """Rows x features: each encoded value minus its reconstruction from the components."""
        return encoded - (encoded @ self.components.T) @ self.components

    def errors(self, encoded: np.ndarray) -> np.ndarray:
        """Each row's reconstruction error (Euclidean norm of its residual)."""
        return np.sqrt(np.square(self.residuals(encoded)).sum(axis=1))

    def to_dict(self) -> dict[str, Any]:
        return {"features": list(self.features), "kinds": list(self.kinds), "means": self.means.tolist(),
                "scales": self.scales.tolist(), "shares": [None if s is None else dict(s) for s in self.shares],
                "components": self.components.tolist(), "variance_share": self.variance_share, "rows": self.rows,
                "error_mean": self.error_mean, "error_std": self.error_std, "error_rows": self.error_rows,
                "residual_means": self.residual_means.tolist()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ReconstructionFit":
        features = tuple(str(n) for n in data["features"])
        return cls(features=features, kinds=tuple(data["kinds"]),
                   means=np.asarray(data["means"], dtype=np.float64),
                   scales=np.asarray(data["scales"], dtype=np.float64),
                   shares=tuple(None if s is None else {str(k): float(v) for k, v in s.items()}
                                for s in data["shares"]),
                   components=np.asarray(data["components"], dtype=np.float64).reshape(-1, len(features)),
                   variance_share=float(data["variance_share"]), rows=int(data["rows"]),
                   error_mean=float(data["error_mean"]), error_std=float(data["error_std"]),
                   error_rows=int(data["error_rows"]),
                   residual_means=np.asarray(data["residual_means"], dtype=np.float64))


def fit_reconstruction(frame: pd.DataFrame, kinds: Mapping[str, str], *,
                       variance_share: float = defaults.PCA_VARIANCE_SHARE,
                       max_rows: int = defaults.PCA_FIT_MAX_ROWS, seed: int = 0) -> ReconstructionFit | None:
    """Fit the encoding and the PCA on `frame`'s columns named in `kinds` ("numeric" / "categorical").

    None when there is nothing to reconstruct: fewer than two features, or fewer
    rows than features + 1. Beyond `max_rows` a seeded uniform sample is used.
    """
    if not 0.0 < variance_share < 1.0:
        raise ValueError(f"variance_share must be in (0, 1), got {variance_share}")
    names: Sequence[str] = list(kinds)
    if len(names) < 2 or len(frame) < len(names) + 1:
        return None
    if len(frame) > max_rows:
        take = np.sort(np.random.default_rng(seed).choice(len(frame), size=max_rows, replace=False))
        frame = frame.iloc[take]
    # The error statistics come from rows the PCA did not see: with near-equal eigenvalues the fit
    # picks the directions of largest in-sample variance, so in-sample errors run low by O(1/sqrt(rows)),
    # as much as a large window's whole band.
    order = np.random.default_rng(seed).permutation(len(frame))
    held = len(frame) // 2 if len(frame) // 2 >= len(names) + 1 else 0
    raw = np.empty((len(frame), len(names)), dtype=np.float64)
    shares: list[Mapping[str, float] | None] = []
    for j, name in enumerate(names):
        if kinds[name] == NUMERIC:
            raw[:, j] = _raw_numeric(frame[name])
            shares.append(None)
        else:
            codes, distinct = _coded_keys(frame[name])
            keys = pd.Series(np.asarray(distinct, dtype=object)[codes])
            # The most frequent categories only, so the stored fit stays small; the rare rest encode as unseen.
            counts = keys.value_counts(normalize=True).iloc[:defaults.CATEGORY_MAX_DISTINCT]
            share = {str(k): float(v) for k, v in counts.items()}
            raw[:, j] = np.array([share.get(key, 0.0) for key in distinct], dtype=np.float64)[codes]
            shares.append(share)
    with np.errstate(over="ignore", invalid="ignore"):
        means = np.nanmean(np.where(np.isnan(raw).all(axis=0), 0.0, raw), axis=0)
        means = np.where(np.isfinite(means), means, 0.0)
        raw = np.where(np.isnan(raw), means, raw)
        scales = raw.std(axis=0)
    # A constant column (or one whose spread overflows) keeps its units: any value off the constant is error.
    scales = np.where(np.isfinite(scales) & (scales > 0), scales, 1.0)
    encoded = np.clip(np.nan_to_num((raw - means) / scales), -_MAX_STANDARDISED, _MAX_STANDARDISED)
    fitted, checked = (encoded[order[held:]], encoded[order[:held]]) if held else (encoded, encoded)
    _, singular, vt = np.linalg.svd(fitted, full_matrices=False)
    variance = np.square(singular)
    total = float(variance.sum())
    if total <= 0:
        return None
    cumulative = np.cumsum(variance) / total
    kept = min(int(np.searchsorted(cumulative, variance_share)) + 1, len(names) - 1)
    components = vt[:kept]
    fit = ReconstructionFit(features=tuple(names), kinds=tuple(kinds[n] for n in names), means=means, scales=scales,
                            shares=tuple(shares), components=components, variance_share=float(cumulative[kept - 1]),
                            rows=len(frame), error_mean=0.0, error_std=0.0, error_rows=len(checked),
                            residual_means=np.zeros(len(names)))
    residuals = fit.residuals(checked)
    errors = np.sqrt(np.square(residuals).sum(axis=1))
    return ReconstructionFit(**{**fit.__dict__, "error_mean": float(errors.mean()), "error_std": float(errors.std()),
                                "residual_means": np.square(residuals).mean(axis=0)})
