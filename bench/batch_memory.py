"""Benchmark: `driftline detect` on Parquet files of any size, streamed in bounded memory, against the in-memory path.

Run by hand:  nice .venv/bin/python bench/batch_memory.py --rows 1000000 [--rows 20000000] [--in-memory-max 10000000]
The 100M-row run (about 9 GB of Parquet, written group by group):
              nice .venv/bin/python bench/batch_memory.py --rows 100000000 --in-memory-max 0 --dir /var/tmp/dl-100m

Writes a 100 000-row reference and a current file of ``--rows`` rows (20 numeric + 3 categorical columns,
`bench/detectors.py`'s shapes, a quarter of the columns shifted) in row groups of 500 000 rows, never holding
more than one group in memory; runs `driftline detect --reference REF --current CUR --json OUT` in a fresh
process, streamed (``--batch-rows``) and, up to ``--in-memory-max`` rows, ``--in-memory``; prints wall
time, the child's peak RSS (``getrusage(RUSAGE_CHILDREN).ru_maxrss`` of a wrapper that runs just it), rows
per second, and whether the two runs' decisions agree. Also times ``python -c "import driftline.cli"``
for the import share. Files go to ``--dir`` (default a temporary folder), deleted at the end unless ``--keep``.
``--engine spark`` / ``--engine dask`` (repeatable) also run `detect_frames` on that engine (Spark local mode at
its default memory, Dask's local cluster) in a fresh process, printing its peak RSS (the JVM's included) and,
per pass, the pickled bytes each partition sends back (largest and total): what reaches the driver.
Asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from driftline.batch_defaults import BATCH_CHUNK_ROWS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from detectors import make_frame  # noqa: E402  bench/detectors.py: the same columns and shapes

GROUP_ROWS = 500_000
# Parquet bytes per row of make_frame's 23 columns (measured: 1.8 GB for 20M rows), plus room to spare.
BYTES_PER_ROW = 100
WRAPPER = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
           "u = resource.getrusage(resource.RUSAGE_CHILDREN); print(u.ru_utime + u.ru_stime, u.ru_maxrss, code)")


def write_parquet(path: Path, rows: int, drift: bool, seed: int) -> None:
    """`rows` rows in row groups of GROUP_ROWS, one group in memory at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    writer = None
    try:
        for start in range(0, rows, GROUP_ROWS):
            table = pa.Table.from_pandas(make_frame(rng, min(GROUP_ROWS, rows - start), drift), preserve_index=False)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


def run_detect(args: list[str], python: str = sys.executable,
               prefix: list[str] | None = None) -> tuple[float, float, float, int]:
    """(wall seconds, CPU seconds, peak RSS MiB, exit code) of `driftline detect ARGS` in its own process
    (`prefix`: a command the child runs under, e.g. ``taskset -c 0,1``)."""
    command = [sys.executable, "-c", WRAPPER, *(prefix or []), python, "-m", "driftline", "detect", *args]
    # a peer checkout runs from its own folder, so `-m driftline` imports its code, not this one's
    cwd = Path(python).resolve().parents[2] if python != sys.executable else None
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=cwd)
    wall = time.perf_counter() - started
    cpu, rss_kib, code = done.stdout.split()[-3:]
    if int(code) != 0:
        print(done.stderr[-2000:], file=sys.stderr)
    return wall, float(cpu), int(rss_kib) / 1024, int(code)


class PayloadBytes:
    """An engine whose `fold` also records each partition's result, pickled, in bytes (what travels to the driver)."""

    def __init__(self, engine):
        self.engine, self.name, self.passes = engine, engine.name, []

    def head(self, frame, rows):
        return self.engine.head(frame, rows)

    def partition_rows(self, frame):
        return self.engine.partition_rows(frame)

    def fold(self, frame, fold, offsets, what, on_progress=None):
        results = self.engine.fold(frame, fold, offsets, what, on_progress)
        self.passes.append((what, [len(pickle.dumps(r, protocol=pickle.HIGHEST_PROTOCOL)) for r in results
                                   if r is not None]))
        return results


