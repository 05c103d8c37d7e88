"""The garbage collector in long-running driftline processes (worker, collector, decoders)."""
from __future__ import annotations

import gc


def freeze_long_lived() -> None:
    """Collect once, then exempt every object that exists now from later collections (`gc.freeze`).

    Call it once a process has loaded what it keeps for its whole life. The worker, the
    collector and its decoders import torch, pandas, pyarrow, SQLAlchemy or FastAPI: over a
    million objects that live as long as the process. CPython's full collection walks all of
    them again whenever enough new objects have survived, which under load is every few
    seconds, and every thread of the process waits for it. Measured on the development
    machine: the worker at 128 concurrent requests ran a full collection every ~4 s that took
    ~160 ms and freed nothing (~1 ms once frozen); the collector's process 62-88 ms and each
    decoder's 13-60 ms, several times in a 10-s run (1-8 ms once frozen).

    Objects made later (requests, windows, a model swapped in) are collected as before.
    Frozen objects are still freed when their reference count drops to zero; only cycles
    among them are never collected, and the collection here clears those that exist now.
    """
    gc.collect()
    gc.freeze()
