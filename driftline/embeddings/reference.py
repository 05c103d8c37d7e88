"""`EmbeddingReference`: what a baseline learns from one embedding's training vectors, once.

`fit_reference(vectors)` (rows x dimension, finite) keeps four views of the reference, each a
fixed-size map that a window folds its vectors through at a cost independent of the window's size:

* **PCA**: the mean and the top `EMBEDDING_COMPONENTS` principal axes (eigenvectors of the
  covariance), with each component's score binned at the reference's deciles and the reference's
  counts on those bins;
* **k-means codebook**: `EMBEDDING_CLUSTERS` centroids (Lloyd's k-means from k-means++ seeds) and the
  reference's count per cluster (nearest centroid);

  axes and centroids come from one seeded half of the rows and the bins and counts from the other
  (a PCA bins its own rows narrower than fresh ones: its top axes overfit their variance);
* **random Fourier features** for the RBF kernel k(x, y) = exp(-|x - y|^2 / (2 s^2)), s by the
  median heuristic (the median pairwise distance of reference rows): z(x) = sqrt(2/D) cos(W x + b),
  W ~ N(0, I / s^2), b ~ U(0, 2 pi), so that z(x).z(y) ~ k(x, y) (Rahimi and Recht, 2007). W and b
  are drawn from `rff_seed` when needed, not stored; `rff_check` catches a generator that changed.
  The reference's mean feature vector comes from all rows (at most twice `EMBEDDING_FIT_MAX_ROWS`; `rff_rows`), and the
  eigenvalues of the features' covariance give the exact first moments of a same-distribution
  window's MMD^2 = |mean z(window) - rff_mean|^2 for any window size n: it is a weighted sum of
  chi-square(1) variables with weights eigenvalue x (1/n + 1/rff_rows);
* **the mean**: the variance of each component's score and the residual's per-dimension variance (both from
  the held-out half), so that a window mean's whitened squared distance from the reference mean has an exact
  null as the MMD^2's (weights: 1 per component, the residual covariance's eigenvalues over their mean, their
  spread cut to an unbiased estimate of tr(Sigma^2): `residual_spectrum`);
* **the domain classifier's reference rows**: `classifier_inputs` (principal-component scores and the distance
  from their subspace) of a seeded uniform sample of the held-out half, at most
  `EMBEDDING_CLASSIFIER_REFERENCE_ROWS`: what a window's bounded sample is told apart from;
* **the clip radius**: `EMBEDDING_CLIP_RADIUS` times the `EMBEDDING_CLIP_QUANTILE` of the held-out rows' whitened
  distances from the mean; a window pulls a vector beyond it back onto it (`clipped`), so no one vector sways a verdict;
* **null chunks**: for the record, the 95th percentile of the MMD^2 of `EMBEDDING_NULL_CHUNKS` chunks of one
  half against the other half's mean, at each of `EMBEDDING_NULL_CHUNK_SIZES` (tests check the exact null with
  that half's rows agrees with them).

Arrays are stored as base64 little-endian float64 (`to_dict`), so the collector and the detectors
load bit-identical maps.
"""
from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from driftline import defaults
from driftline.errors import UserError


def pack_array(array: np.ndarray) -> dict[str, Any]:
    """A float64 array as JSON: its shape and base64 little-endian bytes."""
    array = np.ascontiguousarray(array, dtype="<f8")
    return {"shape": list(array.shape), "f8": base64.b64encode(array.tobytes()).decode("ascii")}


def unpack_array(data: Mapping[str, Any]) -> np.ndarray:
    raw = base64.b64decode(data["f8"])
    return np.frombuffer(raw, dtype="<f8").reshape([int(n) for n in data["shape"]]).astype(np.float64)


def random_feature_map(seed: int, dimension: int, features: int, bandwidth: float) -> tuple[np.ndarray, np.ndarray]:
    """(W, b) of the random Fourier features: W is dimension x features."""
    rng = np.random.default_rng(seed)
    weights = rng.standard_normal((dimension, features)) / bandwidth
    offsets = rng.uniform(0.0, 2.0 * np.pi, features)
    return weights, offsets


