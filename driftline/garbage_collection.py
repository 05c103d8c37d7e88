"""The garbage collector in long-running driftline processes (worker, collector, decoders)."""
from __future__ import annotations

import gc


def freeze_long_lived() -> None:
    """Collect once, then exempt every object that exists now from later collections (`gc.freeze`).

    Call it once a process has loaded what it keeps for its whole life. The worker, the
    collector and its decoders import torch, pandas, pyarrow, SQLAlchemy or FastAPI: over a
    million objects that live as long as the process. CPython's full collection walks all of
    them again whenever enough new objects have survived, which under load is every few
    seconds, and every thread of the process waits for it: a pause of a tenth of a second
    that frees nothing (docs/worker.md, docs/collector.md).

    Objects made later (requests, windows, a model swapped in) are collected as before.
    Frozen objects are still freed when their reference count drops to zero; only cycles
    among them are never collected, and the collection here clears those that exist now.
    """
    gc.collect()
    gc.freeze()
