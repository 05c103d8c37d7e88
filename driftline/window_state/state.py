"""`WindowState`: the mergeable summary of one (model, version, window, partition)."""
from __future__ import annotations

import math
from collections import Counter
from typing import Any, Collection, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from driftline import defaults
from driftline.baseline import CATEGORICAL, CLASS, NUMERIC, Baseline, LabelSummary, Profile
from driftline.embeddings.window import EmbeddingWindow, fold_embeddings
from driftline.window_state.batch import EventBatch
from driftline.segments import SegmentSpec
from driftline.window_state import segments as segment_states
from driftline.window_state.columns import prediction_types
from driftline.window_state.codec import READABLE_FORMATS, STATE_FORMAT, pack_document, unpack_document
from driftline.window_state.decisions import DecisionCounts, fold_decisions
from driftline.window_state.feature import FeatureWindow, known_categories
from driftline.window_state.freshness import AgeHistogram, fold_ages, merge_ages, pack_ages, unpack_ages
from driftline.window_state.latency import LatencyHistogram
from driftline.vocabulary import LATENCY_TOTAL
from driftline.window_state.other_features import (OTHER_FEATURES, cap_new_features, fold_other, new_feature_room,
                                                   overflow)


# The name under which quantile() and the detectors address the prediction.
PREDICTION = "prediction"


