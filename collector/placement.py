"""Placing partitions: where each owned partition reads from, and whether its log is still the same one.

`PartitionPlacement` is one side of `driftline.collector.consumer.Collector`. A new partition waits,
paused, until its stored offset is loaded; a new connection to Kafka (a restarted broker, a
recreated topic) pauses everything until fresh metadata shows whether the topic ids changed:
the same log -> seek back to where processing stopped; a new log -> flush what was read from
the old one, then read the new one from its beginning.
"""
from __future__ import annotations

import logging
import time
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from driftline.collector import store
from driftline.collector.config import CollectorConfig
from driftline.collector.decoders import DecoderPool
from driftline.collector.folding import PartitionFolders
from driftline.collector.kafka_internals import cluster_of, topic_id_of, topic_partition
from driftline.collector.metrics import CollectorMetrics
from driftline.collector.partition_buffer import PartitionBuffer
from driftline.collector.store import StoredOffset

log = logging.getLogger("driftline.collector.consumer")


class PartitionPlacement:
    """Offsets, log verification, seeks and pauses; the state it uses is set up by `Collector.__init__`."""

    config: CollectorConfig
    engine: Any
    metrics: CollectorMetrics
    _consumer: Any
    _buffers: dict[Any, PartitionBuffer]
    _topic_ids: dict[str, str | None]
    _folders: PartitionFolders | DecoderPool
    _verify_future: Any
    _needs_verify: bool
    _flush_failing: bool
    _retry_at: float
    _retry_delay: float
    _last_message: float
    _placed_once: bool

    def _begin_verify(self) -> None:
        cluster = cluster_of(self._consumer)
        if cluster is None:  # no way to verify on this client: trust it
            self._needs_verify = False
            self._finish_verify()
            return
        if self._verify_future is None:
            self._verify_future = cluster.request_update()
        self._apply_pauses()

    def _finish_verify(self) -> None:
        """Fresh metadata arrived: compare topic ids, place every owned partition, resume."""
        self._settle_in_flight()
        self._verify_future = None
        self._needs_verify = False
        current = {topic: topic_id_of(self._consumer, topic)
                   for topic in (self.config.inference_topic, self.config.labels_topic)}
        replaced = [topic for topic, tid in current.items()
                    if tid is not None and self._topic_ids.get(topic) not in (None, tid)]
        if replaced:
            ready = [b for b in self._buffers.values() if b.ready and b.topic in replaced]
            # What was read from the old log can never be read again: store it before moving on.
            if ready and not self._flush(ready):
                self._needs_verify = True  # retried after the flush succeeds
                return
            for buf in ready:
                log.warning("%s[%d]: the topic was replaced (new topic id %s; broker restart?); "
                            "reading the new log from its beginning", buf.topic, buf.partition, current[buf.topic])
                buf.next_offset = 0
                buf.topic_id = current[buf.topic]
                if buf.topic == self.config.inference_topic and not self._folders.failed:
                    self._folders.forget_ids(buf.key)
                self._seek(topic_partition(buf), None)
            for topic in replaced:
                self.metrics.log_resets.labels(topic).inc()
        self._topic_ids.update({t: tid for t, tid in current.items() if tid is not None})
        for tp, buf in self._buffers.items():
            if buf.ready and buf.topic not in replaced:
                self._seek(tp, buf.next_offset)
        self._place_new_partitions(current)
        self._apply_pauses()

    def _place_new_partitions(self, current: dict[str, str | None]) -> None:
        new = [(tp, buf) for tp, buf in self._buffers.items() if not buf.ready]
        if not new:
            return
        try:
            stored: dict[tuple[str, int], StoredOffset] = {}
            for topic in {buf.topic for _, buf in new}:
                for partition, offset in store.load_offsets(self.engine, self.config.group_id, topic,
                                                            [b.partition for _, b in new if b.topic == topic]).items():
                    stored[(topic, partition)] = offset
        except SQLAlchemyError as exc:
            log.warning("cannot read the stored offsets (%s); retrying", exc)
            self._needs_verify = True
            self._retry_at = time.monotonic() + self._retry_delay
            return
        for tp, buf in new:
            offset = stored.get((buf.topic, buf.partition))
            tid = current.get(buf.topic)
            buf.expected = offset
            buf.topic_id = tid
            if offset is None:
                buf.next_offset = 0
                self._seek(tp, None)
            elif offset.topic_id is not None and tid is not None and offset.topic_id != tid:
                log.warning("%s[%d]: stored offset %d belongs to an earlier log of this topic; "
                            "reading the current log from its beginning", buf.topic, buf.partition, offset.next_offset)
                buf.next_offset = 0
                self._seek(tp, None)
                self.metrics.log_resets.labels(buf.topic).inc()
            else:
                buf.next_offset = offset.next_offset
                if tid is None:
                    buf.topic_id = offset.topic_id
                self._seek(tp, offset.next_offset)
            buf.ready = True
        self._last_message = time.monotonic()  # --idle-exit counts from the first placed partitions
        self._placed_once = True
        self._update_assigned()

    def _seek(self, tp: Any, offset: int | None) -> None:
        """Seek to `offset` (None: the log's beginning); a partition revoked meanwhile is skipped."""
        try:
            if offset is None:
                self._consumer.seek_to_beginning(tp)
            else:
                self._consumer.seek(tp, offset)
        except Exception as exc:  # IllegalStateError: no longer assigned
            log.debug("seek %s to %s: %s", tp, offset, exc)

    def _apply_pauses(self) -> None:
        consumer = self._consumer
        if consumer is None:
            return
        assigned = set(consumer.assignment())
        hold_all = self._verify_future is not None or self._needs_verify or (
            self._flush_failing and self._pending() >= self.config.flush_max_events) or (
            self._pending() >= 2 * self.config.flush_max_events)
        want = assigned if hold_all else {tp for tp in assigned
                                          if tp not in self._buffers or not self._buffers[tp].ready}
        paused = set(consumer.paused())
        if want - paused:
            consumer.pause(*(want - paused))
        if (paused & assigned) - want:
            consumer.resume(*((paused & assigned) - want))