def _check_value(weights: np.ndarray) -> float:
    return float(np.round(weights[:4, :4].sum(), 9))


@dataclass
class EmbeddingReference:
    """One embedding's training summary (module docstring). Build with `fit_reference`."""

    dimension: int
    rows: int
    mean: np.ndarray  # (dimension,)
    components: np.ndarray  # (k, dimension), unit rows
    explained_variance: np.ndarray  # (k,)
    component_edges: np.ndarray  # (k, bins - 1) inner edges at the reference's quantiles
    component_counts: np.ndarray  # (k, bins)
    centroids: np.ndarray  # (clusters, dimension)
    cluster_counts: np.ndarray  # (clusters,)
    bandwidth: float
    rff_seed: int
    rff_features: int
    rff_check: float
    rff_mean: np.ndarray  # (features,) mean random features of one half of the reference
    rff_rows: int  # rows behind rff_mean
    rff_eigenvalues: np.ndarray  # (features,) of the random features' covariance
    null_chunks: dict[int, float] = field(default_factory=dict)  # window size -> 95th percentile of MMD^2
    # the mean test's whitening: each component's variance and the residual's per-dimension variance (k + 1),
    # and the null weights of its statistic (None: a reference fitted before the mean test)
    mean_variances: np.ndarray | None = None
    mean_weights: np.ndarray | None = None
    # the domain classifier's reference rows, rows x (k + 1) (None: a reference fitted before the classifier)
    classifier_sample: np.ndarray | None = None
    # the whitened distance from the mean a window's vector is pulled back to (`clipped`; None: fitted before it)
    clip_radius: float | None = None

    def whitened_distance(self, window_mean: np.ndarray) -> float:
        """The mean difference's squared length, components in their own and the rest in the residual's units."""
        assert self.mean_variances is not None
        delta = window_mean - self.mean
        along = self.components @ delta
        residual = delta - along @ self.components
        return float((along ** 2 / self.mean_variances[:-1]).sum() + (residual ** 2).sum() / self.mean_variances[-1])

    def _whitened_rows(self, delta: np.ndarray) -> np.ndarray:
        """`whitened_distance` of each row of `delta` (rows x dimension differences from the mean)."""
        assert self.mean_variances is not None
        along = delta @ self.components.T
        residual = delta - along @ self.components
        variances = self.mean_variances
        return (along ** 2 / variances[:-1]).sum(axis=1) + (residual ** 2).sum(axis=1) / variances[-1]

    def clipped(self, vectors: np.ndarray) -> np.ndarray:
        """`vectors` with each one whitened-farther from the mean than `clip_radius` moved back onto that radius,
        its direction kept (the rest as they are).

        So one vector, however extreme (values up to the contract's 1e50), moves a window of n rows' whitened
        mean by at most the radius / n, as one unusual reference row would, and lands in one bin, one cluster
        and one sample row: no single vector decides a verdict, while a drift that moves every vector still
        moves the mean. A reference fitted before the radius was kept clips nothing (register it again).
        """
        radius = self.clip_radius
        if radius is None or self.mean_variances is None or vectors.shape[0] == 0:
            return vectors
        delta = vectors - self.mean
        scale = np.abs(delta).max(axis=1)
        scale[scale == 0.0] = 1.0
        # each row in units of its largest difference, so that squaring 1e50 over a tiny variance cannot overflow
        distance = np.sqrt(self._whitened_rows(delta / scale[:, None])) * scale
        far = distance > radius
        if not far.any():
            return vectors
        out = vectors.copy()
        out[far] = self.mean + delta[far] * (radius / distance[far])[:, None]
        return out
    _map: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)

    # -- the maps a window folds through --------------------------------------------------
    def feature_map(self) -> tuple[np.ndarray, np.ndarray]:
        if self._map is None:
            weights, offsets = random_feature_map(self.rff_seed, self.dimension, self.rff_features, self.bandwidth)
            if _check_value(weights) != self.rff_check:
                raise ValueError("this numpy draws other random features than the one that fitted the baseline; "
                                 "register the baseline again")
            self._map = (weights, offsets)
        return self._map

    def random_features(self, vectors: np.ndarray) -> np.ndarray:
        weights, offsets = self.feature_map()
        return np.sqrt(2.0 / self.rff_features) * np.cos(vectors @ weights + offsets)

    def scores(self, vectors: np.ndarray) -> np.ndarray:
        """Principal-component scores, rows x k."""
        return (vectors - self.mean) @ self.components.T

    def classifier_inputs(self, vectors: np.ndarray) -> np.ndarray:
        """What the domain classifier sees of each vector, rows x (k + 1): its principal-component scores and its
        distance from their subspace (a change off the top components, invisible in the scores, shows there)."""
        scores = self.scores(vectors)
        residual = (vectors - self.mean) - scores @ self.components
        return np.column_stack((scores, np.sqrt((residual ** 2).sum(axis=1))))

    def component_bins(self, scores: np.ndarray) -> np.ndarray:
        """Bin index of each score, rows x k (bins right-closed as numpy's searchsorted side="right")."""
        out = np.empty(scores.shape, dtype=np.int64)
        for j in range(scores.shape[1]):
            out[:, j] = np.searchsorted(self.component_edges[j], scores[:, j], side="right")
        return out

    def clusters(self, vectors: np.ndarray) -> np.ndarray:
        """Nearest centroid of each row."""
        distances = (-2.0 * vectors @ self.centroids.T) + (self.centroids ** 2).sum(axis=1)
        return np.argmin(distances, axis=1)

    @property
    def bins(self) -> int:
        return int(self.component_counts.shape[1])

    @property
    def fingerprint(self) -> bytes:
        """What window counts depend on: two states binned on different maps must not merge."""
        digest = hashlib.sha1()
        for array in (self.mean, self.components, self.component_edges, self.centroids):
            digest.update(np.ascontiguousarray(array, dtype="<f8").tobytes())
        digest.update(f"{self.rff_seed}:{self.rff_features}:{self.bandwidth!r}".encode())
        return digest.digest()

    # -- storing ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"dimension": self.dimension, "rows": self.rows, "mean": pack_array(self.mean),
                "components": pack_array(self.components), "explained_variance": pack_array(self.explained_variance),
                "component_edges": pack_array(self.component_edges),
                "component_counts": self.component_counts.astype(int).tolist(),
                "centroids": pack_array(self.centroids), "cluster_counts": self.cluster_counts.astype(int).tolist(),
                "bandwidth": self.bandwidth, "rff_seed": self.rff_seed, "rff_features": self.rff_features,
                "rff_check": self.rff_check, "rff_mean": pack_array(self.rff_mean), "rff_rows": self.rff_rows,
                "rff_eigenvalues": pack_array(self.rff_eigenvalues),
                "null_chunks": [[n, q] for n, q in self.null_chunks.items()],
                **({} if self.mean_variances is None else {"mean_variances": pack_array(self.mean_variances),
                                                           "mean_weights": pack_array(self.mean_weights)}),
                **({} if self.classifier_sample is None else
                   {"classifier_sample": pack_array(self.classifier_sample)}),
                **({} if self.clip_radius is None else {"clip_radius": self.clip_radius})}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "EmbeddingReference":
        return cls(dimension=int(data["dimension"]), rows=int(data["rows"]), mean=unpack_array(data["mean"]),
                   components=unpack_array(data["components"]),
                   explained_variance=unpack_array(data["explained_variance"]),
                   component_edges=unpack_array(data["component_edges"]),
                   component_counts=np.asarray(data["component_counts"], dtype=np.int64),
                   centroids=unpack_array(data["centroids"]),
                   cluster_counts=np.asarray(data["cluster_counts"], dtype=np.int64),
                   bandwidth=float(data["bandwidth"]), rff_seed=int(data["rff_seed"]),
                   rff_features=int(data["rff_features"]), rff_check=float(data["rff_check"]),
                   rff_mean=unpack_array(data["rff_mean"]), rff_rows=int(data["rff_rows"]),
                   rff_eigenvalues=unpack_array(data["rff_eigenvalues"]),
                   null_chunks={int(n): float(q) for n, q in data.get("null_chunks") or []},
                   mean_variances=unpack_array(data["mean_variances"]) if "mean_variances" in data else None,
                   mean_weights=unpack_array(data["mean_weights"]) if "mean_weights" in data else None,
                   classifier_sample=(unpack_array(data["classifier_sample"]) if "classifier_sample" in data
                                      else None),
                   clip_radius=float(data["clip_radius"]) if "clip_radius" in data else None)


