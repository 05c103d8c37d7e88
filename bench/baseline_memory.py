"""Benchmark: `driftline baseline` on a Parquet file, streamed in bounded memory, against `--in-memory`.

Run by hand:  nice .venv/bin/python bench/baseline_memory.py --rows 2000000 [--rows 5000000] [--in-memory-max 5000000]

Writes a training file of ``--rows`` rows (`bench/detectors.py`'s 20 numeric + 3 categorical columns, in row
groups of 500 000, one group in memory at a time), registers it with `driftline baseline` in a fresh process per
run (streamed, then ``--in-memory`` up to ``--in-memory-max`` rows) into a temporary SQLite store, and prints
wall time, CPU time and the child's peak RSS, and whether the two stored baselines have the same fingerprint
(rows and every bin edge). Files are deleted at the end unless ``--keep``. Asserts nothing.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from batch_memory import WRAPPER, write_parquet  # noqa: E402  the same file layout and measurement


def run_baseline(args: list[str]) -> tuple[float, float, float, int]:
    """(wall seconds, CPU seconds, peak RSS MiB, exit code) of `driftline baseline ARGS` in its own process."""
    command = [sys.executable, "-c", WRAPPER, sys.executable, "-m", "driftline", "baseline", *args]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    cpu, rss_kib, code = done.stdout.split()[-3:]
    if int(code) != 0:
        print(done.stderr[-2000:], file=sys.stderr)
    return wall, float(cpu), int(rss_kib) / 1024, int(code)


def fingerprints(db: str) -> dict[str, str]:
    from sqlalchemy import select

    from driftline.store.db import session_scope
    from driftline.store.models import BaselineRecord

    with session_scope(db) as session:
        return {r.version: r.summary["fingerprint"] for r in session.scalars(select(BaselineRecord))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, action="append", help="training rows (repeatable; default 2 000 000)")
    parser.add_argument("--in-memory-max", type=int, default=5_000_000, help="largest file also run --in-memory")
    parser.add_argument("--dir", default=None)
    parser.add_argument("--keep", action="store_true")
    options = parser.parse_args()
    folder = Path(options.dir or tempfile.mkdtemp(prefix="driftline-baseline-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        for rows in options.rows or [2_000_000]:
            path = folder / f"train_{rows}.parquet"
            write_parquet(path, rows, False, 3)
            db = f"sqlite:///{folder / f'store_{rows}.db'}"
            subprocess.run([sys.executable, "-m", "driftline", "db", "upgrade", "--db", db], check=True,
                           capture_output=True)
            print(f"\n{rows:,} rows x 23 columns: {path.stat().st_size / 2**20:,.0f} MiB Parquet")
            runs = {"streamed": []} | ({"in-memory": ["--in-memory"]} if rows <= options.in_memory_max else {})
            for version, (name, extra) in enumerate(runs.items(), start=1):
                wall, cpu, rss, code = run_baseline(["--model", "bench", "--version", str(version), "--file",
                                                     str(path), "--db", db, *extra])
                print(f"  {name:10s} wall {wall:7.2f} s  CPU {cpu:7.2f} s  peak RSS {rss:8,.0f} MiB"
                      + ("" if code == 0 else f"  EXIT {code}"))
            stored = fingerprints(db)
            if len(stored) == 2:
                print(f"  same fingerprint (rows, every edge): {stored['1'] == stored['2']}")
            path.unlink()
    finally:
        if not options.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
