"""CPU accounting and pinning for the benchmarks, from /proc (Linux): per process, its threads and children."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

CPU_FIGURES = ("cpu", "own_cpu", "loop_cpu", "broker_cpu")  # what cpu_snapshot reads, per measured round


def cpu_sets(pin: str) -> dict[str, set[int]] | None:
    """With `--pin-cpus` (auto: where there are 8 CPUs or more), separate CPUs for the load generator (a
    quarter), the workers with their producer children (half) and the broker (a quarter): on a many-core
    machine the scheduler otherwise moves them across each other's cores, and the same configuration's
    requests/s varied +-11 % from round to round on the 16-core GPU machine (docs/worker.md).

    With fewer than 4 CPUs (`--pin-cpus yes` only), the worker being measured gets the first CPU alone and
    everything else shares the rest, its producer child included ("children"): a serving host whose clients
    and Kafka are elsewhere and whose spare cores run the producer, so what is left is the serving process's
    own cost of logging."""
    cpus = sorted(os.sched_getaffinity(0))
    if pin == "no" or (pin == "auto" and len(cpus) < 8):
        return None
    if len(cpus) < 2:
        raise SystemExit("--pin-cpus yes needs 2 CPUs or more")
    if len(cpus) < 4:
        rest = set(cpus[1:])
        return {"load": rest, "workers": {cpus[0]}, "broker": rest, "children": rest}
    quarter = len(cpus) // 4
    return {"load": set(cpus[:quarter]), "workers": set(cpus[quarter:len(cpus) - quarter]),
            "broker": set(cpus[len(cpus) - quarter:])}


def cpu_seconds(pid: int, exclude: int | None = None) -> float:
    """User + system CPU time of a process (all its threads) and of its live children (but `exclude`), from /proc.

    The children count because the event producer can run in one: its CPU is the
    logging's cost as much as a thread's would be.
    """
    return sum(stat_cpu_seconds(fields) for process, fields in process_stats()
               if (process == pid or fields[1] == str(pid)) and process != exclude)


def cpu_snapshot(pid: int, broker_pid: int | None) -> dict[str, float]:
    """CPU seconds so far, from one scan of /proc: "cpu" the worker with its children, "own_cpu" the worker
    alone, "loop_cpu" its main thread (the event loop: HTTP, validation, logging's own work), "broker_cpu"
    the broker with its children."""
    snapshot = dict.fromkeys(CPU_FIGURES, 0.0)
    for process, fields in process_stats():
        seconds = stat_cpu_seconds(fields)
        if process == pid:
            snapshot["own_cpu"] += seconds
        if process == pid or fields[1] == str(pid):
            snapshot["cpu"] += seconds
        if broker_pid and (process == broker_pid or fields[1] == str(broker_pid)):
            snapshot["broker_cpu"] += seconds
    with contextlib.suppress(OSError):  # it exited meanwhile
        snapshot["loop_cpu"] = stat_cpu_seconds(stat_fields(Path(f"/proc/{pid}/task/{pid}/stat")))
    return snapshot


def stat_fields(stat: Path) -> list[str]:
    """The fields of a /proc stat file after the command name (which may hold spaces); [1] is the parent."""
    return stat.read_text().rsplit(")", 1)[1].split()


def stat_cpu_seconds(fields: list[str]) -> float:
    """User + system CPU time from `stat_fields`."""
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_stats() -> Iterator[tuple[int, list[str]]]:
    """(pid, `stat_fields`) of every live process."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            yield int(stat.parent.name), stat_fields(stat)
        except OSError:
            continue  # it exited meanwhile


def pin_children(pid: int, cpus: set[int]) -> None:
    """Move every thread of `pid`'s child processes to `cpus` (a child inherits its parent's CPUs, and
    librdkafka's threads would otherwise stay on them; a child restarted meanwhile is caught next round)."""
    for child, fields in process_stats():
        if fields[1] != str(pid):
            continue
        try:
            for task in Path(f"/proc/{child}/task").iterdir():
                os.sched_setaffinity(int(task.name), cpus)
        except OSError:
            continue  # it exited meanwhile
