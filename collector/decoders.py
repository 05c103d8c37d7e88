"""Decoder processes: the collector's decode-validate-fold work on other CPU cores.

One collector process spends about as much CPU inside kafka-python (fetching and
unpacking records) and the store (the flush) as it does decoding JSON and folding
events; with the GIL, threads cannot overlap the two. With `--decoders N` the
collector process keeps Kafka, the offsets and the flush, and ships each poll's raw
record values to N decoder processes, which run `driftline.collector.folding.InferenceFolder`
for the partitions they are given (partition number modulo N, so one partition's
records are always folded in order by one process).

Protocol, over one socket pair per decoder (the collector only ever waits for an
answer to a question it asked, and while a `take` is unanswered it reads the answer as
soon as it would otherwise wait for room in the decoder's queue, so neither side can
block the other for good):

* ``("process", key, offsets, values)`` - fold records; no answer. Messages wait in a
  bounded queue per decoder, written by a sender thread; a full queue blocks the
  collector, which is the backpressure: it stops polling while its decoders are behind.
* ``("take", keys)`` -> ``{key: delta}`` - what each partition accumulated since the
  last take (the collector may go on sending while it waits: see `take_begin`), window
  states as `WindowState.to_bytes` blobs (the collector binds them to its own baseline
  objects). Decoders store the predictions for the label join themselves (idempotent
  inserts, `driftline.collector.folding`), so a delta carries only their count and the request ids
  whose label was waiting, which the collector's flush joins.
* ``("reset", key, watermarks)``, ``("forget_ids", key)``, ``("drop", key)``, ``("stop",)``.

A decoder that dies (killed, out of memory, a bug) makes the collector raise
`DecoderFailed` and exit; nothing it folded was committed, so the restarted
collector reads those records again from the stored offsets. Decoders die with the
collector (``PR_SET_PDEATHSIG``) and ignore Ctrl-C and SIGTERM sent to the process group
(the collector gathers from them for its final flush, then closes them).
"""
from __future__ import annotations

import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import traceback
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from typing import Any, Callable, Sequence

from driftline.collector.dead_letters import DeadLetterRow
from driftline.collector.folding import FolderSetup, FoldDelta, InferenceFolder, PartitionFolders, PartitionKey, Watermarks
from driftline.collector.labels import PredictionRow
from driftline.collector.windows import PartialWindow
from driftline import defaults
from driftline.baseline import Baseline
from driftline.garbage_collection import freeze_long_lived
from driftline.segments import SegmentSpec
from driftline.supervisor import start_python_child
from driftline.window_state import WindowState, WindowStateError

log = logging.getLogger(__name__)

_STOP_TIMEOUT_S = 5.0
# Messages queued per decoder ahead of what it has read (a message is one partition's share of a
# poll, up to ~1 MB). The queue lets the collector poll while its decoder is busy and gives the
# decoder a backlog while the collector flushes; a socket buffer alone holds about one message,
# which kept the two in lockstep (each waited for the other ~25 % of the time).
_QUEUED_MESSAGES = 8
# An idle decoder stores pending predictions once a partition has this many (fewer: the
# fixed cost of a transaction would dominate).
_IDLE_WRITE_MIN_ROWS = 1_000


class DecoderFailed(RuntimeError):
    """A decoder process died or failed; the collector stops (nothing it folded was committed)."""


@dataclass(frozen=True)
class DecoderConfig:
    db_url: str
    window_ms: int
    lateness_ms: int
    dedup_limit: int
    baseline_recheck_s: float
    log_level: int = logging.WARNING
    segment_columns: tuple[str, ...] = ()
    segment_max_values: int = defaults.SEGMENT_MAX_VALUES

    @property
    def segments(self) -> SegmentSpec:
        return SegmentSpec(columns=tuple(self.segment_columns), max_values=self.segment_max_values)


