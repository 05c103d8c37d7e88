"""Events through the collector's own code, without a broker: `FlushingCollector`.

Records go through `InferenceFolder` (decode, validate, window, fold) and one `flush` per call (offsets,
predictions, watermarks, window states), as `driftline collector` stores a poll's records; the clock is
the caller's, so simulated days pass in seconds. bench/fleet.py and the store tests share it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from driftline.collector.flush import FlushResult, FlushSetup, PartitionFlush, flush
from driftline.collector.folding import FolderSetup, InferenceFolder
from driftline.collector.store import StoredOffset
from driftline.config import TOPIC_INFERENCE
from driftline.events import INFERENCE_SCHEMA
from driftline.store import db as store_db

GROUP = "flushing"


@dataclass
class FlushingCollector:
    """One collector owning every partition of the inference topic: a folder per partition, the offsets."""

    db_url: str
    baselines: dict[tuple[str, str], Any]
    window_ms: int
    lateness_ms: int
    now_ms: int = 0
    folders: dict[int, InferenceFolder] = field(default_factory=dict)
    offsets: dict[int, int] = field(default_factory=dict)
    cpu_s: float = 0.0

    def _folder(self, partition: int) -> InferenceFolder:
        if partition not in self.folders:
            self.folders[partition] = InferenceFolder(
                TOPIC_INFERENCE, partition,
                FolderSetup(self.window_ms, self.lateness_ms, 1_000_000, clock=lambda: self.now_ms / 1000.0),
                baseline_for=lambda m, v: self.baselines.get((m, v)), stored_watermark=lambda m, v: None)
        return self.folders[partition]

    def consume(self, per_partition: dict[int, list[bytes]]) -> FlushResult:
        """Fold each partition's records (encoded events) and store them all in one flush."""
        started = time.process_time()
        parts = []
        for partition, values in per_partition.items():
            folder = self._folder(partition)
            first = self.offsets.get(partition, 0)
            folder.process(list(range(first, first + len(values))), values)
            delta = folder.take()
            expected = StoredOffset(first, None) if partition in self.offsets else None
            self.offsets[partition] = first + len(values)
            newest = max((w for w in delta.watermarks.values() if w is not None), default=None)
            parts.append(PartitionFlush(TOPIC_INFERENCE, partition, partition, expected, first + len(values), None,
                                        delta.windows, delta.dead_letters, delta.predictions, {}, 0, set(),
                                        newest, None, True))
        result = flush(FlushSetup(store_db.get_engine(self.db_url), GROUP, self.window_ms,
                                  lambda m, v: self.baselines.get((m, v))), parts, now_ms=self.now_ms)
        self.cpu_s += time.process_time() - started
        return result


def encode(model: str, event_id: str, ts_ms: int, features: dict[str, Any], prediction: float,
           latency_ms: float = 10.0) -> bytes:
    """One contract event as the worker puts it on Kafka."""
    return orjson.dumps({"schema": INFERENCE_SCHEMA, "event_id": event_id, "request_id": event_id, "ts": ts_ms,
                         "model": model, "version": "1", "features": features, "prediction": prediction,
                         "latency_ms": {"total": latency_ms}, "status": "ok"}, option=orjson.OPT_SERIALIZE_NUMPY)
