"""How the client's senders batch, wait and retry: one place for the producer settings they share."""
from __future__ import annotations

# Events held in memory while Kafka is slow or down (about 1-3 KB each).
DEFAULT_MAX_BUFFERED = 20_000
# Batching on the producer: 20 ms of linger fills batches at serving rates
# without adding noticeable delay to monitoring (windows are a minute).
PRODUCER_LINGER_MS = 20
PRODUCER_BATCH_BYTES = 262_144
# Event batches are compressed: JSON events shrink about 4x with lz4, and the broker's CPU
# per event drops with its bytes for little more in the producer (bench/collector.py).
# Every Kafka client reads lz4 (kafka-python through the `lz4` package, a dependency).
PRODUCER_COMPRESSION = "lz4"
# How long an accepted event may wait for Kafka before it counts as failed.
DELIVERY_TIMEOUT_MS = 60_000
RECONNECT_BACKOFF_S = (0.2, 0.5, 1.0, 2.0)
# The sender thread wakes this often, hands everything waiting to the producer in one
# burst and flushes it: one produce request per interval instead of one per linger or
# per event. Waking per event would also hand the GIL back and forth with the serving
# thread on every request; CPU per event falls as the interval grows and flattens by
# 100 ms (bench/worker.py --logger-cost), a delay that is nothing next to one-minute
# monitoring windows.
DRAIN_INTERVAL_S = 0.1
# A flush that Kafka does not acknowledge in time is left to the producer's retries.
FLUSH_TIMEOUT_S = 5.0
# The producer process runs at this nice value: where CPUs are short, the kernel prefers
# the serving process, and the child catches up in the gaps (events wait in its buffer a
# little longer; monitoring windows are a minute). The retraining process does the same.
PRODUCER_PROCESS_NICENESS = 10
# Longest the sender thread needs to notice `close`: a bootstrap attempt (2 s), a blocked
# send (1 s) and the producer's close (2 s), with margin.
THREAD_STOP_S = 8.0