def embedding_matrix(values: Any, name: str) -> np.ndarray:
    """Training vectors as a finite float64 matrix (rows x dimension), or UserError saying what is wrong.

    `values`: a 2-D array, or a sequence of equal-length vectors (a list-valued column).
    """
    try:
        if isinstance(values, np.ndarray) and values.ndim == 2:
            matrix = values.astype(np.float64)
        else:
            rows = list(values)
            lengths = {len(v) if v is not None and hasattr(v, "__len__") else -1 for v in rows}
            if len(lengths) != 1 or -1 in lengths:
                raise UserError(f"embedding {name!r}: every row needs a vector of one length "
                                f"(found lengths {sorted(lengths)[:5]})")
            matrix = np.asarray([np.asarray(v, dtype=np.float64) for v in rows], dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise UserError(f"embedding {name!r}: not numeric vectors ({exc})") from None
    if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] == 0:
        raise UserError(f"embedding {name!r}: expected rows x dimension vectors, got shape {matrix.shape}")
    if matrix.shape[1] > defaults.EMBEDDING_MAX_DIMENSION:
        raise UserError(f"embedding {name!r}: {matrix.shape[1]} dimensions, above the limit of "
                        f"{defaults.EMBEDDING_MAX_DIMENSION}")
    if not np.isfinite(matrix).all():
        bad = int(np.flatnonzero(~np.isfinite(matrix).all(axis=1))[0])
        raise UserError(f"embedding {name!r}: row {bad} holds a non-finite number")
    return matrix


