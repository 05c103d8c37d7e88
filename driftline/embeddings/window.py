"""`EmbeddingWindow`: one embedding's mergeable summary in a window state, of a size set by the baseline.

Per embedding name a window keeps: the event count and the dimension; the sum vector (the mean
direction); and, once the version's baseline has an `EmbeddingReference` for the name, the counts on
the reference's bins of each principal component, the count per k-means cluster, the sum of the
random Fourier features (the MMD's mean embedding), and per cluster up to
`EMBEDDING_CLUSTER_EXAMPLES` example request ids (the smallest 64-bit id hashes: bottom-k, so the
merge of two windows keeps the examples of their union whatever the split), and a bounded uniform
sample of the vectors as the domain classifier sees them (`EmbeddingReference.classifier_inputs`,
at most `WINDOW_SAMPLE_SIZE` rows: the bottom-k by the request id's hash, as the window state's own
sample, or by the vector's bytes when it has no id). Every part adds (or keeps its bottom-k) on
merge; the cost per window does not grow with its events. Vectors counted before the baseline had
the embedding are in `unbinned` (in the sum, not in the binned parts). With a reference, a vector beyond
the reference's `clip_radius` is first pulled back onto it (`EmbeddingReference.clipped`), so no single vector
dominates the sums; an unbinned one is summed as it came (within the contract's value bound).

`embedding_columns(events)` gathers a batch's vectors into one matrix per name.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from driftline import defaults
from driftline.embeddings.contract import FIELD
from driftline.embeddings.reference import EmbeddingReference


class EmbeddingDimensionError(ValueError):
    """A vector whose length differs from the one its name has in this window or baseline."""


def embedding_columns(events: Sequence[Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """name -> (row positions, rows x dimension float64 matrix) of the events that carry it.

    Events are dicts or objects with a `raw` dict (`InferenceEvent`); they were validated, so
    each vector is a list of finite numbers. Vectors of one name with different lengths raise
    `EmbeddingDimensionError` (the collector then folds event by event and dead-letters the odd one).
    """
    found: dict[str, tuple[list[int], list[list[float]]]] = {}
    for i, event in enumerate(events):
        raw = event if isinstance(event, dict) else (getattr(event, "raw", None) or {})
        vectors = raw.get(FIELD)
        if not vectors:
            continue
        for name, vector in vectors.items():
            rows, values = found.setdefault(name, ([], []))
            rows.append(i)
            values.append(vector)
    out = {}
    for name, (rows, values) in found.items():
        lengths = set(map(len, values))
        if len(lengths) != 1:
            raise EmbeddingDimensionError(f"{FIELD}.{name}: vectors of lengths {sorted(lengths)[:4]} in one batch")
        out[name] = (np.asarray(rows, dtype=np.intp), np.asarray(values, dtype=np.float64))
    return out


def id_keys(ids: np.ndarray) -> np.ndarray:
    """The 64-bit hash of each id (the window sample's hash, so both keep the same requests)."""
    return pd.util.hash_array(np.asarray(ids, dtype=object), categorize=False)


class EmbeddingWindow:
    """One embedding's window summary (module docstring)."""

    def __init__(self, dimension: int, reference: EmbeddingReference | None = None):
        self.dimension = dimension
        self.count = 0
        self.unbinned = 0
        self.sum = np.zeros(dimension)
        self.component_counts: np.ndarray | None = None
        self.cluster_counts: np.ndarray | None = None
        self.feature_sum: np.ndarray | None = None
        self.examples: dict[int, list[tuple[int, str]]] = {}  # cluster -> [(id hash, request id)], smallest first
        # the classifier's sample: keys (ascending) and rows x (k + 1) inputs (None: not attached, or stored before it)
        self.sample_keys = np.empty(0, dtype=np.uint64)
        self.sample: np.ndarray | None = None
        if reference is not None:
            self._attach(reference)

    def _attach(self, reference: EmbeddingReference) -> None:
        self.component_counts = np.zeros_like(reference.component_counts)
        self.cluster_counts = np.zeros(reference.centroids.shape[0], dtype=np.int64)
        self.feature_sum = np.zeros(reference.rff_features)
        self.sample = np.empty((0, reference.components.shape[0] + 1))

    @property
    def binned(self) -> int:
        return self.count - self.unbinned

    def add(self, vectors: np.ndarray, reference: EmbeddingReference | None = None,
            ids: np.ndarray | None = None) -> "EmbeddingWindow":
        """Fold rows x dimension vectors; `ids`: their request ids (None where absent) for cluster examples."""
        if vectors.shape[0] == 0:
            return self
        if vectors.shape[1] != self.dimension:
            raise EmbeddingDimensionError(f"{vectors.shape[1]} dimensions where this window counts {self.dimension}")
        if reference is None:
            self.count += vectors.shape[0]
            self.sum += vectors.sum(axis=0)
            self.unbinned += vectors.shape[0]
            return self
        if reference.dimension != self.dimension:
            raise EmbeddingDimensionError(f"{self.dimension} dimensions; the baseline has {reference.dimension}")
        vectors = reference.clipped(vectors)  # every part below sees the clipped vector, the sample too
        self.count += vectors.shape[0]
        self.sum += vectors.sum(axis=0)
        if self.component_counts is None:
            self._attach(reference)
        assert self.component_counts is not None and self.cluster_counts is not None and self.feature_sum is not None
        bins = reference.component_bins(reference.scores(vectors))
        k, width = self.component_counts.shape
        flat = (bins + np.arange(k) * width).ravel()
        self.component_counts += np.bincount(flat, minlength=k * width).reshape(k, width)
        clusters = reference.clusters(vectors)
        self.cluster_counts += np.bincount(clusters, minlength=self.cluster_counts.size)
        self.feature_sum += reference.random_features(vectors).sum(axis=0)
        if ids is not None:
            self._add_examples(clusters, ids)
        self._add_sample(vectors, reference, ids)
        return self

    def _add_sample(self, vectors: np.ndarray, reference: EmbeddingReference, ids: np.ndarray | None) -> None:
        keys = row_keys(vectors, ids)
        limit = defaults.WINDOW_SAMPLE_SIZE
        if self.sample is None:  # a window stored before the sample: it starts one now
            self.sample = np.empty((0, reference.components.shape[0] + 1))
        candidates = (np.flatnonzero(keys < self.sample_keys[-1]) if self.sample_keys.size >= limit
                      else np.arange(keys.size))
        if candidates.size == 0:
            return
        candidates = candidates[np.argsort(keys[candidates], kind="stable")[:limit]]  # only these are projected
        self.sample_keys, self.sample = _bottom_k(np.concatenate((self.sample_keys, keys[candidates])),
                                                  np.vstack((self.sample, reference.classifier_inputs(vectors[candidates]))))

    def _add_examples(self, clusters: np.ndarray, ids: np.ndarray) -> None:
        present = np.flatnonzero(~np.equal(ids, None))
        if present.size == 0:
            return
        keys = id_keys(ids[present])
        for cluster in np.unique(clusters[present]).tolist():
            mine = clusters[present] == cluster
            fresh = [(int(key), str(rid)) for key, rid in zip(keys[mine].tolist(), ids[present][mine].tolist())]
            self.examples[cluster] = _smallest(self.examples.get(cluster, []) + fresh)

    def merged(self, other: "EmbeddingWindow") -> "EmbeddingWindow":
        if other.dimension != self.dimension:
            raise EmbeddingDimensionError(f"cannot merge embedding windows of {self.dimension} and "
                                          f"{other.dimension} dimensions")
        out = EmbeddingWindow(self.dimension)
        out.count = self.count + other.count
        out.unbinned = self.unbinned + other.unbinned
        out.sum = self.sum + other.sum
        for name in ("component_counts", "cluster_counts", "feature_sum"):
            mine, theirs = getattr(self, name), getattr(other, name)
            setattr(out, name, mine + theirs if mine is not None and theirs is not None else
                    (mine.copy() if mine is not None else None if theirs is None else theirs.copy()))
        for cluster in set(self.examples) | set(other.examples):
            out.examples[cluster] = _smallest(self.examples.get(cluster, []) + other.examples.get(cluster, []))
        samples = [w for w in (self, other) if w.sample is not None]
        if samples:
            out.sample_keys, out.sample = _bottom_k(np.concatenate([w.sample_keys for w in samples]),
                                                    np.vstack([w.sample for w in samples]))
        return out

    def nonfinite(self) -> bool:
        return not (np.isfinite(self.sum).all() and (self.feature_sum is None or np.isfinite(self.feature_sum).all()))

    # -- storing (inside the window state's document; arrays go to its byte section) ----------
    def pack(self) -> dict[str, Any]:
        data: dict[str, Any] = {"dimension": self.dimension, "count": self.count, "unbinned": self.unbinned,
                                "sum": self.sum}
        if self.component_counts is not None:
            data.update(component_counts=self.component_counts.astype(np.int64),
                        cluster_counts=self.cluster_counts.astype(np.int64), feature_sum=self.feature_sum,
                        examples=[[cluster, [[str(key), rid] for key, rid in pairs]]
                                  for cluster, pairs in self.examples.items()])
            if self.sample is not None:
                data.update(sample_keys=self.sample_keys, sample=self.sample)
        return data

    @classmethod
    def unpack(cls, data: Mapping[str, Any]) -> "EmbeddingWindow":
        out = cls(int(data["dimension"]))
        out.count, out.unbinned = int(data["count"]), int(data["unbinned"])
        out.sum = np.asarray(data["sum"], dtype=np.float64)
        if "component_counts" in data:
            out.component_counts = np.asarray(data["component_counts"], dtype=np.int64)
            out.cluster_counts = np.asarray(data["cluster_counts"], dtype=np.int64)
            out.feature_sum = np.asarray(data["feature_sum"], dtype=np.float64)
            out.examples = {int(cluster): [(int(key), str(rid)) for key, rid in pairs]
                            for cluster, pairs in data.get("examples") or []}
            if "sample" in data:
                out.sample_keys = np.asarray(data["sample_keys"], dtype=np.uint64)
                out.sample = np.asarray(data["sample"], dtype=np.float64)
        return out


def row_keys(vectors: np.ndarray, ids: np.ndarray | None) -> np.ndarray:
    """Each vector's sample key: its id's hash (`id_keys`), else the hash of its bytes (deterministic, so a window
    folded in any number of parts keeps the same sample)."""
    missing = np.ones(vectors.shape[0], dtype=bool) if ids is None else np.equal(ids, None)
    keys = np.empty(vectors.shape[0], dtype=np.uint64)
    if not missing.all():
        assert ids is not None
        keys[~missing] = id_keys(ids[~missing])
    if missing.any():
        rows = np.ascontiguousarray(vectors[missing], dtype=np.float64)
        keys[missing] = pd.util.hash_array(np.array([row.tobytes() for row in rows], dtype=object), categorize=False)
    return keys


def _bottom_k(keys: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The `WINDOW_SAMPLE_SIZE` rows of the smallest keys, keys ascending (ties kept in their order)."""
    order = np.argsort(keys, kind="stable")[: defaults.WINDOW_SAMPLE_SIZE]
    return keys[order], rows[order]


def _smallest(pairs: list[tuple[int, str]]) -> list[tuple[int, str]]:
    return sorted(set(pairs))[: defaults.EMBEDDING_CLUSTER_EXAMPLES]


def fold_embeddings(windows: dict[str, EmbeddingWindow], columns: Mapping[str, tuple[np.ndarray, np.ndarray]],
                    references: Mapping[str, EmbeddingReference], ids: np.ndarray | None) -> None:
    """Fold a batch's `embedding_columns` into `windows` (name -> summary), made on first sight of a name.

    Raises before changing anything when a name's dimension differs from its window's or baseline's,
    or when a new name would exceed `EMBEDDING_MAX_NAMES`.
    """
    for name, (_, matrix) in columns.items():
        reference = references.get(name)
        expected = reference.dimension if reference is not None else (
            windows[name].dimension if name in windows else None)
        if expected is not None and matrix.shape[1] != expected:
            raise EmbeddingDimensionError(f"{FIELD}.{name}: {matrix.shape[1]} dimensions where "
                                          f"{'the baseline has' if reference is not None else 'this window counts'} "
                                          f"{expected}")
    new = [name for name in columns if name not in windows]
    if len(windows) + len(new) > defaults.EMBEDDING_MAX_NAMES:
        raise EmbeddingDimensionError(f"{FIELD}: more than {defaults.EMBEDDING_MAX_NAMES} names in one window")
    for name, (rows, matrix) in columns.items():
        window = windows.get(name)
        if window is None:
            window = windows[name] = EmbeddingWindow(matrix.shape[1], references.get(name))
        window.add(matrix, references.get(name), None if ids is None else ids[rows])
