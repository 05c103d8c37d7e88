"""`PartitionPlacement`: which partitions this collector owns, where each reads from, and whether its log is the same.

A partition assigned to the collector gets a `PartitionBuffer` and waits, paused, until its stored
offset is loaded; a revoked one has its pending data flushed (best effort) and is forgotten.

A broker that restarts with empty memory storage (the embedded broker) or a topic that
is recreated starts a new log under a new *topic id*, and its offsets restart at 0. The
collector notices because its client opens a new connection: records of the poll
during which that happened are dropped, all partitions pause, and once a fresh metadata
response has arrived the topic ids are compared with those of the offsets in hand: the
same log -> seek back to where processing stopped; a new log -> flush what was read from
the old one, then read the new one from its beginning. Stored offsets carry their topic
id, so a collector that was down while the log was replaced starts the new log from
its beginning too. A client that cannot read topic ids (librdkafka) reports a position
outside the log instead (`reset_logs`): the same flush, then the log from its beginning.

Flushing itself is the `FlushCoordinator`'s; placement asks it to flush, and to settle a flush in flight.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Iterable

from sqlalchemy.exc import SQLAlchemyError

from driftline.collector import store
from driftline.collector.backoff import StoreBackoff
from driftline.collector.config import CollectorConfig
from driftline.collector.decoders import DecoderPool
from driftline.collector.flush_coordination import FlushCoordinator
from driftline.collector.folding import PartitionFolders
from driftline.collector.kafka_internals import partition_names, topic_partition
from driftline.collector.labels import label_row_partition
from driftline.collector.metrics import CollectorMetrics
from driftline.collector.partition_buffer import PartitionBuffer
from driftline.collector.store import StoredOffset

log = logging.getLogger("driftline.collector.consumer")


class PartitionPlacement:
    """The owned partitions' buffers, their stored offsets, log verification, seeks and pauses.

    Not thread-safe: the collector calls it holding its lock (kafka-python runs rebalance callbacks on its IO thread).
    """

    def __init__(self, config: CollectorConfig, engine: Any, metrics: CollectorMetrics,
                 flushing: FlushCoordinator, backoff: StoreBackoff, folders: PartitionFolders | DecoderPool):
        self.config = config
        self.engine = engine
        self.metrics = metrics
        self.flushing = flushing
        self.backoff = backoff
        self.folders = folders  # where decoding and folding run (the collector swaps it when decoders start)
        self.window_ms = int(config.window_seconds * 1000)
        self.lateness_ms = int(config.allowed_lateness_seconds * 1000)
        self.consumer: Any = None  # the RecordSource (driftline.collector.record_source), once connected
        self.buffers: dict[Any, PartitionBuffer] = {}
        self.needs_verify = False  # placements must be (re)verified before any record is trusted
        self.placed_at: float | None = None  # time.monotonic() when partitions were last placed; None: never
        self._topic_ids: dict[str, str | None] = {}
        self._verify_future: Any = None

    @property
    def verifying(self) -> bool:
        """Whether records must be dropped: a verification is wanted or under way."""
        return self._verify_future is not None or self.needs_verify

    def ready_buffers(self) -> list[PartitionBuffer]:
        return [b for b in self.buffers.values() if b.ready]

    # --- assignment and revocation --------------------------------------------------------------
    def assign(self, partitions: Iterable[Any]) -> None:
        for tp in partitions:
            if tp in self.buffers:
                continue
            inference = tp.topic == self.config.inference_topic
            row = tp.partition if inference else label_row_partition(tp.partition)
            self.buffers[tp] = PartitionBuffer(tp.topic, tp.partition, row, self.window_ms, self.lateness_ms,
                                               inference=inference)
        new = [tp for tp, buf in self.buffers.items() if not buf.ready]
        if new:
            # Nothing is read before the stored offset is known and the log verified.
            self.consumer.pause(new)
            self.needs_verify = True
        log.info("assigned %s", partition_names(partitions))

    def revoke(self, partitions: Iterable[Any]) -> None:
        self.flushing.settle()
        gone = [tp for tp in partitions if tp in self.buffers]
        ready = [self.buffers[tp] for tp in gone if self.buffers[tp].ready]
        if ready and any(b.messages or b.to_flush().moves for b in ready):
            self.flushing.flush(ready)  # one attempt, best effort: what is not flushed is re-read by the next owner
        for tp in gone:
            buf = self.buffers.pop(tp)
            buf.discard()
            if buf.topic == self.config.inference_topic and not self.folders.failed:
                self.folders.drop(buf.key)
            for gauge in (self.metrics.lag, self.metrics.watermark_lag):
                try:
                    gauge.remove(tp.topic, str(tp.partition))
                except KeyError:  # never measured
                    pass
        self.update_assigned()
        if gone:
            log.info("revoked %s", partition_names(gone))

    # --- verification ----------------------------------------------------------------------------
    def verify_log(self) -> None:
        """A connection to Kafka was (re)made: hold every partition until the log behind it is verified."""
        self.needs_verify = True
        self._begin_verify()

    def tick(self, now: float) -> None:
        """Between polls: start a wanted verification when the store allows, finish one whose metadata arrived."""
        if self.needs_verify and self._verify_future is None and self.backoff.ready(now):
            self._begin_verify()
        if self._verify_future is not None and self._verify_future.is_done:
            if self._verify_future.failed():
                self._verify_future = None
                self._begin_verify()
            else:
                self._finish_verify()

    def _begin_verify(self) -> None:
        if self._verify_future is None:
            future = self.consumer.request_metadata()
            if future is None:  # no topic ids on this client: a replaced log shows as a reset (reset_logs)
                self.needs_verify = False
                self._finish_verify()
                return
            self._verify_future = future
        self.apply_pauses()

    def _finish_verify(self) -> None:
        """Fresh metadata arrived: compare topic ids, place every owned partition, resume."""
        self.flushing.settle()
        self._verify_future = None
        self.needs_verify = False
        current = {topic: self.consumer.topic_id(topic)
                   for topic in (self.config.inference_topic, self.config.labels_topic)}
        replaced = [topic for topic, tid in current.items()
                    if tid is not None and self._topic_ids.get(topic) not in (None, tid)]
        if replaced:
            ready = [b for b in self.buffers.values() if b.ready and b.topic in replaced]
            # What was read from the old log can never be read again: store it before moving on.
            if ready and not self.flushing.flush(ready):
                self.needs_verify = True  # retried after the flush succeeds
                return
            for buf in ready:
                log.warning("%s[%d]: the topic was replaced (new topic id %s; broker restart?); "
                            "reading the new log from its beginning", buf.topic, buf.partition, current[buf.topic])
                self._restart_log(buf, current[buf.topic])
            for topic in replaced:
                self.metrics.log_resets.labels(topic).inc()
        self._topic_ids.update({t: tid for t, tid in current.items() if tid is not None})
        for tp, buf in self.buffers.items():
            if buf.ready and buf.topic not in replaced:
                self.seek(tp, buf.next_offset)
        self._place_new_partitions(current)
        self.apply_pauses()

    def reset_logs(self, partitions: set[Any]) -> None:
        """The client found these partitions' positions outside their logs (a broker restarted with empty
        storage, a recreated or truncated topic): store what was read, then read each log from its beginning."""
        self.flushing.settle()
        ready = [self.buffers[tp] for tp in partitions if tp in self.buffers and self.buffers[tp].ready]
        if ready and not self.flushing.flush(ready):
            for buf in ready:  # placed again from the stored offset, which the client resets again
                self.flushing.discard(buf)
                buf.ready = False
            self.needs_verify = True
            return
        for buf in ready:
            log.warning("%s[%d]: offset %d is outside the log (broker restart, or a recreated or truncated "
                        "topic?); reading the log from its beginning", buf.topic, buf.partition, buf.next_offset)
            self._restart_log(buf, buf.topic_id)
            self.metrics.log_resets.labels(buf.topic).inc()

    def _restart_log(self, buf: PartitionBuffer, topic_id: str | None) -> None:
        buf.next_offset = 0
        buf.topic_id = topic_id
        if buf.topic == self.config.inference_topic and not self.folders.failed:
            self.folders.forget_ids(buf.key)
        self.seek(topic_partition(buf), None)

    def _place_new_partitions(self, current: dict[str, str | None]) -> None:
        new = [(tp, buf) for tp, buf in self.buffers.items() if not buf.ready]
        if not new:
            return
        try:
            # every partition of the topic joins the low watermark before any is stored (driftline.watermarks)
            partitions = self.consumer.partitions_for_topic(self.config.inference_topic)
            store.register_partitions(self.engine, self.config.group_id, self.config.inference_topic, partitions)
            stored: dict[tuple[str, int], StoredOffset] = {}
            for topic in {buf.topic for _, buf in new}:
                for partition, offset in store.load_offsets(self.engine, self.config.group_id, topic,
                                                            [b.partition for _, b in new if b.topic == topic]).items():
                    stored[(topic, partition)] = offset
        except SQLAlchemyError as exc:
            log.warning("cannot read the stored offsets (%s); retrying", exc)
            self.needs_verify = True
            self.backoff.read_failed()
            return
        for tp, buf in new:
            offset = stored.get((buf.topic, buf.partition))
            tid = current.get(buf.topic)
            buf.expected = offset
            buf.topic_id = tid
            if offset is None:
                buf.next_offset = 0
                self.seek(tp, None)
            elif offset.topic_id is not None and tid is not None and offset.topic_id != tid:
                log.warning("%s[%d]: stored offset %d belongs to an earlier log of this topic; "
                            "reading the current log from its beginning", buf.topic, buf.partition, offset.next_offset)
                buf.next_offset = 0
                self.seek(tp, None)
                self.metrics.log_resets.labels(buf.topic).inc()
            else:
                buf.next_offset = offset.next_offset
                if tid is None:
                    buf.topic_id = offset.topic_id
                self.seek(tp, offset.next_offset)
            buf.ready = True
            buf.last_record_ms = int(time.time() * 1000)  # idleness counts from placement until a record comes
        self.placed_at = time.monotonic()  # --idle-exit counts from the first placed partitions
        self.update_assigned()

    # --- the consumer's positions -----------------------------------------------------------------
    def seek(self, tp: Any, offset: int | None) -> None:
        """Seek to `offset` (None: the log's beginning); a partition revoked meanwhile is skipped."""
        try:
            self.consumer.seek(tp, offset)
        except Exception as exc:  # no longer assigned
            log.debug("seek %s to %s: %s", tp, offset, exc)

    def apply_pauses(self) -> None:
        """Pause what must not be read now (unplaced partitions; everything while verifying or backlogged)."""
        consumer = self.consumer
        if consumer is None:
            return
        assigned = consumer.assignment()
        hold_all = self.verifying or self.flushing.backlogged(self.flushing.pending(self.buffers.values()))
        want = assigned if hold_all else {tp for tp in assigned
                                          if tp not in self.buffers or not self.buffers[tp].ready}
        paused = consumer.paused()
        if want - paused:
            consumer.pause(want - paused)
        if (paused & assigned) - want:
            consumer.resume((paused & assigned) - want)

    # --- gauges ----------------------------------------------------------------------------------
    def update_lag(self) -> None:
        for tp, buf in self.buffers.items():
            if buf.ready:
                try:
                    highwater = self.consumer.highwater(tp)
                except Exception:  # not assigned any more (a rebalance is under way)
                    continue
                if highwater is not None:
                    self.metrics.lag.labels(tp.topic, str(tp.partition)).set(max(highwater - buf.next_offset, 0))
                buf.at_end = highwater is not None and buf.next_offset >= highwater
                stored = buf.stored_event_time_ms
                if buf.inference and stored is not None:
                    self.metrics.watermark_lag.labels(tp.topic, str(tp.partition)).set(
                        max(time.time() - stored / 1000.0, 0.0))

    def update_assigned(self) -> None:
        for topic in (self.config.inference_topic, self.config.labels_topic):
            self.metrics.assigned.labels(topic).set(sum(1 for b in self.buffers.values() if b.topic == topic))
