"""Log inference events from any Python model server, in the event contract's shape (driftline.events).

Against a running Kafka (the lines that need it are skipped when the doctests run):

>>> from driftline.client import InferenceLogger
>>> logger = InferenceLogger("127.0.0.1:9092", model="credit-default", version="3")  # doctest: +SKIP
>>> event_id = logger.log({"income": 5300.0, "region": "north"}, prediction=0.83,  # doctest: +SKIP
...                       latency_ms=12.3, request_id="9a1e", inputs={"income": "5300", "region": " North"})
>>> logger.log_label("9a1e", 1)  # doctest: +SKIP
>>> stats = logger.close()  # doctest: +SKIP

`log_label` sends the outcome later, when it is known; `close` flushes what is buffered (a bounded wait).

An asyncio server can call `log_soon` instead of `log` (same arguments): the events of
one turn of the event loop are then encoded together at its end, which costs the loop less.

`log` never blocks the caller and never raises for Kafka trouble: events go into a
bounded in-memory buffer that one background thread drains into a kafka-python
producer, or (`producer_process=True`, the worker's default) ships to a child process
that runs a confluent-kafka (librdkafka) producer. When Kafka is slow or down, at start
or mid-run, events wait in the buffer up to `max_buffered` (counting those handed to the
producer and not yet acknowledged); beyond that they are dropped and counted in `stats()`. The producer runs without
idempotence because a restarted in-memory broker (the embedded default) makes an
idempotent producer fail for good; a retried batch may therefore arrive twice, and
consumers de-duplicate on `event_id`.
"""
from __future__ import annotations

from driftline.client.ids import new_id, now_rfc3339
from driftline.client.logger import InferenceLogger
from driftline.client.partitioning import KeyHashPartitioner, partition_for_key
from driftline.client.process_sender import ProcessEventSender
from driftline.client.sender import EventSender, SenderStats
from driftline.client.tuning import DEFAULT_MAX_BUFFERED, PRODUCER_COMPRESSION

__all__ = ["DEFAULT_MAX_BUFFERED", "EventSender", "InferenceLogger", "KeyHashPartitioner", "PRODUCER_COMPRESSION",
           "ProcessEventSender", "SenderStats", "new_id", "now_rfc3339", "partition_for_key"]
