"""What checking the embedded broker's binary against its pinned sha256 costs: first hash, then cached.

    .venv/bin/python bench/broker_binary.py [--rounds 5]

The first `tansu_binary()` of a process hashes the 41 MB binary; later ones stat it and find
the hash in the per-process cache (driftline.broker_binary).
"""
from __future__ import annotations

import argparse
import time

from driftline import broker_binary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    path = broker_binary.tansu_binary()
    size_mb = path.stat().st_size / 1e6
    for _ in range(args.rounds):
        broker_binary._hashes.clear()
        started = time.perf_counter()
        broker_binary.tansu_binary()
        first = time.perf_counter() - started
        started = time.perf_counter()
        for _ in range(100):
            broker_binary.tansu_binary()
        cached = (time.perf_counter() - started) / 100
        print(f"{path} ({size_mb:.1f} MB): first check {first * 1e3:.1f} ms "
              f"({size_mb / first:.0f} MB/s), cached {cached * 1e6:.0f} us")


if __name__ == "__main__":
    main()