def _median_distance(rows: np.ndarray, rng: np.random.Generator) -> float:
    take = rows[rng.choice(rows.shape[0], size=min(rows.shape[0], defaults.EMBEDDING_BANDWIDTH_ROWS), replace=False)]
    squared = (take ** 2).sum(axis=1)
    distances = squared[:, None] + squared[None, :] - 2.0 * take @ take.T
    upper = distances[np.triu_indices(take.shape[0], k=1)]
    median = float(np.sqrt(max(np.median(np.maximum(upper, 0.0)), 0.0))) if upper.size else 0.0
    return median if median > 0 else 1.0  # identical rows: any bandwidth, nothing can be told apart


def _kmeans(rows: np.ndarray, clusters: int, seed: int, iterations: int = 25) -> np.ndarray:
    """Lloyd's k-means from k-means++ seeds, in numpy (scikit-learn's threads contend on small shared machines)."""
    rng = np.random.default_rng(seed)
    clusters = max(1, min(clusters, rows.shape[0]))
    squared = (rows ** 2).sum(axis=1)
    centres = [rows[rng.integers(rows.shape[0])]]
    nearest = squared - 2.0 * rows @ centres[0] + centres[0] @ centres[0]
    for _ in range(1, clusters):
        weights = np.maximum(nearest, 0.0)
        if weights.sum() <= 0:
            break  # fewer distinct rows than clusters
        centre = rows[rng.choice(rows.shape[0], p=weights / weights.sum())]
        centres.append(centre)
        nearest = np.minimum(nearest, squared - 2.0 * rows @ centre + centre @ centre)
    centroids = np.array(centres)
    for _ in range(iterations):
        labels = np.argmin(-2.0 * rows @ centroids.T + (centroids ** 2).sum(axis=1), axis=1)
        counts = np.bincount(labels, minlength=centroids.shape[0])
        sums = np.zeros_like(centroids)
        np.add.at(sums, labels, rows)
        moved = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], centroids)
        if np.allclose(moved, centroids):
            break
        centroids = moved
    return centroids