class WindowState:
    """Mergeable summary of one (model, version, window, partition); see the module docstring.

    Build with `WindowState.empty(baseline)`, fold batches in with `add_batch`,
    labels with `add_labels`; combine with `merge`; store with `to_bytes`.
    """

    def __init__(self, baseline: Baseline | None = None, sample_size: int = defaults.WINDOW_SAMPLE_SIZE,
                 segments: SegmentSpec | None = None):
        if sample_size < 0:
            raise ValueError(f"sample_size must be >= 0, got {sample_size}")
        self.baseline = baseline
        self.baseline_fingerprint: str | None = baseline.fingerprint if baseline is not None else None
        self.events = 0
        self.min_event_ms: int | None = None
        self.max_event_ms: int | None = None
        self.status_counts: dict[str, int] = {}
        self.cache_hits = 0
        self.cache_misses = 0
        self.batch_sizes: dict[int, int] = {}
        self.features: dict[str, FeatureWindow] = {}
        self.prediction: FeatureWindow | None = None
        # the events' own decisions (predicted_class) per score bin, for CBPE; None while no event gave one
        self.decisions: DecisionCounts | None = None
        self.latency: dict[str, LatencyHistogram] = {}
        # values of latency parts first seen beyond defaults.LATENCY_MAX_PARTS parts: counted, not kept
        self.latency_left_out = 0
        # "tokens_in" / "tokens_out" -> the counts of generated answers (only those events gave)
        self.tokens: dict[str, LatencyHistogram] = {}
        # feature name -> ages of its served values (driftline.window_state.freshness); only what events gave
        self.feature_age: dict[str, AgeHistogram] = {}
        self.sample_size = sample_size
        self.sample_keys = np.empty(0, dtype=np.uint64)
        self.sample: list[dict[str, Any]] = []
        self.labels = LabelSummary()
        # embedding name -> its summary (driftline.embeddings.window); segments' sub-states keep none
        self.embeddings: dict[str, EmbeddingWindow] = {}
        self.track_embeddings = True
        # segment column -> value key -> sub-state (driftline.window_state.segments)
        spec = segments or SegmentSpec()
        self.segment_track = spec.track
        self.segments: dict[str, dict[str, WindowState]] = {column: {} for column in spec.columns}

    @classmethod
    def empty(cls, baseline: Baseline | None, sample_size: int = defaults.WINDOW_SAMPLE_SIZE,
              segments: SegmentSpec | None = None) -> "WindowState":
        return cls(baseline, sample_size, segments)

    def _sub_state(self) -> "WindowState":
        """An empty sub-state of one segment: same baseline, no sample, no segments of its own."""
        out = WindowState(self.baseline, 0)
        out.baseline_fingerprint = self.baseline_fingerprint
        out.track_embeddings = False
        return out

    def segment_states(self, column: str, max_values: int) -> dict[str, "WindowState"]:
        """The evaluated segments of `column`: its `max_values` largest values by events, the rest as "other"."""
        return segment_states.top_segments(self.segments.get(column, {}), max_values, self._sub_state)

    # -- reading ----------------------------------------------------------------------
    @property
    def errors(self) -> int:
        return self.status_counts.get("error", 0)

    @property
    def duration_ms(self) -> int:
        if self.min_event_ms is None:
            return 0
        return self.max_event_ms - self.min_event_ms

    def feature_names(self) -> list[str]:
        return list(self.features)

    def quantile(self, name: str, q: float) -> float | None:
        """The q-quantile of a latency part ("latency" = "latency.total", "latency.queue", or the
        bare part name), of the prediction ("prediction") or of a numeric feature.

        Latency: within 1 % (`LatencyHistogram`). Features and the prediction: from the
        fine bins, linear inside the bin (outer bins bounded by the window's min/max);
        needs the baseline attached. None when there is nothing to answer from.
        """
        part = name.split(".", 1)[1] if name.startswith("latency.") else ("total" if name == "latency" else name)
        if part in self.latency and name not in self.features:
            return self.latency[part].quantile(q)
        window = self.prediction if name == PREDICTION else self.features.get(name)
        if window is None or window.counts is None or self.baseline is None:
            return None
        profile = self.baseline.prediction if name == PREDICTION else self.baseline.profiles.get(name)
        return _binned_quantile(profile.edges, window, q)  # type: ignore[union-attr]  # binned: a numeric profile

    # -- writing -----------------------------------------------------------------------
    def _require_baseline(self) -> None:
        if self.baseline_fingerprint is not None and self.baseline is None:
            raise ValueError("this state was binned on a baseline; attach it (WindowState.from_bytes(data, baseline)) "
                             "before adding events")

    def _profile(self, name: str) -> Profile | None:
        return self.baseline.profiles.get(name) if self.baseline is not None else None

    def add_batch(self, batch: EventBatch) -> "WindowState":
        """Fold a batch in (vectorised per column). Returns self."""
        if batch.n == 0:
            return self
        self._require_baseline()
        n = batch.n
        self.events += n
        times = batch.event_time_ms
        if times.size:
            low, high = int(times.min()), int(times.max())
            self.min_event_ms = low if self.min_event_ms is None else min(self.min_event_ms, low)
            self.max_event_ms = high if self.max_event_ms is None else max(self.max_event_ms, high)
        for status, count in Counter(batch.status.tolist()).items():
            self.status_counts[str(status)] = self.status_counts.get(str(status), 0) + count
        if batch.cache_hit.size:
            hits = int(np.count_nonzero(batch.cache_hit == 1.0))
            self.cache_hits += hits
            self.cache_misses += int(np.count_nonzero(batch.cache_hit == 0.0))
        if batch.batch_size.size and not np.isnan(batch.batch_size).all():
            sizes = batch.batch_size[~np.isnan(batch.batch_size)].astype(np.int64)
            values, counts = np.unique(sizes, return_counts=True)
            for size, count in zip(values.tolist(), counts.tolist()):
                self.batch_sizes[size] = self.batch_sizes.get(size, 0) + count

        profiles = self.baseline.profiles if self.baseline is not None else {}
        room = new_feature_room(self.features, profiles)
        left_out = []  # names beyond the bound: counted under OTHER_FEATURES
        for name, column in batch.features.items():
            window = self.features.get(name)
            profile = profiles.get(name)
            if window is None:
                if profile is None:
                    if room <= 0 or name == OTHER_FEATURES:
                        left_out.append(name)
                        continue
                    room -= 1
                kind = profile.kind if profile is not None else (NUMERIC if column.dtype == np.float64 else CATEGORICAL)
                window = self.features[name] = FeatureWindow(kind=kind)
            window.add(column, batch.feature_types.get(name, {}), batch.absent.get(name, 0), profile)
        if left_out or batch.sparse is not None:
            fold_other(self.features, n, *overflow(batch.features, left_out, batch.sparse, n))
        self.add_absent_features(batch, n, (OTHER_FEATURES,) if left_out or batch.sparse is not None else ())
        fold_ages(self.feature_age, batch.feature_age_ms, self.features, batch.features)

        self._add_prediction(batch)
        self.add_latency(batch.latency_ms, batch.tokens)
        self._add_sample(batch)
        if self.track_embeddings:
            self._add_embeddings(batch)
        for segment_column, by_value in self.segments.items():
            segment_states.fold_batch(by_value, batch, segment_states.column_keys(batch, segment_column), self.segment_track,
                                      self._sub_state)
        return self

    def add_latency(self, latency_ms: Mapping[str, np.ndarray], tokens: Mapping[str, np.ndarray] | None) -> None:
        """Fold latency parts (part -> ms, NaN: absent) and token counts (name -> count, NaN: absent) in; a part
        first met when the window holds defaults.LATENCY_MAX_PARTS already is counted in `latency_left_out`."""
        for part, values in latency_ms.items():
            histogram = self.latency.get(part)
            if histogram is None:
                if np.isnan(values).all():
                    continue
                if len(self.latency) >= defaults.LATENCY_MAX_PARTS:
                    self.latency_left_out += int(np.count_nonzero(~np.isnan(values)))
                    continue
                histogram = self.latency[part] = LatencyHistogram()
            histogram.add(values)
        for name, counts in (tokens or {}).items():
            if not np.isnan(counts).all():
                self.tokens.setdefault(name, LatencyHistogram()).add(counts)

    def _add_embeddings(self, batch: EventBatch) -> None:
        columns = batch.embedding_columns()
        if columns:
            references = self.baseline.embeddings if self.baseline is not None else {}
            ids = batch.request_ids if batch.request_ids is not None else batch.event_ids
            fold_embeddings(self.embeddings, columns, references, ids)

    def add_absent_features(self, batch: EventBatch, rows: int, counted: Collection[str] = ()) -> None:
        """Count `rows` missing values for each feature the baseline or this window has and `batch` lacks
        (but the `counted` ones)."""
        profiles = self.baseline.profiles if self.baseline is not None else {}
        for name in dict.fromkeys([*profiles, *self.features]):
            if name in batch.features or name in counted:
                continue
            window = self.features.get(name)
            if window is None:
                window = self.features[name] = FeatureWindow(kind=profiles[name].kind)
            window.add_missing(rows)

    def _add_prediction(self, batch: EventBatch) -> None:
        values = batch.prediction
        self.prediction_window(batch).add(values, prediction_types(values), 0, self.prediction_profile)
        self.decisions = fold_decisions(self.decisions, values, batch.decisions)

    @property
    def prediction_profile(self) -> Profile | None:
        return self.baseline.prediction if self.baseline is not None else None

    def prediction_window(self, batch: EventBatch) -> FeatureWindow:
        """The prediction's summary, made on first use: the baseline's kind, else what the batch holds."""
        if self.prediction is None:
            profile = self.prediction_profile
            if profile is not None:
                kind = profile.kind
            else:
                kind = CATEGORICAL if batch.prediction_source == CLASS else NUMERIC
            self.prediction = FeatureWindow(kind=kind)
        return self.prediction

    def _add_sample(self, batch: EventBatch) -> None:
        k = self.sample_size
        if k == 0:
            return
        keys = _sample_keys(batch)
        if len(self.sample) >= k:
            candidates = np.flatnonzero(keys < self.sample_keys.max())
        else:
            candidates = np.arange(batch.n)
        if candidates.size > k:
            candidates = candidates[np.argpartition(keys[candidates], k - 1)[:k]]
        if candidates.size == 0:
            return
        new_keys = np.concatenate((self.sample_keys, keys[candidates]))
        new_records = self.sample + [batch.sample_record(int(i)) for i in candidates]
        self.sample_keys, self.sample = _bottom_k(new_keys, new_records, k)

    def add_labels(self, predictions: Any, labels: Any,
                   segments: Sequence[Mapping[str, Any] | None] | None = None) -> "WindowState":
        """Count joined (prediction, label) pairs for model quality (see `LabelSummary`).

        The task (binary / regression / multiclass) comes from the baseline's
        training labels when it has them, else from the first values. `segments`:
        each prediction's {column: value key} as it was stored (None: none kept), so
        the pair is also counted in its segments of this state's columns. Raises,
        counting nothing, when the whole window's summary cannot take the pairs.
        """
        if self.labels.task is None and self.baseline is not None and self.baseline.quality is not None:
            self.labels.task = self.baseline.quality.task
        self.labels.add(predictions, labels)
        if segments is not None and self.segments:
            predictions, labels = list(predictions), list(labels)
            for column, by_value in self.segments.items():
                keys = [_column_key(kept, column) for kept in segments]
                segment_states.fold_labels(by_value, keys, predictions, labels, self.labels.task, self.segment_track,
                                           self._sub_state)
        return self

    # -- combining -----------------------------------------------------------------------
    def merge(self, other: "WindowState") -> "WindowState":
        """A new state equal to the state of both inputs' events together.

        Associative and commutative. States binned on different baselines do not merge
        (ValueError); a state without a baseline merges with one that has it (its
        numeric values stay ``unbinned``).
        """
        if (self.baseline_fingerprint and other.baseline_fingerprint
                and self.baseline_fingerprint != other.baseline_fingerprint):
            raise ValueError(f"cannot merge window states of different baselines "
                             f"({self.baseline_fingerprint} and {other.baseline_fingerprint})")
        baseline = self.baseline if self.baseline is not None else other.baseline
        out = WindowState(baseline, max(self.sample_size, other.sample_size))
        out.baseline_fingerprint = self.baseline_fingerprint or other.baseline_fingerprint
        out.events = self.events + other.events
        mins = [t for t in (self.min_event_ms, other.min_event_ms) if t is not None]
        maxs = [t for t in (self.max_event_ms, other.max_event_ms) if t is not None]
        out.min_event_ms = min(mins) if mins else None
        out.max_event_ms = max(maxs) if maxs else None
        out.status_counts = _add_dicts(self.status_counts, other.status_counts)
        out.cache_hits = self.cache_hits + other.cache_hits
        out.cache_misses = self.cache_misses + other.cache_misses
        out.batch_sizes = _add_dicts(self.batch_sizes, other.batch_sizes)
        # A feature one side never saw was absent from that side's events.
        for name in dict.fromkeys(list(self.features) + list(other.features)):
            mine, theirs = self.features.get(name), other.features.get(name)
            kind = (mine or theirs).kind
            mine = mine or _absent_window(kind, self.events)
            theirs = theirs or _absent_window(kind, other.events)
            profile = baseline.profiles.get(name) if baseline is not None else None
            out.features[name] = mine.merged(theirs, known_categories(profile))
        cap_new_features(out.features, baseline.profiles if baseline is not None else {}, out.events)
        if self.prediction is not None and other.prediction is not None:
            out.prediction = self.prediction.merged(other.prediction)
        else:
            out.prediction = self.prediction or other.prediction
        if self.decisions is not None:
            out.decisions = self.decisions.merged(other.decisions)
        elif other.decisions is not None:
            out.decisions = other.decisions.merged(None)
        out.latency, out.latency_left_out = _merge_parts(self.latency, other.latency,
                                                         self.latency_left_out + other.latency_left_out)
        out.tokens = _merge_histograms(self.tokens, other.tokens)
        out.feature_age = merge_ages(self.feature_age, other.feature_age)
        out.sample_keys, out.sample = _bottom_k(np.concatenate((self.sample_keys, other.sample_keys)),
                                                self.sample + other.sample, out.sample_size)
        out.labels = self.labels.merge(other.labels)
        for name in dict.fromkeys([*self.embeddings, *other.embeddings]):
            my_vectors, their_vectors = self.embeddings.get(name), other.embeddings.get(name)
            either = my_vectors or their_vectors
            assert either is not None  # the name came from one of them
            out.embeddings[name] = (my_vectors.merged(their_vectors) if my_vectors and their_vectors
                                    else either.merged(EmbeddingWindow(either.dimension)))
        out.segment_track = max(self.segment_track, other.segment_track)
        for column in dict.fromkeys([*self.segments, *other.segments]):
            out.segments[column] = segment_states.merge(self.segments.get(column, {}), other.segments.get(column, {}),
                                                        out.segment_track, out._sub_state)
        return out

    @classmethod
    def merge_all(cls, states: Iterable["WindowState"], baseline: Baseline | None = None) -> "WindowState":
        """Merge any number of partial states (none: an empty state on `baseline`)."""
        out: WindowState | None = None
        for state in states:
            out = state if out is None else out.merge(state)
        if out is None:
            return cls.empty(baseline)
        if baseline is not None and out.baseline is None:
            out = out.merge(cls.empty(baseline))
        return out

    # -- storing ---------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """A compact blob: a JSON header with the arrays' raw bytes behind it, zlib-compressed.

        A state holding a non-finite number (never one built by `add_batch`, which keeps
        them out of sums) raises `WindowStateError` rather than store a null.
        """
        return pack_document(self._document())

    def _document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "format": STATE_FORMAT, "baseline": self.baseline_fingerprint, "events": self.events,
            "min_event_ms": self.min_event_ms, "max_event_ms": self.max_event_ms,
            "status": self.status_counts, "cache_hits": self.cache_hits, "cache_misses": self.cache_misses,
            "batch_sizes": [[k, v] for k, v in self.batch_sizes.items()],
            "features": {name: w._pack() for name, w in self.features.items()},
            "prediction": None if self.prediction is None else self.prediction._pack(),
            "latency": {part: h._pack() for part, h in self.latency.items()},
            "sample_size": self.sample_size, "sample_keys": self.sample_keys, "sample": self.sample,
            "labels": self.labels.to_dict(),
        }
        if self.feature_age:
            doc["feature_age"] = pack_ages(self.feature_age)
        if self.tokens:
            doc["tokens"] = {name: h._pack() for name, h in self.tokens.items()}
        if self.latency_left_out:
            doc["latency_left_out"] = self.latency_left_out
        if self.decisions is not None:
            doc["decisions"] = self.decisions.pack()
        if self.embeddings:
            doc["embeddings"] = {name: window.pack() for name, window in self.embeddings.items()}
        if self.segments:
            doc["segment_track"] = self.segment_track
            doc["segments"] = {column: {key: sub._document() for key, sub in by_value.items()}
                               for column, by_value in self.segments.items()}
        return doc

    @classmethod
    def from_bytes(cls, data: bytes, baseline: Baseline | None = None) -> "WindowState":
        """Read a `to_bytes` blob; pass the baseline to keep adding events or to read quantiles.

        A blob that is not a window state, or was binned on another baseline than
        the one given, raises ValueError.
        """
        doc = unpack_document(data)
        if doc.get("format") not in READABLE_FORMATS:
            raise ValueError(f"unsupported window state format {doc.get('format')!r}")
        return cls._from_document(doc, baseline)

    @classmethod
    def _from_document(cls, doc: Mapping[str, Any], baseline: Baseline | None) -> "WindowState":
        fingerprint = doc.get("baseline")
        if baseline is not None and fingerprint is not None and baseline.fingerprint != fingerprint:
            raise ValueError(f"window state was binned on baseline {fingerprint}, not {baseline.fingerprint}")
        # A state counted before its baseline existed takes the baseline now: later
        # events are binned, the earlier ones stay `unbinned`.
        out = cls(baseline, int(doc["sample_size"]))
        out.baseline_fingerprint = fingerprint if baseline is None else baseline.fingerprint
        out.events = int(doc["events"])
        out.min_event_ms, out.max_event_ms = doc["min_event_ms"], doc["max_event_ms"]
        out.status_counts = {str(k): int(v) for k, v in doc["status"].items()}
        out.cache_hits, out.cache_misses = int(doc["cache_hits"]), int(doc["cache_misses"])
        out.batch_sizes = {int(k): int(v) for k, v in doc["batch_sizes"]}
        out.features = {name: FeatureWindow._unpack(w) for name, w in doc["features"].items()}
        out.prediction = None if doc["prediction"] is None else FeatureWindow._unpack(doc["prediction"])
        out.decisions = DecisionCounts.unpack(doc.get("decisions"))
        out.latency = {part: LatencyHistogram._unpack(h) for part, h in doc["latency"].items()}
        out.latency_left_out = int(doc.get("latency_left_out", 0))
        out.tokens = {str(name): LatencyHistogram._unpack(h) for name, h in (doc.get("tokens") or {}).items()}
        out.feature_age = unpack_ages(doc.get("feature_age"))
        out.sample_keys = np.asarray(doc["sample_keys"], dtype=np.uint64)
        out.sample = list(doc["sample"])
        out.labels = LabelSummary.from_dict(doc["labels"])
        out.embeddings = {str(name): EmbeddingWindow.unpack(w) for name, w in (doc.get("embeddings") or {}).items()}
        out.segment_track = int(doc.get("segment_track", out.segment_track))
        out.segments = {str(column): {str(key): cls._from_document(sub, baseline) for key, sub in by_value.items()}
                        for column, by_value in (doc.get("segments") or {}).items()}
        return out

    def nonfinite_field(self) -> str | None:
        """Where the state holds a non-finite sum (None: nowhere), without encoding it.

        The collector checks each freshly folded batch with this: cheaper than `to_bytes`, and
        a state that passes encodes (the empty min/max are stored as null on purpose).
        """
        windows = dict(self.features)
        if self.prediction is not None:
            windows[PREDICTION] = self.prediction
        for name, window in windows.items():
            if not (math.isfinite(window.total) and math.isfinite(window.total_sq)):
                return f"features.{name}.total"
            if window.sums is not None and not np.isfinite(window.sums).all():
                return f"features.{name}.sums"
        for part, histogram in self.latency.items():
            if not math.isfinite(histogram.sum):
                return f"latency.{part}.sum"
        for name, histogram in self.tokens.items():
            if not math.isfinite(histogram.sum):
                return f"tokens.{name}.sum"
        for name, histogram in self.feature_age.items():
            if not math.isfinite(histogram.sum):
                return f"feature_age.{name}.sum"
        for name, embedding in self.embeddings.items():
            if embedding.nonfinite():
                return f"embeddings.{name}.sum"
        labels = self.labels
        for name in ("log_loss_sum", "sum_error", "sum_abs_error", "sum_sq_error", "sum_label", "sum_sq_label"):
            if not math.isfinite(getattr(labels, name)):
                return f"labels.{name}"
        return None

    def __repr__(self) -> str:
        return (f"WindowState(events={self.events}, features={len(self.features)}, "
                f"baseline={self.baseline_fingerprint}, sample={len(self.sample)})")


def _column_key(kept: Mapping[str, Any] | None, column: str) -> str | None:
    """A stored prediction's value key for `column` (None: the prediction kept none for it)."""
    if not isinstance(kept, Mapping):
        return None
    key = kept.get(column)
    return None if key is None else str(key)


