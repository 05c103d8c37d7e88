"""`FlushCoordinator`: when what the collector consumed goes to the store, and how it is committed.

When: a flush is due every `flush_interval_s`, or at once when `flush_max_events` messages wait;
after a failed write nothing is tried before the store's backoff (`driftline.collector.backoff`)
allows it; while flushes fail with a flush's worth pending, or two flushes' worth pend in any case,
it asks for every partition to be paused (`backlogged`). How: it gathers the folders' deltas into
the partition buffers, writes them with their offsets in one transaction (`driftline.collector.flush`),
moves each buffer's fence on commit, drops what another collector fenced (and calls `on_fenced`),
and, with decoder processes, splits a flush in two so the poll loop keeps running while the
decoders answer.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Iterable

from kafka.errors import KafkaError
from sqlalchemy.exc import SQLAlchemyError

from driftline.collector import store
from driftline.collector.backoff import StoreBackoff
from driftline.collector.config import CollectorConfig
from driftline.collector.dead_letters import DeadLetterPublisher
from driftline.collector.decoders import DecoderPool
from driftline.collector.flush import Fenced, FlushSetup, flush
from driftline.collector.folding import FoldDelta, PartitionFolders
from driftline.collector.metrics import CollectorMetrics
from driftline.collector.partition_buffer import PartitionBuffer
from driftline.baseline import Baseline

log = logging.getLogger("driftline.collector.consumer")


class FlushCoordinator:
    """Decides when the partition buffers are flushed, gathers, writes and commits them, and retries."""

    def __init__(self, config: CollectorConfig, engine: Any, metrics: CollectorMetrics,
                 publisher: DeadLetterPublisher, folders: PartitionFolders | DecoderPool,
                 baseline_for: Callable[[str, str], Baseline | None], backoff: StoreBackoff,
                 on_fenced: Callable[[], None]):
        self.config = config
        self.engine = engine
        self.metrics = metrics
        self.publisher = publisher
        self.folders = folders  # where decoding and folding run (the collector swaps it when decoders start)
        self.baseline_for = baseline_for
        self.backoff = backoff
        self.on_fenced = on_fenced  # another collector took partitions: their placement must be verified
        self.window_ms = int(config.window_seconds * 1000)
        self.flushed = 0  # messages flushed over the collector's life
        # A flush whose `take` was sent to the decoders and not yet answered: (live, frozen) buffer
        # pairs and the decoders asked. The collector keeps polling meanwhile (see _begin_take).
        self._in_flight: tuple[list[tuple[PartitionBuffer, PartitionBuffer]], list[int]] | None = None
        now = time.monotonic()
        self._next_flush = now + config.flush_interval_s
        self._next_sweep = now + config.label_sweep_s
        self._next_heartbeat = now

    # --- decisions ---------------------------------------------------------------------------------
    def pending(self, buffers: Iterable[PartitionBuffer]) -> int:
        """Messages consumed and not yet committed: those of `buffers` and of a flush in flight."""
        in_flight = sum(frozen.messages for _, frozen in self._in_flight[0]) if self._in_flight else 0
        return in_flight + sum(b.messages for b in buffers)

    def backlogged(self, pending: int) -> bool:
        """Whether reading must pause: flushes fail with a flush's worth pending, or two flushes' worth pend."""
        limit = self.config.flush_max_events
        return (self.backoff.flush_failing and pending >= limit) or pending >= 2 * limit

    def tick(self, buffers: list[PartitionBuffer], now: float) -> None:
        """Between polls: finish a flush in flight once answered, or start one when due and allowed."""
        pending = self.pending(buffers)
        if self._in_flight is not None:
            if self.folders.take_ready(self._in_flight[1]):
                self._finish_take()
        elif pending or any(b.ready and b.to_flush().moves for b in buffers):
            due = now >= self._next_flush or pending >= self.config.flush_max_events
            if due and self.backoff.ready(now):
                ready = [b for b in buffers if b.ready]
                if isinstance(self.folders, DecoderPool) and not self.backoff.flush_failing:
                    self._begin_take(ready)
                else:
                    self.flush(ready)
                self._next_flush = time.monotonic() + self.config.flush_interval_s
        else:
            self._next_flush = now + self.config.flush_interval_s
        if now >= self._next_heartbeat and self._in_flight is None and self.backoff.ready(now):
            self._next_heartbeat = now + self.config.watermark_heartbeat_s
            self._confirm_watermarks(buffers)

    def _confirm_watermarks(self, buffers: list[PartitionBuffer]) -> None:
        """Tell the scheduler this collector still reads its inference partitions, and which are idle: a
        partition whose reader goes quiet holds the windows back instead of counting as idle."""
        readers = [(b.partition, b.expected, b.idle_since_ms) for b in buffers
                   if b.ready and b.inference and b.expected is not None]
        try:
            store.confirm_watermarks(self.engine, self.config.group_id, self.config.inference_topic, readers)
        except SQLAlchemyError as exc:  # the flushes' backoff handles an outage; a missed word only delays closing
            log.debug("confirming the watermarks failed: %s", exc)

    # --- flushing ----------------------------------------------------------------------------------
    def flush(self, buffers: list[PartitionBuffer]) -> bool:
        """Flush `buffers` in one transaction; True when it committed (or there was nothing to do)."""
        self.settle()
        self._gather(buffers)
        return self._write(buffers)

    def settle(self) -> None:
        """Finish a flush in flight, so the buffers stand as a synchronous flush leaves them."""
        if self._in_flight is not None and not self.folders.failed:
            self._finish_take()

    def _gather(self, buffers: list[PartitionBuffer]) -> None:
        """Bring what the folders (here or in decoders) accumulated into the buffers to flush."""
        inference = [b for b in buffers if b.topic == self.config.inference_topic]
        self._add_deltas(inference, self.folders.take([b.key for b in inference], self.baseline_for))

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
        self._in_flight = (pairs, self.folders.take_begin(keys) if keys else [])

    def _finish_take(self) -> bool:
        pairs, asked = self._in_flight
        self._in_flight = None  # a decoder failure below stops the collector: nothing is flushed after it
        frozen = [f for _, f in pairs]
        self._add_deltas([f for f in frozen if f.topic == self.config.inference_topic],
                         self.folders.take_finish(asked, self.baseline_for) if asked else {})

        def rejoin() -> list[PartitionBuffer]:
            for live, part in pairs:
                live.rejoin(part)
            return [live for live, _ in pairs]

        if not self._write(frozen, on_failure=rejoin):
            return False
        for live, part in pairs:
            live.committed_as(part)
        return True

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
            setup = FlushSetup(self.engine, self.config.group_id, self.window_ms, self.baseline_for,
                               self.config.dead_letter_raw_bytes, self.config.segments)
            result = flush(setup, parts, now_ms=int(time.time() * 1000), sweep=sweep)
        except Fenced as fenced:
            if on_failure is not None:
                buffers = on_failure()
            self.metrics.flushes.labels("fenced").inc()
            lost = set(fenced.partitions)
            log.warning("another collector moved the offsets of %s; dropping what this one read", sorted(lost))
            for b in buffers:
                if (b.topic, b.partition) in lost:
                    self.discard(b)
                    b.ready = False  # re-placed from the stored offset
            self.on_fenced()
            return False
        except Exception as exc:  # database or DLQ topic unavailable: retry with backoff, commit nothing
            if on_failure is not None:
                on_failure()
            self.metrics.flushes.labels("error").inc()
            waited = self.backoff.flush_failed()
            log.warning("flush failed (%s: %s); retrying in %.1f s", type(exc).__name__,
                        str(exc).splitlines()[0] if str(exc) else "", waited)
            if not isinstance(exc, (SQLAlchemyError, KafkaError, OSError)):
                log.exception("unexpected flush error")  # a bug, not an outage: show where
            return False
        flushed = sum(b.messages for b in buffers)
        for b in buffers:
            b.committed()
        self.flushed += flushed
        if sweep:
            self._next_sweep = time.monotonic() + self.config.label_sweep_s
        self.backoff.flush_succeeded()
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

    def discard(self, buf: PartitionBuffer) -> None:
        buf.discard()
        if buf.topic == self.config.inference_topic and not self.folders.failed:
            self.folders.reset(buf.key, buf.committed_watermarks)
