"""Which partition a record goes to: crc32 of its key, the same in every sender of this client."""
from __future__ import annotations

import random
import zlib
from typing import Collection

from kafka.partitioner import Partitioner


def partition_for_key(key: bytes, partitions: Collection[int]) -> int:
    """The partition of a keyed record: crc32 of the key modulo the partition count.

    The same key always lands on the same partition while the partition count stays the
    same. It is not the partition a Java client (murmur2) would pick: keys produced by
    this client agree with each other, not with other producers' keys.
    """
    ordered = sorted(partitions)
    return ordered[zlib.crc32(key) % len(ordered)]


class KeyHashPartitioner(Partitioner):
    """kafka-python partitioner: `partition_for_key` for keyed records, a random available partition otherwise.

    kafka-python's default hashes keys with a pure-Python murmur2, a noticeable share of
    `send`; zlib's crc32 is C.
    """

    def partition(self, topic, key, serialized_key, value, serialized_value, cluster):  # noqa: ANN001
        partitions = cluster.partitions_for_topic(topic)
        if not partitions:
            raise ValueError(f"topic {topic} not found in the cluster metadata")
        if serialized_key is not None:
            return partition_for_key(serialized_key, partitions)
        return random.choice(list(cluster.available_partitions_for_topic(topic) or partitions))