def _absent_window(kind: str, events: int) -> FeatureWindow:
    return FeatureWindow(kind=kind, absent=events, nulls=events)


def _merge_histograms(mine: Mapping[str, LatencyHistogram],
                      theirs: Mapping[str, LatencyHistogram]) -> dict[str, LatencyHistogram]:
    """Each name's histograms added (a name one side lacks: the other side's, copied)."""
    out = {}
    for name in dict.fromkeys([*mine, *theirs]):
        a, b = mine.get(name), theirs.get(name)
        out[name] = a.merged(b) if a is not None and b is not None else (a or b or LatencyHistogram()).merged(
            LatencyHistogram())
    return out


def _merge_parts(mine: Mapping[str, LatencyHistogram], theirs: Mapping[str, LatencyHistogram],
                 left_out: int) -> tuple[dict[str, LatencyHistogram], int]:
    """The latency parts of both, at most defaults.LATENCY_MAX_PARTS: "total" and the most counted parts are kept,
    the values of the others added to `left_out`."""
    merged = _merge_histograms(mine, theirs)
    if len(merged) <= defaults.LATENCY_MAX_PARTS:
        return merged, left_out
    ranked = sorted(merged, key=lambda part: (part != LATENCY_TOTAL, -merged[part].count, part))
    kept = ranked[:defaults.LATENCY_MAX_PARTS]
    left_out += sum(merged[part].count + merged[part].out_of_range for part in ranked[defaults.LATENCY_MAX_PARTS:])
    return {part: merged[part] for part in merged if part in kept}, left_out


