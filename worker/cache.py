"""The prediction cache: least-recently-used with a time to live.

A key is (model, version, canonical features): the features the model actually saw,
serialised with sorted keys, so a new version never serves an old version's answer
and a serving-path change to the features is never hidden by the cache.
Single-threaded by design: only the event loop touches it.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any, Callable, Hashable, Mapping

import orjson


def cache_key(model: str, version: str, features: Mapping[str, Any]) -> tuple[str, str, bytes]:
    return model, version, orjson.dumps(features, option=orjson.OPT_SORT_KEYS)


class PredictionCache:
    """LRU + TTL. `get` refreshes recency but not age: an entry expires `ttl_s` after it was stored."""

    def __init__(self, max_entries: int, ttl_s: float, clock: Callable[[], float] = time.monotonic):
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self.clock = clock
        self._entries: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.max_entries > 0 and self.ttl_s > 0

    def get(self, key: Hashable) -> Any | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        stored_at, value = entry
        if self.clock() - stored_at > self.ttl_s:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def put(self, key: Hashable, value: Any) -> None:
        if not self.enabled:
            return
        self._entries[key] = (self.clock(), value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
