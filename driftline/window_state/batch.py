"""`EventBatch`: a batch of events as columns, the unit the collector folds into a window state."""
from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from typing import Any, Sequence

import numpy as np

from driftline.window_state.columns import (MISSING, attr_field, column_from_objects, dict_field, event_times,
                                            feature_columns, latency_columns, object_field, optional_column,
                                            prediction_column, token_columns, types_of)
from driftline.window_state.freshness import age_columns
from driftline.baseline.decisions import decision_values
from driftline.vocabulary import PREDICTED_CLASS
from driftline.embeddings.window import embedding_columns
from driftline.window_state.other_features import SparseFeatures


@dataclass
class EventBatch:
    """One poll's worth of valid inference events, as columns (build with `from_events`).

    Every array has `n` rows, one per event, in the events' order.
    """

    n: int
    # feature name -> float64 (NaN: null or absent) when every non-null value is a
    # number, else an object array of the raw values (None: null or absent)
    features: dict[str, np.ndarray]
    # feature name -> {JSON type: count} of the non-null values
    feature_types: dict[str, dict[str, int]]
    # feature name -> how many events lacked the key (their rows hold null)
    absent: dict[str, int]
    # float64 score (NaN: none) or object array of class keys (None: none); see
    # `driftline.baseline.prediction_values` for lists of class probabilities
    prediction: np.ndarray
    prediction_source: str | None
    # latency part ("total", "queue", "compute", ...) -> float64 ms (NaN: part absent)
    latency_ms: dict[str, np.ndarray]
    status: np.ndarray  # object array of "ok" / "error"
    cache_hit: np.ndarray  # float64: 1 hit, 0 miss, NaN unknown
    batch_size: np.ndarray  # float64, NaN unknown
    event_time_ms: np.ndarray  # int64 epoch milliseconds
    event_ids: np.ndarray | None  # object array of str (the sample's key where a request id is absent)
    events: Sequence[Any] = ()  # the source events (dicts or InferenceEvent), read for the sample only
    # object array of str or None: the uniform sample's keys, shared by a request's shadow answer
    request_ids: np.ndarray | None = None
    # values of the feature names the batch made no column of (driftline.window_state.other_features)
    sparse: SparseFeatures | None = None
    # feature name -> float64 age of the served value in ms (NaN: not given); None: no event gave any
    feature_age_ms: dict[str, np.ndarray] | None = None
    # "tokens_in" / "tokens_out" -> float64 counts of a generated answer (NaN: not given); only those some event gave
    tokens: dict[str, np.ndarray] | None = None
    # the model's own decisions (`predicted_class`: 1.0, 0.0, NaN not given); None: no event gave one
    decisions: np.ndarray | None = None

    @classmethod
    def from_events(cls, events: Sequence[Any]) -> "EventBatch":
        """Columns from validated events: inference event dicts (driftline.events), or `InferenceEvent`s.

        Feature columns: a batch whose events carry the same feature keys in the
        same order (the usual case: one producer) takes the fast path, a 2-D
        object array sliced into columns; otherwise each column is gathered by key.
        """
        events = list(events)
        n = len(events)
        if n == 0:
            return cls.empty()
        if type(events[0]) is dict and all(type(e) is dict for e in events):
            field = dict_field
            raws = events
            times = field(events, "ts_ms")
            if times.count(None):
                times = [t if t is not None else e.get("ts") for t, e in zip(times, events)]
        else:
            field = attr_field if any(type(e) is dict for e in events) else object_field
            raws = [getattr(e, "raw", None) or {} for e in events] if field is object_field else [
                e if type(e) is dict else (getattr(e, "raw", None) or {}) for e in events]
            times = field(events, "ts_ms")
        features = field(events, "features")
        if features.count(None):
            features = [f or {} for f in features]
        latencies = field(events, "latency_ms")
        if latencies.count(None):
            latencies = [lat or {} for lat in latencies]
        statuses = field(events, "status")
        ids = field(events, "event_id")
        request_ids = field(events, "request_id")
        columns, types, absent, left_out = feature_columns(features)
        source, prediction = prediction_column(field(events, "prediction"))
        event_time_ms = event_times(times)
        return cls(n=n, features=columns, feature_types=types, absent=absent, prediction=prediction,
                   prediction_source=source, latency_ms=latency_columns(latencies),
                   status=np.array(statuses, dtype=object), cache_hit=optional_column(raws, "cache_hit"),
                   batch_size=optional_column(raws, "batch_size"), event_time_ms=event_time_ms,
                   event_ids=None if ids.count(None) else np.array(ids, dtype=object), events=events,
                   request_ids=None if request_ids.count(None) == n else np.array(request_ids, dtype=object),
                   sparse=SparseFeatures.gather(features, left_out) if left_out else None,
                   feature_age_ms=age_columns(raws, event_time_ms, columns), tokens=token_columns(raws),
                   decisions=_decisions(raws))

    @classmethod
    def empty(cls) -> "EventBatch":
        return cls(n=0, features={}, feature_types={}, absent={}, prediction=np.empty(0), prediction_source=None,
                   latency_ms={}, status=np.empty(0, dtype=object), cache_hit=np.empty(0), batch_size=np.empty(0),
                   event_time_ms=np.empty(0, dtype=np.int64), event_ids=None, events=())

    def take(self, indices: np.ndarray | Sequence[int]) -> "EventBatch":
        """The sub-batch of the events at `indices` (e.g. one event-time window of a poll)."""
        index = np.asarray(indices, dtype=np.intp)
        if index.ndim != 1:
            raise ValueError("take needs a 1-D array of positions")
        positions = index.tolist()
        absent = {}
        for name, count in self.absent.items():
            if count:
                rows = [self._feature(self.events[i], name) is MISSING for i in positions] if self.events else []
                missing = int(sum(rows))
                if missing:
                    absent[name] = missing
        features, types = {}, {}
        for name, column in self.features.items():
            features[name], types[name] = column_from_objects(column[index]) if column.dtype == object else (
                column[index], types_of(column[index]))
        return EventBatch(n=len(positions), features=features, feature_types=types, absent=absent,
                          prediction=self.prediction[index], prediction_source=self.prediction_source,
                          latency_ms={part: v[index] for part, v in self.latency_ms.items()},
                          status=self.status[index], cache_hit=self.cache_hit[index], batch_size=self.batch_size[index],
                          event_time_ms=self.event_time_ms[index],
                          event_ids=None if self.event_ids is None else self.event_ids[index],
                          events=self._events_at(positions),
                          request_ids=None if self.request_ids is None else self.request_ids[index],
                          sparse=None if self.sparse is None else self.sparse.take(index, self.n),
                          feature_age_ms=None if self.feature_age_ms is None else {
                              name: ages[index] for name, ages in self.feature_age_ms.items()},
                          tokens=None if self.tokens is None else {
                              name: counts[index] for name, counts in self.tokens.items()},
                          decisions=None if self.decisions is None else self.decisions[index])

    def sample_ids(self) -> np.ndarray | None:
        """Each event's key in the uniform sample: its request id, else its event id (None: neither).

        Keyed by request id, the production and shadow windows of one model sample the same
        requests (coordinated bottom-k sampling), so their samples pair up by request id.
        """
        if self.request_ids is None:
            return self.event_ids
        if self.event_ids is None:
            return self.request_ids
        missing = np.equal(self.request_ids, None)
        return np.where(missing, self.event_ids, self.request_ids) if missing.any() else self.request_ids

    def _events_at(self, positions: list[int]) -> Sequence[Any]:
        if not self.events:
            return ()
        subset = getattr(self.events, "subset", None)  # undecoded messages stay undecoded (event_columns.RawRecords)
        return subset(positions) if subset is not None else [self.events[i] for i in positions]

    @staticmethod
    def _feature(event: Any, name: str) -> Any:
        features = event.get("features") if isinstance(event, dict) else getattr(event, "features", None)
        return (features or {}).get(name, MISSING)

    def tag_column(self, name: str) -> np.ndarray | None:
        """The events' tag `name` (object array, None where absent); None when no event carries tags.

        Read from the source events on demand (only segmented tags are asked for); a columnar
        batch (`without_tags` on its events) holds none, as its decoder leaves events with tags out.
        """
        if not self.events or getattr(self.events, "without_tags", False):
            return None
        values = np.empty(self.n, dtype=object)
        found = False
        for i, event in enumerate(self.events):
            tags = event.get("tags") if isinstance(event, dict) else (getattr(event, "raw", None) or {}).get("tags")
            value = tags.get(name) if isinstance(tags, dict) else None
            values[i] = value
            found = found or value is not None
        return values if found else None

    def embedding_columns(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """name -> (row positions, vectors) of the events' `embeddings` (driftline.embeddings.window).

        A columnar batch holds none: its decoder leaves events with embeddings to the per-event path.
        """
        if not self.events or getattr(self.events, "without_tags", False):
            return {}
        return embedding_columns(self.events)

    def sample_record(self, i: int) -> dict[str, Any]:
        """The sample's copy of event `i`: ids, time, features, raw inputs, prediction, status."""
        event = self.events[i]
        if isinstance(event, dict):
            raw = event
            get = event.get
        else:
            raw = getattr(event, "raw", None) or {}
            get = lambda key, default=None: getattr(event, key, raw.get(key, default))  # noqa: E731
        return {"event_id": get("event_id"), "request_id": get("request_id"),
                "ts_ms": int(self.event_time_ms[i]) if self.event_time_ms.size else None,
                "features": get("features"), "inputs": raw.get("inputs"), "prediction": get("prediction"),
                "status": get("status", "ok")}


def _decisions(raws: list[Any]) -> np.ndarray | None:
    """The events' `predicted_class` as decisions (`decision_values`); None when no event carries one."""
    # dict.get mapped over plain dicts: this runs for every batch on the collector's per-event path
    values = (list(map(dict.get, raws, repeat(PREDICTED_CLASS))) if all(type(r) is dict for r in raws)
              else [r.get(PREDICTED_CLASS) if isinstance(r, dict) else None for r in raws])
    if values.count(None) == len(values):
        return None
    return decision_values(values)