def fit_reference(vectors: Any, name: str = "embedding", *, seed: int = 0,
                  components: int = defaults.EMBEDDING_COMPONENTS, bins: int = defaults.EMBEDDING_COMPONENT_BINS,
                  clusters: int = defaults.EMBEDDING_CLUSTERS,
                  features: int = defaults.EMBEDDING_RANDOM_FEATURES) -> EmbeddingReference:
    """Fit the four views of one embedding's training vectors (module docstring); UserError for bad input."""
    matrix = embedding_matrix(vectors, name)
    rows, dimension = matrix.shape
    if rows < 2 * bins:
        raise UserError(f"embedding {name!r}: {rows} training rows; at least {2 * bins} are needed")
    rng = np.random.default_rng(seed)
    # Axes and centroids from one half, bins and counts from the other: a PCA fitted on the rows it then
    # bins overstates the variance of its top axes, and fresh rows of the same distribution would drift.
    order = rng.permutation(rows)
    cap = defaults.EMBEDDING_FIT_MAX_ROWS  # each half at most: the fit's cost is bounded whatever the rows
    fit_part, held = order[: rows // 2][:cap], order[rows // 2:][:cap]
    fit_rows, held_rows = matrix[np.sort(fit_part)], matrix[np.sort(held)]
    mean = matrix.mean(axis=0)
    centred = fit_rows - mean
    covariance = centred.T @ centred / max(fit_rows.shape[0] - 1, 1)
    values, vectors_ = np.linalg.eigh(covariance)
    k = max(1, min(components, dimension))
    order_k = np.argsort(values)[::-1][:k]
    axes = vectors_[:, order_k].T
    axes *= np.where(axes[np.arange(k), np.abs(axes).argmax(axis=1)] < 0, -1.0, 1.0)[:, None]  # a stable sign
    scores = (held_rows - mean) @ axes.T
    quantiles = np.arange(1, bins) / bins
    edges = np.quantile(scores, quantiles, axis=0).T  # (k, bins - 1)
    reference = EmbeddingReference(
        dimension=dimension, rows=rows, mean=mean, components=axes, explained_variance=np.maximum(values[order_k], 0.0),
        component_edges=edges, component_counts=np.zeros((k, bins), dtype=np.int64),
        centroids=_kmeans(fit_rows[:5_000], clusters, seed), cluster_counts=np.zeros(0, dtype=np.int64),
        bandwidth=_median_distance(fit_rows, rng), rff_seed=int(seed) + 1, rff_features=features, rff_check=0.0,
        rff_mean=np.zeros(features), rff_rows=0, rff_eigenvalues=np.zeros(features))
    _fit_mean_test(reference, held_rows, scores)
    # its own generator: the draws below (bandwidth rows, null chunks) stay those of references fitted before it
    take = np.random.default_rng([seed, 2]).choice(
        held_rows.shape[0], size=min(held_rows.shape[0], defaults.EMBEDDING_CLASSIFIER_REFERENCE_ROWS), replace=False)
    reference.classifier_sample = reference.classifier_inputs(held_rows[np.sort(take)])
    reference._map = random_feature_map(reference.rff_seed, dimension, features, reference.bandwidth)
    reference.rff_check = _check_value(reference._map[0])
    binned = reference.component_bins(scores)
    for j in range(k):
        reference.component_counts[j] = np.bincount(binned[:, j], minlength=bins)
    reference.cluster_counts = np.bincount(reference.clusters(held_rows), minlength=reference.centroids.shape[0])
    _fit_null(reference, matrix, rng)
    return reference


def _fit_mean_test(reference: EmbeddingReference, held_rows: np.ndarray, scores: np.ndarray) -> None:
    """Variances and null weights of the whitened mean distance, from the held-out half (as the bins: the fit half's
    top axes overstate their variance, its residual understates its own)."""
    k, dimension = reference.components.shape
    component_variances = np.maximum(scores.var(axis=0, ddof=1), 1e-24)
    residual = (held_rows - reference.mean) - scores @ reference.components
    dof = residual.shape[0] - 1
    values = np.maximum(np.linalg.eigvalsh(residual.T @ residual / max(dof, 1)), 0.0)
    values = residual_spectrum(values[::-1][: max(dimension - k, 1)], dof)  # the k projected out are ~0
    residual_variance = max(float(values.mean()), 1e-24)
    reference.mean_variances = np.append(component_variances, residual_variance)
    reference.mean_weights = np.concatenate([np.ones(k), values / residual_variance])
    # each held-out row's whitened distance (`_whitened_rows`, from the residual at hand: no second copy of the rows)
    distances = np.sqrt((scores ** 2 / component_variances).sum(axis=1)
                        + np.einsum("ij,ij->i", residual, residual) / residual_variance)
    reference.clip_radius = defaults.EMBEDDING_CLIP_RADIUS * float(np.quantile(distances,
                                                                               defaults.EMBEDDING_CLIP_QUANTILE))


def residual_spectrum(values: np.ndarray, dof: int) -> np.ndarray:
    """Sample eigenvalues with their spread cut to Srivastava's unbiased estimate of tr(Sigma^2) (2005), same mean.

    From `dof` degrees of freedom in about as many dimensions the sample eigenvalues of even a round covariance
    spread (Marchenko-Pastur: 0.02-3.5 times their level at 1 000 rows in 768 dimensions), and a null built on them
    is a third too wide (0.1 % of no-drift 500-row windows flagged at a 1 % level, 0.9 % with this, over 30
    references of 2 000 rows)."""
    if dof < 3 or values.size < 2:
        return values
    level = float(values.mean())
    square = dof ** 2 / ((dof - 1) * (dof + 2)) * (float((values ** 2).sum()) - float(values.sum()) ** 2 / dof)
    spread = float(((values - level) ** 2).sum())
    if spread <= 0.0:
        return values
    shrink = np.sqrt(min(max(square - values.size * level ** 2, 0.0) / spread, 1.0))
    return np.maximum(level + shrink * (values - level), 0.0)


def _fit_null(reference: EmbeddingReference, matrix: np.ndarray, rng: np.random.Generator) -> None:
    """The reference's mean random features (all rows, at most two caps), their covariance spectrum, and chunk
    bands (one half's chunks against the other half's mean)."""
    rows = matrix.shape[0]
    order = rng.permutation(rows)
    cap = defaults.EMBEDDING_FIT_MAX_ROWS
    half_a, half_b = order[: rows // 2][:cap], order[rows // 2:][:cap]
    fit = matrix if rows <= cap else matrix[order[:cap]]
    z = reference.random_features(fit)
    centred = z - z.mean(axis=0)
    reference.rff_eigenvalues = np.maximum(np.linalg.eigvalsh(centred.T @ centred / max(z.shape[0] - 1, 1)), 0.0)
    # each row's features once: `fit` is every row, or order[:cap], which half_a starts
    z_a, z_b = (z[half_a], z[half_b]) if rows <= cap else (z[: half_a.size], reference.random_features(matrix[half_b]))
    del z, centred
    # Every row the cost allows: a window shares the reference mean's error, and from one half of 2 000 rows
    # that error alone put one reference's 500-row windows over the 1 % level 14.5 % of the time (4.5 % from all).
    half_mean = z_a.mean(axis=0)
    reference.rff_rows = int(z_a.shape[0] + z_b.shape[0])
    reference.rff_mean = (z_a.sum(axis=0) + z_b.sum(axis=0)) / reference.rff_rows
    chunks = defaults.EMBEDDING_NULL_CHUNKS
    for size in defaults.EMBEDDING_NULL_CHUNK_SIZES:
        # each chunk as its rows' counts (a bootstrap draw), so all chunk means are one matrix product
        counts = np.zeros((chunks, z_b.shape[0]))
        np.add.at(counts, (np.repeat(np.arange(chunks), size), rng.integers(0, z_b.shape[0], chunks * size)), 1.0)
        draws = (((counts @ z_b) / size - half_mean) ** 2).sum(axis=1)
        reference.null_chunks[int(size)] = float(np.quantile(draws, 0.95))

