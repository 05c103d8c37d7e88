"""The collector: a Kafka consumer group member that folds events into window states.

Loop: ``poll`` a batch (up to `poll_max_records`) -> per partition, decode and validate
each message (`driftline.events`), dead-letter the invalid ones, group the valid ones by
model version and fold them vectorised into partial window states (`driftline.collector.windows`)
-> every `flush_interval_s` (or `flush_max_events` messages) write everything and the
offsets in one transaction (`driftline.collector.flush`).

Offsets live in the store, not in Kafka (``enable_auto_commit=False``, nothing is
committed to the broker): on assignment a partition is sought to its stored
``next_offset``; on revocation its pending state is flushed first. Records below the
offset a partition has reached are skipped, so a re-delivered record is never counted
twice.

A broker that restarts with empty memory storage or a recreated topic starts a new log
whose offsets restart at 0: `driftline.collector.placement` tells it apart from the old one.

Decoding and folding (`driftline.collector.folding`) run in this process, or with `decoders`
> 0 in decoder processes (`driftline.collector.decoders`) that hand their partial states back
before each flush; either way the flush, the offsets and everything above stay in this process.

`Collector` is the poll loop and composes two objects with one job each: a `FlushCoordinator`
(`driftline.collector.flush_coordination`: when and how buffers are flushed and committed) and a
`PartitionPlacement` (`driftline.collector.placement`: owned partitions, stored offsets, log
verification, seeks and pauses), which share the store's backoff (`driftline.collector.backoff`).

Kafka is read through a `RecordSource` (`driftline.collector.record_source`): librdkafka
(`--kafka-client confluent`, the default) or kafka-python. Threads: kafka-python runs heartbeats
and the rebalance callbacks on its IO thread, librdkafka runs them inside ``poll``; the callbacks
and the main loop share one (re-entrant) lock, and the main loop never holds it while it is
inside ``poll``.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable, Iterable

from kafka import TopicPartition
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from driftline.collector import store
from driftline.collector.backoff import StoreBackoff
from driftline.collector.baselines import BaselineLookup, stored_watermark_or_none
from driftline.collector.config import CollectorConfig
from driftline.collector.dead_letters import DeadLetterPublisher
from driftline.collector.decoders import DecoderConfig, DecoderFailed, DecoderPool, decoder_count
from driftline.collector.flush_coordination import FlushCoordinator
from driftline.collector.folding import FolderSetup, InferenceFolder, PartitionFolders
from driftline.collector.kafka_internals import partition_names, quiet_closed_socket_reads
from driftline.collector.metrics import CollectorMetrics
from driftline.collector.partition_buffer import PartitionBuffer
from driftline.collector.placement import PartitionPlacement
from driftline.collector.record_batches import MalformedBatch, malformed_range
from driftline.collector.record_source import RecordSource, open_record_source
from driftline import defaults
from driftline.baseline import Baseline
from driftline.garbage_collection import freeze_long_lived
from driftline.store.db import get_engine

log = logging.getLogger(__name__)

_POLL_TIMEOUT_S = 0.2
_RECONNECT_DELAY_S = 1.0


class Collector:
    """Consume, window, flush; `run()` until `stop()` (or the max-messages / idle-exit limits).

    The poll loop, its watchdog and the processing of records live here; when and how to flush
    is `self.flushing`'s (a `FlushCoordinator`), which partitions are owned and where they read
    from is `self.placement`'s (a `PartitionPlacement`).
    """

    def __init__(self, config: CollectorConfig, engine: Engine | None = None):
        self.config = config
        quiet_closed_socket_reads()  # stopping closes the consumer under its network thread: a harmless race
        self.engine = engine if engine is not None else get_engine(config.db_url)
        self.metrics = CollectorMetrics()
        self.metrics_port: int | None = None
        self.window_ms = int(config.window_seconds * 1000)
        self.lateness_ms = int(config.allowed_lateness_seconds * 1000)
        self.publisher = DeadLetterPublisher(config.bootstrap_servers, config.dead_letter_topic,
                                             security=config.security)
        self.consumed = 0  # messages processed (valid or not), over the collector's life
        self._stop = threading.Event()
        self._lock = threading.RLock()
        self._consumer: RecordSource | None = None
        self._baselines = BaselineLookup(self.engine, config.baseline_recheck_s)
        # Where decoding and folding run: in this process, or in decoder processes (--decoders)
        self.folders: PartitionFolders | DecoderPool = PartitionFolders(self._new_folder)
        self.backoff = StoreBackoff(config.retry_min_s, config.retry_max_s)
        self.flushing = FlushCoordinator(config, self.engine, self.metrics, self.publisher, self.folders,
                                         self._baseline, self.backoff, on_fenced=self._on_fenced)
        self.placement = PartitionPlacement(config, self.engine, self.metrics, self.flushing, self.backoff,
                                            self.folders)
        self._next_prune = 0.0
        self._last_message = time.monotonic()
        self._poll_started: float | None = None  # a poll in progress began then (the watchdog reads it)
        self._last_poll = time.monotonic()
        self.metrics.since_last_poll.set_function(lambda: time.monotonic() - self._last_poll)
        # How the process ends when a poll is stuck: no thread can be pulled out of one
        self.exit_process: Callable[[int], Any] = os._exit

    @property
    def flushed(self) -> int:
        """Messages consumed and flushed, over the collector's life."""
        return self.flushing.flushed

    # --- public ------------------------------------------------------------------------------
    def stop(self) -> None:
        """Ask the loop to flush and exit (safe from a signal handler or another thread)."""
        self._stop.set()

    def run(self) -> int:
        """Consume until stopped; returns the number of messages consumed and flushed."""
        if self.config.metrics_port:
            self.metrics_port = self.metrics.serve(self.config.metrics_port)
            log.info("collector metrics at http://127.0.0.1:%d/metrics", self.metrics_port)
        self._next_prune = time.monotonic()
        self._start_decoders()
        threading.Thread(target=self._watch_polls, name="poll-watchdog", daemon=True).start()
        freeze_long_lived()  # imports, baselines, the store's engine: no full collection needs to walk them
        try:
            while not self._stop.is_set() and not self._done():
                if self._consumer is None and not self._connect():
                    continue
                self._poll_started = time.monotonic()
                try:
                    records = self._consumer.poll(_POLL_TIMEOUT_S, self.config.poll_max_records)
                    self._last_poll = time.monotonic()
                except MalformedBatch as bad:
                    with self._lock:
                        self._skip_malformed(bad)
                    continue
                except Exception as exc:  # the clients surface broker trouble here; they reconnect themselves
                    log.warning("poll failed (%s); retrying", exc)
                    self._stop.wait(0.5)
                    continue
                finally:
                    self._poll_started = None
                with self._lock:
                    self._handle(records)
                    self._maintain()
        finally:
            self._shutdown()
        return self.flushed

    def _watch_polls(self) -> None:
        """Detect a poll that does not return (kafka-python can spin inside one); see `_poll_stuck`."""
        bound = self.config.poll_stuck_s
        while not self._stop.wait(min(1.0, bound / 4)):
            started = self._poll_started
            if started is not None and time.monotonic() - started > bound:
                self._poll_stuck(time.monotonic() - started)
                return

    def _poll_stuck(self, seconds: float) -> None:
        """Dead-letter the fetch the poll is stuck in, store everything with the offsets past it, exit.

        The stuck thread cannot be stopped, so the process ends (non-zero); the stored offsets
        make the next collector read on after the range.
        """
        consumer = self._consumer
        fetch = consumer.stuck_fetch() if consumer is not None else None
        reason = f"poll did not return within {self.config.poll_stuck_s:g} s (stuck {seconds:.0f} s)"
        with self._lock:
            buf = self.placement.buffers.get(fetch[0]) if fetch is not None else None
            if fetch is not None and buf is not None and buf.ready:
                _tp, fetch_offset, raw = fetch
                at = max(fetch_offset, buf.next_offset)  # what this poll has not delivered
                first, after, batch = malformed_range(raw, at)
                after = max(after, first + 1)  # something is skipped: the same fetch would get stuck again
                reason += f"; offsets {first}-{after - 1} skipped"
                buf.skip(first, after, reason, batch)
                log.critical("%s[%d]: %s", buf.topic, buf.partition, reason)
            else:
                log.critical("%s; no fetch in hand to skip", reason)
            stored = self.flushing.flush(self.placement.ready_buffers())
        log.critical("exiting (status %d)%s", defaults.COLLECTOR_POLL_STUCK_EXIT_CODE,
                     "; a restarted collector reads on after the range" if stored else
                     "; the range could not be stored, a restarted collector meets it again")
        self.exit_process(defaults.COLLECTOR_POLL_STUCK_EXIT_CODE)

    def _start_decoders(self) -> None:
        cfg = self.config
        count = decoder_count(cfg.decoders)
        if count and isinstance(self.folders, PartitionFolders):
            self._use_folders(DecoderPool(count, DecoderConfig(
                cfg.db_url, self.window_ms, self.lateness_ms, cfg.dedup_event_ids, cfg.baseline_recheck_s,
                log_level=logging.getLogger().getEffectiveLevel(), segment_columns=cfg.segments.columns,
                segment_max_values=cfg.segments.max_values)))
            log.info("decoding in %d decoder process%s", count, "" if count == 1 else "es")

    def _use_folders(self, folders: PartitionFolders | DecoderPool) -> None:
        self.folders = self.flushing.folders = self.placement.folders = folders

    # --- connecting --------------------------------------------------------------------------------
    def _connect(self) -> bool:
        cfg = self.config
        try:
            consumer = open_record_source(cfg, self._on_assigned, self._on_revoked)
        except Exception as exc:  # broker down at start: keep trying until stopped
            log.warning("cannot reach Kafka at %s (%s); retrying", cfg.bootstrap_servers, exc)
            self._stop.wait(_RECONNECT_DELAY_S)
            return False
        self._consumer = self.placement.consumer = consumer
        log.info("collector joined group %s at %s (%s)", cfg.group_id, cfg.bootstrap_servers, cfg.kafka_client)
        return True

    # --- rebalance callbacks (kafka-python's IO thread, or inside librdkafka's poll) --------------
    def _on_assigned(self, partitions: Iterable[Any]) -> None:
        try:
            with self._lock:
                self.placement.assign(partitions)
        except Exception:  # an exception would abort the client's rebalance; verification re-places them
            log.exception("handling the assignment of %s failed", partition_names(partitions))
            self.placement.needs_verify = True

    def _on_revoked(self, partitions: Iterable[Any]) -> None:
        try:
            with self._lock:
                self.placement.revoke(partitions)
        except Exception:
            log.exception("handling the revocation of %s failed", partition_names(partitions))

    def _on_fenced(self) -> None:
        self.placement.needs_verify = True  # the fenced partitions are placed again from the stored offsets

    # --- processing ---------------------------------------------------------------------------------
    def _handle(self, records: dict[Any, list[Any]]) -> None:
        resets = self._consumer.log_resets()
        if resets:
            self.placement.reset_logs(resets)
        if self._consumer.connection_changed():
            # A connection was (re)made: the broker may be a new one with a new log behind the
            # same partition numbers. Nothing fetched in this poll is trusted until verified.
            if records:
                log.info("connection to Kafka changed; re-reading %d records after verifying the log",
                         sum(len(r) for r in records.values()))
            self.placement.verify_log()
            return
        if self.placement.verifying:
            return  # dropped: every partition is sought back to where it stood once verified
        for tp, batch in records.items():
            buf = self.placement.buffers.get(tp)
            if buf is None or not buf.ready or not batch:
                continue
            if batch[-1].offset < buf.next_offset:
                continue
            if batch[0].offset < buf.next_offset:  # re-delivered: already counted
                batch = [r for r in batch if r.offset >= buf.next_offset]
            if tp.topic == self.config.inference_topic:
                self._process_inference(buf, batch)
            else:
                self.metrics.labels.inc(buf.read_labels(batch))
            buf.next_offset = batch[-1].offset + 1
            buf.last_record_ms = int(time.time() * 1000)
            buf.messages += len(batch)
            self.consumed += len(batch)
            self.metrics.consumed.labels(tp.topic).inc(len(batch))
            self._last_message = time.monotonic()

    def _skip_malformed(self, bad: MalformedBatch) -> None:
        """Dead-letter the offsets of a batch that cannot be read, and read on after them."""
        tp = TopicPartition(bad.topic, bad.partition)
        buf = self.placement.buffers.get(tp)
        if buf is None or not buf.ready:
            return  # revoked meanwhile, or not yet placed: its next reader meets the batch again
        first = max(bad.first_offset, buf.next_offset)
        after = bad.next_offset
        try:
            highwater = self._consumer.highwater(tp)
        except Exception:  # not assigned any more
            highwater = None
        if highwater is not None and highwater > first:
            after = min(after, highwater)  # a lying header never skips past the log's end
        if after > first:
            reason = f"malformed record batch, offsets {first}-{after - 1} skipped: {bad.reason}"
            log.error("%s[%d]: %s", bad.topic, bad.partition, reason)
            buf.skip(first, after, reason, bad.raw)
            self.consumed += 1
            self.metrics.consumed.labels(bad.topic).inc()
        self.placement.seek(tp, buf.next_offset)

    def _process_inference(self, buf: PartitionBuffer, records: list[Any]) -> None:
        self.folders.process(buf.key, [r.offset for r in records], [r.value for r in records])

    def _new_folder(self, key: tuple[str, int]) -> InferenceFolder:
        topic, partition = key
        return InferenceFolder(topic, partition, FolderSetup(self.window_ms, self.lateness_ms,
                                                             self.config.dedup_event_ids, segments=self.config.segments),
                               self._baseline,
                               lambda model, version: stored_watermark_or_none(self.engine, model, version, partition),
                               lambda rows: store.store_predictions_ahead(self.engine, rows))

    def _baseline(self, model: str, version: str) -> Baseline | None:
        return self._baselines.get(model, version)

    # --- housekeeping --------------------------------------------------------------------------------
    def _maintain(self) -> None:
        self.folders.check()
        now = time.monotonic()
        self.placement.tick(now)
        self.flushing.tick(list(self.placement.buffers.values()), now)
        self.placement.apply_pauses()
        if now >= self._next_prune and not self.backoff.flush_failing:
            self._prune()
        self.placement.update_lag()
        self.metrics.pending.set(self._pending())

    def _pending(self) -> int:
        return self.flushing.pending(self.placement.buffers.values())

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

    def _done(self) -> bool:
        cfg = self.config
        if self._pending():
            return False
        if cfg.max_messages is not None and self.flushed >= cfg.max_messages:
            log.info("consumed and stored %d messages (--max-events); stopping", self.flushed)
            return True
        placed_at = self.placement.placed_at
        # --idle-exit counts from the last message or placement; it waits for a first placement: joining a
        # group whose previous member was killed takes a session timeout or more, and quitting before it
        # would leave the log unread.
        quiet = time.monotonic() - max(self._last_message, placed_at or 0.0)
        if cfg.idle_exit_s is not None and quiet >= cfg.idle_exit_s:
            if placed_at is not None:
                log.info("no message for %.1f s (--idle-exit); stopping", cfg.idle_exit_s)
                return True
            if quiet >= max(60.0, cfg.idle_exit_s):
                log.warning("no partition was assigned within %.0f s (--idle-exit); stopping", quiet)
                return True
        return False

    def _shutdown(self) -> None:
        deadline = time.monotonic() + self.config.shutdown_flush_s
        with self._lock:
            try:
                self.flushing.settle()  # a failed write keeps its data in the buffers, for the loop below
            except DecoderFailed:
                pass
            # after a decoder failed nothing gathered can be trusted: no final flush
            while self._consumer is not None and not self.folders.failed and time.monotonic() < deadline:
                ready = self.placement.ready_buffers()
                if not ready or self.flushing.flush(ready):
                    break
                time.sleep(min(self.backoff.delay, max(deadline - time.monotonic(), 0)))
            pending = self._pending()
            if pending:
                log.warning("stopping with %d messages not stored; the next collector reads them again", pending)
            for buf in self.placement.buffers.values():
                buf.discard()
                buf.ready = False  # the revocation callback in close() has nothing left to flush
        consumer, self._consumer, self.placement.consumer = self._consumer, None, None
        if consumer is not None:
            try:
                consumer.close()
            except Exception as exc:  # leaving the group is a courtesy; the session timeout covers it
                log.debug("closing the consumer: %s", exc)
        self.publisher.close()
        self.folders.close()
        self._use_folders(PartitionFolders(self._new_folder))
        self.metrics.stop()
