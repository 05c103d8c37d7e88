"""Flush coordination: what the collector consumed goes to the store with its offsets, in one transaction.

`FlushCoordination` is one side of `driftline.collector.consumer.Collector`: it gathers the folders'
deltas into the partition buffers, writes them (`driftline.collector.flush`), backs off while the store
or the DLQ topic is down, drops what another collector fenced, and, with decoder processes,
splits a flush in two so the poll loop keeps running while the decoders answer.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

from kafka.errors import KafkaError
from sqlalchemy.exc import SQLAlchemyError

from driftline.collector import store
from driftline.collector.config import CollectorConfig
from driftline.collector.decoders import DecoderPool
from driftline.collector.flush import Fenced, flush
from driftline.collector.folding import FoldDelta, PartitionFolders
from driftline.collector.metrics import CollectorMetrics
from driftline.collector.partition_buffer import PartitionBuffer
from driftline.baseline import Baseline

log = logging.getLogger("driftline.collector.consumer")


class FlushCoordination:
    """Gathering, writing and retrying flushes; the state it uses is set up by `Collector.__init__`."""

    config: CollectorConfig
    engine: Any
    metrics: CollectorMetrics
    publisher: Any
    window_ms: int
    flushed: int
    _folders: PartitionFolders | DecoderPool
    _in_flight: tuple[list[tuple[PartitionBuffer, PartitionBuffer]], list[int]] | None
    _flush_failing: bool
    _retry_at: float
    _retry_delay: float
    _next_sweep: float
    _next_prune: float
    _needs_verify: bool
    _baseline: Callable[[str, str], Baseline | None]

    def _gather(self, buffers: list[PartitionBuffer]) -> None:
        """Bring what the folders (here or in decoders) accumulated into the buffers to flush."""
        inference = [b for b in buffers if b.topic == self.config.inference_topic]
        self._add_deltas(inference, self._folders.take([b.key for b in inference], self._baseline))

    def _add_deltas(self, inference: list[PartitionBuffer], deltas: dict[tuple[str, int], FoldDelta]) -> None:
        valid = late = duplicates = 0
        for buf in inference:
            delta = deltas.get(buf.key)
            if delta is None:
                continue
            buf.add(delta)
            valid, late, duplicates = valid + delta.valid, late + delta.late, duplicates + delta.duplicates
        if valid:
            self.metrics.valid.inc(valid)
        if late:
            self.metrics.late.inc(late)
        if duplicates:
            self.metrics.duplicates.inc(duplicates)
            log.debug("%d duplicate events dropped", duplicates)

    # A flush with decoders is split in two, so that the collector keeps polling while its
    # decoders fold what is queued to them: `_begin_take` splits off what each buffer holds
    # (its offset stays where it is at this moment) and asks the decoders for their deltas;
    # `_finish_take`, once they have answered, writes the split-off part (a collector waiting
    # for the answer instead sat idle for a good part of its time).
    # Anything else that flushes or moves offsets (a revocation, log verification, shutdown)
    # settles a flush in flight first, so it sees the buffers as a synchronous flush leaves them.
    def _begin_take(self, buffers: list[PartitionBuffer]) -> None:
        pairs = [(b, b.split()) for b in buffers]
        keys = [frozen.key for _, frozen in pairs if frozen.topic == self.config.inference_topic]
        self._in_flight = (pairs, self._folders.take_begin(keys) if keys else [])

    def _finish_take(self) -> bool:
        pairs, asked = self._in_flight
        self._in_flight = None  # a decoder failure below stops the collector: nothing is flushed after it
        frozen = [f for _, f in pairs]
        self._add_deltas([f for f in frozen if f.topic == self.config.inference_topic],
                         self._folders.take_finish(asked, self._baseline) if asked else {})

        def rejoin() -> list[PartitionBuffer]:
            for live, part in pairs:
                live.rejoin(part)
            return [live for live, _ in pairs]

        if not self._write(frozen, on_failure=rejoin):
            return False
        for live, part in pairs:
            live.committed_as(part)
        return True

    def _settle_in_flight(self) -> None:
        if self._in_flight is not None and not self._folders.failed:
            self._finish_take()

    def _flush(self, buffers: list[PartitionBuffer]) -> bool:
        """Flush `buffers` in one transaction; True when it committed (or there was nothing to do)."""
        self._settle_in_flight()
        self._gather(buffers)
        return self._write(buffers)

    def _write(self, buffers: list[PartitionBuffer],
               on_failure: Callable[[], list[PartitionBuffer]] | None = None) -> bool:
        """Write gathered `buffers`; on failure `on_failure` (if given) names the buffers that keep their data."""
        parts = [b.to_flush() for b in buffers]
        if not any(p.moves for p in parts):
            for b in buffers:
                b.committed()
            return True
        started = time.perf_counter()
        sweep = self.engine.dialect.name == "postgresql" and time.monotonic() >= self._next_sweep
        try:
            self.publisher.publish([letter for p in parts for letter in p.dead_letters])
            result = flush(self.engine, self.config.group_id, parts, window_ms=self.window_ms,
                           baseline_for=self._baseline, now_ms=int(time.time() * 1000), sweep=sweep,
                           raw_bound=self.config.dead_letter_raw_bytes, segments=self.config.segments)
        except Fenced as fenced:
            if on_failure is not None:
                buffers = on_failure()
            self.metrics.flushes.labels("fenced").inc()
            lost = set(fenced.partitions)
            log.warning("another collector moved the offsets of %s; dropping what this one read", sorted(lost))
            for b in buffers:
                if (b.topic, b.partition) in lost:
                    self._discard(b)
                    b.ready = False  # re-placed from the stored offset
            self._needs_verify = True
            return False
        except Exception as exc:  # database or DLQ topic unavailable: retry with backoff, commit nothing
            if on_failure is not None:
                on_failure()
            self.metrics.flushes.labels("error").inc()
            self._flush_failing = True
            self._retry_at = time.monotonic() + self._retry_delay
            log.warning("flush failed (%s: %s); retrying in %.1f s", type(exc).__name__,
                        str(exc).splitlines()[0] if str(exc) else "", self._retry_delay)
            if not isinstance(exc, (SQLAlchemyError, KafkaError, OSError)):
                log.exception("unexpected flush error")  # a bug, not an outage: show where
            self._retry_delay = min(self._retry_delay * 2, self.config.retry_max_s)
            return False
        flushed = sum(b.messages for b in buffers)
        for b in buffers:
            b.committed()
        self.flushed += flushed
        if sweep:
            self._next_sweep = time.monotonic() + self.config.label_sweep_s
        self._flush_failing = False
        self._retry_delay = self.config.retry_min_s
        self._retry_at = 0.0
        self.metrics.flushes.labels("ok").inc()
        self.metrics.flush_seconds.observe(time.perf_counter() - started)
        letters = [d for p in parts for d in p.dead_letters] + result.refused
        self.metrics.dead_letters.labels(self.config.inference_topic).inc(
            sum(1 for d in letters if d.topic == self.config.inference_topic))
        self.metrics.dead_letters.labels(self.config.labels_topic).inc(
            sum(1 for d in letters if d.topic == self.config.labels_topic))
        if result.labels_joined:
            self.metrics.labels_joined.inc(result.labels_joined)
        if result.labels_rejected:
            self.metrics.labels_rejected.inc(result.labels_rejected)
        log.debug("flushed %d messages: %s", flushed, result)
        return True

    def _discard(self, buf: PartitionBuffer) -> None:
        buf.discard()
        if buf.topic == self.config.inference_topic and not self._folders.failed:
            self._folders.reset(buf.key, buf.committed_watermarks)

    def _prune(self) -> None:
        self._next_prune = time.monotonic() + self.config.prune_interval_s
        cutoff = int(time.time() * 1000 - self.config.prediction_retention_days * 86_400_000)
        try:
            predictions, labels = store.prune(self.engine, cutoff)
        except SQLAlchemyError as exc:
            log.warning("pruning old predictions failed (%s); retrying later", exc)
            return
        if predictions or labels:
            log.info("pruned %d predictions and %d labels older than %s days", predictions, labels,
                     self.config.prediction_retention_days)