def tree_rss() -> int:
    """The resident bytes of this process and all its descendants (/proc)."""
    own, total, seen = os.getpid(), 0, set()
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                children.setdefault(int(fields[1]), []).append(int(entry.name))
            except OSError:
                continue
    stack = [own]
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        stack.extend(children.get(pid, []))
        try:
            total += int((Path("/proc") / str(pid) / "statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            continue
    return total


def engine_child(engine: str, reference: str, current: str, master: str = "local[*]") -> None:
    """Run in a fresh process: `detect_frames` on `engine`, printing each pass's partition payloads."""
    from driftline.detectors.batch.frames import detect_frames

    if engine == "spark":
        from driftline.engines.spark import SparkEngine, read_table, spark_session

        with spark_session(master) as session:
            recorder = PayloadBytes(SparkEngine(session))
            runtime, peaks, done = session._jvm.java.lang.Runtime.getRuntime(), [0, 0], threading.Event()

            def watch() -> None:  # the JVM's heap in use and the process tree's RSS, every 0.2 s
                while not done.wait(0.2):
                    peaks[0] = max(peaks[0], runtime.totalMemory() - runtime.freeMemory())
                    peaks[1] = max(peaks[1], tree_rss())

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            detect_frames(read_table(session, reference, "reference"), read_table(session, current, "current data"),
                          engine=recorder)
            done.set()
            watcher.join()
            print(f"    JVM heap: peak in use {peaks[0] / 2**20:,.0f} MiB of {runtime.maxMemory() / 2**20:,.0f} MiB "
                  f"(Spark's default); the driver, JVM and Python workers together: peak RSS "
                  f"{peaks[1] / 2**20:,.0f} MiB")
    else:
        from driftline.engines.dask import DaskEngine, dask_client, read_table

        with dask_client() as client:
            recorder = PayloadBytes(DaskEngine(client))
            detect_frames(read_table(reference, "reference"), read_table(current, "current data"), engine=recorder)
    for what, sizes in recorder.passes:
        print(f"    {what:28s} {len(sizes):3d} partitions, largest {max(sizes) / 2**20:8.2f} MiB, "
              f"all {sum(sizes) / 2**20:8.2f} MiB")


def run_engine(engine: str, reference: Path, current: Path, rows: int, master: str) -> None:
    command = [sys.executable, "-c", WRAPPER, sys.executable, __file__, "--engine-child", engine, str(reference),
               str(current), master]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    cpu, rss_kib, code = done.stdout.split()[-3:]
    print(f"  {engine:10s} wall {wall:7.2f} s  CPU {float(cpu):7.2f} s  peak RSS {int(rss_kib) / 1024:8,.0f} MiB  "
          f"{rows / wall / 1e6:5.2f} M rows/s wall" + ("" if int(code) == 0 else f"  EXIT {code}"))
    print("\n".join(done.stdout.splitlines()[:-1]))
    if int(code) != 0:
        print(done.stderr[-1500:])


def decisions(path: Path) -> list[tuple[list[str], bool]]:
    result = json.loads(path.read_text())
    return [(w["drifted_features"], w["dataset_drift"]) for w in result["windows"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, action="append", help="current rows (repeatable; default 1 000 000)")
    parser.add_argument("--reference-rows", type=int, default=100_000)
    parser.add_argument("--in-memory-max", type=int, default=10_000_000, help="largest file also run --in-memory")
    parser.add_argument("--batch-rows", type=int, default=None, help="--batch-rows of the streamed run")
    parser.add_argument("--extra", default="", help="extra detect options, e.g. '--chunk-size 1000000'")
    parser.add_argument("--peer-python", default=None,
                        help="another checkout's python (e.g. /work/main/.venv/bin/python): its detect, run the same way")
    parser.add_argument("--engine", action="append", choices=["spark", "dask"], default=[],
                        help="also run detect_frames on this engine (repeatable)")
    parser.add_argument("--spark-master", default="local[*]",
                        help="--engine spark's master (local[8]: 8 partitions of a file, as on an 8-core machine)")
    parser.add_argument("--engine-child", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--keep", action="store_true")
    options = parser.parse_args()
    if options.engine_child:
        engine_child(*options.engine_child)
        return
    folder = Path(options.dir or tempfile.mkdtemp(prefix="driftline-batch-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import driftline.cli"], check=True)
        print(f"import driftline.cli: {time.perf_counter() - started:.2f} s wall (a fresh process)")
        reference = folder / "reference.parquet"
        write_parquet(reference, options.reference_rows, False, 1)
        for rows in options.rows or [1_000_000]:
            current = folder / f"current_{rows}.parquet"
            free = shutil.disk_usage(folder).free
            if rows * BYTES_PER_ROW > free:  # refuse rather than fill a shared disk halfway through a file
                print(f"\n{rows:,} rows: skipped, ~{rows * BYTES_PER_ROW / 2**30:.1f} GiB needed and "
                      f"{free / 2**30:.1f} GiB free in {folder}")
                continue
            started = time.perf_counter()
            write_parquet(current, rows, True, 2)
            print(f"\n{rows:,} rows x 23 columns: {current.stat().st_size / 2**20:,.0f} MiB Parquet "
                  f"(written in {time.perf_counter() - started:.0f} s)")
            base = ["--reference", str(reference), "--current", str(current), *options.extra.split()]
            # --batch-rows always: without it `detect` reads small Parquet files whole
            runs = {"streamed": [*base, "--json", str(folder / "streamed.json"),
                                 "--batch-rows", str(options.batch_rows or BATCH_CHUNK_ROWS)]}
            if rows <= options.in_memory_max:
                runs["in-memory"] = [*base, "--json", str(folder / "in-memory.json"), "--in-memory"]
                if options.peer_python:
                    runs["peer"] = [*base, "--json", str(folder / "peer.json")]
            walls = {}
            for name, args in runs.items():
                wall, cpu, rss, code = run_detect(args, options.peer_python if name == "peer" else sys.executable)
                walls[name] = wall
                print(f"  {name:10s} wall {wall:7.2f} s  CPU {cpu:7.2f} s  peak RSS {rss:8,.0f} MiB  "
                      f"{rows / wall / 1e6:5.2f} M rows/s wall, {rows / cpu / 1e6:5.2f} M rows/CPU-s"
                      + ("" if code == 0 else f"  EXIT {code}"))
            if len(walls) == 2:
                same = decisions(folder / "streamed.json") == decisions(folder / "in-memory.json")
                print(f"  in-memory / streamed wall: {walls['in-memory'] / walls['streamed']:.2f}x; "
                      f"decisions identical: {same}")
            for engine in options.engine:
                run_engine(engine, reference, current, rows, options.spark_master)
            current.unlink()
    finally:
        if not options.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"\n(cpu count {os.cpu_count()}, load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