def _add_dicts(a: Mapping[Any, int], b: Mapping[Any, int]) -> dict[Any, int]:
    out = dict(a)
    for key, value in b.items():
        out[key] = out.get(key, 0) + value
    return out


def _sample_keys(batch: EventBatch) -> np.ndarray:
    """A uniform 64-bit key per event: the hash of its request id (else event id), random without either."""
    ids = batch.sample_ids()
    if ids is None:
        return _random_keys(batch.n)
    missing = np.equal(ids, None)
    if not missing.any():
        return pd.util.hash_array(ids, categorize=False)
    keys = _random_keys(batch.n)
    present = np.flatnonzero(~missing)
    keys[present] = pd.util.hash_array(ids[present], categorize=False)
    return keys


def _random_keys(n: int) -> np.ndarray:
    return np.random.default_rng().integers(0, np.iinfo(np.uint64).max, n, dtype=np.uint64, endpoint=True)


def _bottom_k(keys: np.ndarray, records: list[dict[str, Any]], k: int) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """The `k` records with the smallest keys, ordered by key (ties: lower position first)."""
    order = np.argsort(keys, kind="stable")[:k]
    return keys[order], [records[i] for i in order.tolist()]


def _binned_quantile(edges: np.ndarray, window: FeatureWindow, q: float) -> float | None:
    counts = window.counts
    total = int(counts.sum())
    if total == 0:
        return None
    target = q * total
    cumulative = np.cumsum(counts)
    i = min(int(np.searchsorted(cumulative, target, side="left")), counts.size - 1)
    low = edges[i - 1] if i > 0 else window.min
    high = edges[i] if i < edges.size else window.max
    low, high = max(low, window.min), min(high, window.max)
    before = cumulative[i] - counts[i]
    fraction = (target - before) / counts[i] if counts[i] else 0.0
    return float(low + (high - low) * min(max(fraction, 0.0), 1.0))
