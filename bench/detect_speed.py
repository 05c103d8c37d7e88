"""Benchmark: `driftline detect` as a pipeline runs it (a fresh process, imports included), against a peer.

Run by hand:  nice .venv/bin/python bench/detect_speed.py --peer-python /work/main/.venv/bin/python [--runs 5]

Writes `bench/batch_memory.py`'s data (a 100 000-row reference and a 1 000 000-row current file,
20 numeric + 3 categorical columns, a quarter of them shifted) once, then runs
``driftline detect --reference REF --current CUR --json OUT`` ``--runs`` times from this checkout and,
with ``--peer-python`` (another checkout's interpreter, e.g. the main branch's: the previous
implementation), as many times from the peer, alternating, so both see the same machine load. Prints
per run and as medians: wall seconds, CPU seconds (user + system of the child, `getrusage`), current
rows per wall second and per CPU second; the CPU of importing the plain `detect` path in a fresh
process; and whether the two JSON files are byte for byte identical. ``--cores 0,1`` pins both to
those cores (`taskset`). Asserts nothing; on a loaded machine read CPU seconds, not wall.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from batch_memory import run_detect, write_parquet  # noqa: E402  the same files, run the same way

IMPORT = "import driftline.commands.detect, driftline.detectors.batch.streamed"
CPU_OF = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
          "u = resource.getrusage(resource.RUSAGE_CHILDREN); print(u.ru_utime + u.ru_stime)")


def import_cpu(python: str) -> float:
    """CPU seconds of a fresh process that imports the `detect` path of `python`'s checkout."""
    cwd = Path(python).resolve().parents[2] if python != sys.executable else None
    done = subprocess.run([sys.executable, "-c", CPU_OF, python, "-c", IMPORT], capture_output=True, text=True,
                          check=True, cwd=cwd)
    return float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--reference-rows", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--peer-python", default=None, help="the previous implementation's python, run alike")
    parser.add_argument("--cores", default=None, help="pin the detect processes to these cores (taskset -c)")
    parser.add_argument("--dir", default=None, help="keep the data here (reused when present)")
    options = parser.parse_args()
    folder = Path(options.dir or tempfile.mkdtemp(prefix="driftline-speed-"))
    folder.mkdir(parents=True, exist_ok=True)
    reference, current = folder / "reference.parquet", folder / f"current_{options.rows}.parquet"
    if not reference.exists():
        write_parquet(reference, options.reference_rows, False, 1)
    if not current.exists():
        write_parquet(current, options.rows, True, 2)
    pythons = {"this": sys.executable, **({"peer": options.peer_python} if options.peer_python else {})}
    pin = ["taskset", "-c", options.cores] if options.cores else []
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in pythons}
    try:
        for name, python in pythons.items():
            print(f"{name}: importing the detect path costs {import_cpu(python):.2f} s CPU (fresh process)")
        for run in range(options.runs):
            for name, python in pythons.items():
                out = folder / f"{name}.json"
                wall, cpu, rss, code = run_detect(["--reference", str(reference), "--current", str(current),
                                                   "--json", str(out)], python, prefix=pin)
                figures[name].append((wall, cpu))
                print(f"  run {run + 1} {name:5s} wall {wall:6.2f} s  CPU {cpu:6.2f} s  peak RSS {rss:6,.0f} MiB  "
                      f"{options.rows / wall / 1e6:5.2f} M rows/s wall  {options.rows / cpu / 1e6:5.2f} M rows/CPU-s"
                      + ("" if code == 0 else f"  EXIT {code}"))
        print(f"\nmedians of {options.runs} runs, {options.rows:,} current + {options.reference_rows:,} reference rows "
              f"x 23 columns, {os.cpu_count()} cores visible:")
        for name, runs in figures.items():
            wall, cpu = statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)
            print(f"  {name:5s} wall {wall:6.2f} s  CPU {cpu:6.2f} s  {options.rows / wall / 1e6:5.2f} M rows/s wall  "
                  f"{options.rows / cpu / 1e6:5.2f} M rows/CPU-s")
        if "peer" in figures:
            ratio_wall = statistics.median(w for w, _ in figures["peer"]) / statistics.median(w for w, _ in figures["this"])
            ratio_cpu = statistics.median(c for _, c in figures["peer"]) / statistics.median(c for _, c in figures["this"])
            same = (folder / "this.json").read_bytes() == (folder / "peer.json").read_bytes()
            print(f"  peer / this: wall {ratio_wall:.2f}x, CPU {ratio_cpu:.2f}x; JSON byte-identical: {same}")
    finally:
        if options.dir is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
