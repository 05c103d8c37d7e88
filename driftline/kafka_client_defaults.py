"""The collector's Kafka client defaults (`driftline collector --kafka-client`, collector/record_source.py).

Re-exported by driftline/defaults.py, so `defaults.NAME` stays the one way to read any default; the
"Default thresholds" table of docs/configuration.md is generated from this file too.
"""
from __future__ import annotations

# --- Collector Kafka client (collector/record_source.py) ----------------------------------
# The clients `driftline collector --kafka-client` (setting collector_kafka_client) chooses from:
# librdkafka (confluent-kafka) reads several times faster than kafka-python; kafka-python is the
# fallback where confluent-kafka does not import, and the client that bounds decompression itself.
COLLECTOR_KAFKA_CLIENTS = ("confluent", "kafka-python")
# A partition librdkafka has not moved on for this long while the log holds more (it re-fetches a
# batch it cannot parse forever, silently) is read past its position by the guarded kafka-python
# reader once, which delivers the records or dead-letters the batch as the kafka-python client does.
COLLECTOR_STALL_SECONDS = 10.0
# Bytes librdkafka fetches at most per partition and per request: the 8 MiB and 64 MiB kafka-python
# is given; receive.message.max.bytes is the request's size plus room for the response's framing.
COLLECTOR_PARTITION_FETCH_BYTES = 8 << 20
COLLECTOR_FETCH_BYTES = 64 << 20
