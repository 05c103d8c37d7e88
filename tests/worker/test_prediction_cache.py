"""The prediction cache: LRU eviction, TTL expiry, keys that hold the version."""
from __future__ import annotations

from driftline.worker.cache import PredictionCache, cache_key


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_least_recently_used_entry_is_evicted():
    cache = PredictionCache(max_entries=2, ttl_s=60)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recent
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3
    assert len(cache) == 2


def test_entries_expire_after_the_ttl_even_when_read():
    clock = FakeClock()
    cache = PredictionCache(max_entries=10, ttl_s=5, clock=clock)
    cache.put("k", 0.3)
    clock.now = 4.9
    assert cache.get("k") == 0.3
    clock.now = 5.1
    assert cache.get("k") is None and len(cache) == 0


def test_key_is_canonical_and_holds_model_and_version():
    assert cache_key("m", "1", {"a": 1, "b": None}) == cache_key("m", "1", {"b": None, "a": 1})
    assert cache_key("m", "1", {"a": 1}) != cache_key("m", "2", {"a": 1})
    assert cache_key("m", "1", {"a": 1}) != cache_key("n", "1", {"a": 1})
    assert cache_key("m", "1", {"a": 1}) != cache_key("m", "1", {"a": 1.5})


def test_size_zero_disables_the_cache():
    cache = PredictionCache(max_entries=0, ttl_s=60)
    cache.put("k", 1)
    assert cache.get("k") is None and not cache.enabled