def decoder_count(setting: int | str, cpus: int | None = None) -> int:
    """`--decoders`: a number, or "auto" (none on one core, two on 2 to 7 cores, four from 8 up).

    Two even on two cores: the collector process waits on its decoder (the flush gathers
    from it, and its queue fills) for about half its time, so a second decoder finds a
    core free. Four where cores are plenty: a decoder needs about 2.5 times the collector
    process's CPU per event, so two of them are the limit on many cores; more would wait on
    the collector process (figures: bench/RESULTS.md).
    """
    if setting != "auto":
        return int(setting)
    cpus = cpus or os.cpu_count() or 1
    return 0 if cpus < 2 else 2 if cpus < 8 else 4


class DecoderPool:
    """N decoder processes; partition `p` of a topic is folded by decoder ``p % N``.

    The same calls as `driftline.collector.folding.PartitionFolders`. Once a decoder has failed
    (`failed`), nothing gathered from the pool can be trusted and it must only be closed.
    """

    def __init__(self, count: int, config: DecoderConfig):
        if count < 1:
            raise ValueError("a decoder pool needs at least one decoder")
        self.failed = False
        self._conns: list[Connection] = []
        self._procs: list[subprocess.Popen[bytes]] = []
        for index in range(count):
            proc, conn = start_python_child("from driftline.collector.decoders import decoder_main; decoder_main()",
                                            str(index), json.dumps(asdict(config)), preexec_fn=_child_setup)
            self._conns.append(conn)
            self._procs.append(proc)
        self._outboxes = [_Outbox(conn, index) for index, conn in enumerate(self._conns)]
        # Decoders asked to `take` and not yet answered, and answers read before `take_finish`
        # asked for them (read early so that a decoder never blocks sending its answer while
        # the collector blocks sending it more: see `_send`).
        self._asked: set[int] = set()
        self._answers: dict[int, Any] = {}

    def _index(self, key: PartitionKey) -> int:
        return key[1] % len(self._conns)

    def _send(self, index: int, message: tuple[Any, ...]) -> None:
        """Queue a message for decoder `index` (in order); blocks while its queue is full (backpressure)."""
        outbox = self._outboxes[index]
        while True:
            if outbox.error is not None:
                raise self._failure(f"a decoder process is gone ({self._exit_codes()}): {outbox.error}")
            try:
                # While a take is unanswered, a decoder may be blocked sending its answer, and read
                # nothing more until it is read: look for answers often.
                outbox.messages.put(message, timeout=0.01 if self._asked else 0.5)
                return
            except queue.Full:
                self._read_answers()

    def _read_answers(self) -> None:
        for index in self._asked:
            if index not in self._answers:
                conn = self._conns[index]
                try:
                    if conn.poll(0):
                        self._answers[index] = conn.recv()
                except (OSError, EOFError) as exc:
                    self._answers[index] = exc  # take_finish reports it

    def _failure(self, message: str) -> DecoderFailed:
        self.failed = True
        return DecoderFailed(message)

    def check(self) -> None:
        """Raise `DecoderFailed` if a decoder has exited: one that is sent nothing (its partitions idle,
        or none assigned) would otherwise be found dead only when records reach it."""
        if any(proc.poll() is not None for proc in self._procs):
            raise self._failure(f"a decoder process is gone ({self._exit_codes()})")

    def process(self, key: PartitionKey, offsets: Sequence[int], values: Sequence[bytes | None]) -> None:
        self._send(self._index(key), ("process", key, list(offsets), list(values)))

    def take(self, keys: Sequence[PartitionKey],
             baseline_for: Callable[[str, str], Baseline | None]) -> dict[PartitionKey, FoldDelta]:
        """Every key's delta since its last take (waits until its decoder has folded all it was sent)."""
        return self.take_finish(self.take_begin(keys), baseline_for)

    def take_begin(self, keys: Sequence[PartitionKey]) -> list[int]:
        """Ask for every key's delta without waiting; returns the decoders asked, for `take_finish`.

        Messages sent afterwards queue behind the question: the answer covers exactly
        what was sent before it.
        """
        by_conn: dict[int, list[PartitionKey]] = {}
        for key in keys:
            by_conn.setdefault(self._index(key), []).append(key)
        for index, mine in by_conn.items():
            self._send(index, ("take", mine))
            self._asked.add(index)
        return list(by_conn)

    def take_ready(self, asked: list[int]) -> bool:
        """Whether every decoder asked has answered, or begun to (`take_finish` then waits little)."""
        try:
            return all(index in self._answers or self._conns[index].poll(0) for index in asked)
        except (OSError, EOFError):
            return True  # take_finish reports it

    def take_finish(self, asked: list[int],
                    baseline_for: Callable[[str, str], Baseline | None]) -> dict[PartitionKey, FoldDelta]:
        """The answers to `take_begin` (waits for them)."""
        out: dict[PartitionKey, FoldDelta] = {}
        for index in asked:
            self._asked.discard(index)
            try:
                answer = self._answers.pop(index) if index in self._answers else self._conns[index].recv()
                if isinstance(answer, Exception):
                    raise answer
            except (OSError, EOFError) as exc:
                raise self._failure(f"decoder {index} is gone ({self._exit_codes()}): {exc!r}") from None
            if isinstance(answer, tuple) and answer and answer[0] == "error":
                raise self._failure(f"decoder {index} failed:\n{answer[1]}")
            for key, packed in answer.items():
                out[key] = _unpack_delta(packed, baseline_for)
        return out

    def reset(self, key: PartitionKey, watermarks: Watermarks) -> None:
        self._send(self._index(key), ("reset", key, dict(watermarks)))

    def forget_ids(self, key: PartitionKey) -> None:
        self._send(self._index(key), ("forget_ids", key))

    def drop(self, key: PartitionKey) -> None:
        self._send(self._index(key), ("drop", key))

    def close(self) -> None:
        for outbox in self._outboxes:
            outbox.close(("stop",))
        for proc in self._procs:
            try:
                proc.wait(_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(_STOP_TIMEOUT_S)
        for conn in self._conns:
            conn.close()

    def _exit_codes(self) -> str:
        return ", ".join(f"decoder {i}: {'running' if p.poll() is None else f'exit {p.returncode}'}"
                         for i, p in enumerate(self._procs))


class _Outbox:
    """A bounded queue of messages for one decoder and the thread that sends them, in order.

    `conn.send` blocks while the decoder is behind; on this thread, it does not stop the
    collector from polling. `error` is set when the decoder cannot be written to (it died).
    """

    def __init__(self, conn: Connection, index: int):
        self.conn = conn
        self.messages: queue.Queue[tuple[Any, ...] | None] = queue.Queue(_QUEUED_MESSAGES)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"decoder-{index}-sender", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            message = self.messages.get()
            if message is None:
                return
            try:
                self.conn.send(message)
            except (OSError, EOFError, ValueError) as exc:
                self.error = exc
                return

    def close(self, last: tuple[Any, ...]) -> None:
        """Send `last` after what is queued (unless the decoder is gone), then end the thread."""
        if not self.thread.is_alive():
            return
        for message in (last, None):
            try:
                self.messages.put(message, timeout=_STOP_TIMEOUT_S)
            except queue.Full:  # the sender is stuck on a decoder that does not read: it is killed below
                break
        self.thread.join(_STOP_TIMEOUT_S)


# --- wire format of a delta (window states as blobs: a Baseline object is large to pickle) ---------

def _pack_delta(partition: PartitionKey, delta: FoldDelta) -> tuple[Any, ...]:
    windows, letters = [], list(delta.dead_letters)
    for key, p in delta.windows.items():
        try:
            windows.append((key, p.state.to_bytes(), p.events, p.late_events))
        except WindowStateError as exc:  # the folder's checks make this a bug: one window, never the decoder
            log.error("window %s of partition %s cannot be encoded: %s", key, partition, exc)
            letters.append(DeadLetterRow(partition[0], partition[1], -1, f"window {key.window_start_ms} of "
                                         f"{key.model}/{key.version}: {p.events} events not counted, its state "
                                         f"cannot be encoded ({exc})", None, key.model, b""))
    predictions = [(r.request_id, r.model, r.version, r.ts_ms, r.window_start_ms, r.prediction, r.segments)
                   for r in delta.predictions.values()]
    return (windows, letters, predictions, delta.watermarks, delta.valid, delta.late, delta.duplicates,
            delta.stored_predictions, list(delta.labels_waiting))


def _unpack_delta(packed: tuple[Any, ...], baseline_for: Callable[[str, str], Baseline | None]) -> FoldDelta:
    windows, letters, predictions, watermarks, valid, late, duplicates, stored, waiting = packed
    delta = FoldDelta(dead_letters=letters, watermarks=watermarks, valid=valid, late=late, duplicates=duplicates,
                      stored_predictions=stored, labels_waiting=set(waiting))
    for key, blob, events, late_events in windows:
        baseline = baseline_for(key.model, key.version)
        try:
            state = WindowState.from_bytes(blob, baseline)
        except ValueError:
            # Binned on a baseline this process does not hold (it changed meanwhile): kept as
            # binned, without the baseline object; the flush merges it with the stored row.
            state = WindowState.from_bytes(blob, None)
        delta.windows[key] = PartialWindow(state, events, late_events)
    delta.predictions = {(row[1], row[0]): PredictionRow(*row) for row in predictions}
    return delta


# --- the decoder process ------------------------------------------------------------------------------

def _child_setup() -> None:
    from driftline.supervisor import set_parent_death_signal

    set_parent_death_signal(signal.SIGKILL)  # a SIGKILLed collector leaves no decoder behind
    # Ctrl-C in a terminal and `driftline up`'s SIGTERM reach the whole process group; the
    # collector must still gather from its decoders for its final flush, and then closes them.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def decoder_main() -> None:
    """Entry point of a decoder process: argv = socket fd, index, DecoderConfig as JSON."""
    fd, index, config = int(sys.argv[1]), int(sys.argv[2]), DecoderConfig(**json.loads(sys.argv[3]))
    conn = Connection(fd)
    logging.basicConfig(level=config.log_level,
                        format=f"%(asctime)s %(levelname)s decoder-{index} %(name)s: %(message)s")
    try:
        _serve(conn, config)
    except (EOFError, OSError, KeyboardInterrupt):
        pass  # the collector is gone: nothing to hand over
    except BaseException:
        text = traceback.format_exc()
        log.error("decoder %d failed:\n%s", index, text)
        try:
            conn.send(("error", text))
        except (OSError, EOFError, ValueError):
            pass
        raise SystemExit(1) from None


def _serve(conn: Connection, config: DecoderConfig) -> None:
    from driftline.collector import store
    from driftline.collector.baselines import BaselineLookup, stored_watermark_or_none
    from driftline.store.db import get_engine

    engine = get_engine(config.db_url)
    baselines = BaselineLookup(engine, config.baseline_recheck_s)

    def new_folder(key: PartitionKey) -> InferenceFolder:
        topic, partition = key
        setup = FolderSetup(config.window_ms, config.lateness_ms, config.dedup_limit, segments=config.segments)
        return InferenceFolder(topic, partition, setup, baselines.get,
                               lambda model, version: stored_watermark_or_none(engine, model, version, partition),
                               lambda rows: store.store_predictions_ahead(engine, rows))

    folders = PartitionFolders(new_folder)
    freeze_long_lived()
    while True:
        if not conn.poll(0):
            # Nothing waiting: store predictions now rather than while the collector waits in `take`.
            folders.write_predictions(_IDLE_WRITE_MIN_ROWS)
        message = conn.recv()
        kind = message[0]
        if kind == "take":
            conn.send({key: _pack_delta(key, delta) for key, delta in folders.take(message[1]).items()})
        elif kind in ("process", "reset", "forget_ids", "drop"):
            getattr(folders, kind)(*message[1:])
        elif kind == "stop":
            return
        else:
            raise ValueError(f"unknown decoder message {kind!r}")
