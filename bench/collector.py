"""End-to-end collector rate (broker -> window states in the store) beside its Kafka client's raw read rate.

Run by hand: `.venv/bin/python bench/collector.py [--events 300000] [--db URL]`. Prints figures,
asserts nothing. Starts its own embedded broker and (by default) a fresh SQLite store for each
run, so that no run finds its predictions stored already. Events go onto the topic lz4-compressed,
as the worker sends them (`--compression none` for uncompressed).

* raw: a group consumer of each client (kafka-python, and librdkafka through confluent-kafka) reading
  the same topic, nothing else: the peer of the collector runs on that client;
* raw + orjson.loads: the kafka-python one, decoding every value;
* source: the collector's own read path on each client (`RecordSource.poll`, kafka-python's with the lean
  record reader), with the CPU per event of the polling thread, the thread the collector's loop runs on;
* collector: `driftline collector` in its own process (so its memory is its own): decode,
  validate, window, fold, store predictions for the label join, flush every second with
  the offsets - once with everything in that process (`--decoders 0`) and once with decoding
  and folding in decoder processes (`--decoders auto`); then two collectors in one group (the
  partitions split between them). Each run uses a fresh group, so each reads all N events.
  `--kafka-clients confluent kafka-python` (the default) repeats every run on each client
  (`driftline collector --kafka-client`) and prints it against that client's raw rate.
  `--runs 1:auto 1:auto:kafka-python` compares the record-batch readers (driftline.collector.record_batches)
  in one run. Extra collector options go after `--`.
  `--segment-columns 0 1 3` repeats each run with that many `[segments]` columns (region, then
  segment and channel) and prints each one's rate and stored window-state bytes per window
  against the run without segments.

Events carry 20 features (17 numeric, 3 categorical) and a request id (time-ordered, as the
worker and `InferenceLogger` make them; `--request-ids random` for uuid4); event times advance
so that windows open and close during the run (memory must stay flat: RSS is printed
over time). Aims: >= 60 % of the raw rate and >= 80 000 events/s per process.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
from sqlalchemy import delete, func, select

from driftline.baseline import compute_baseline
from driftline.broker import EmbeddedBroker, free_port
from driftline.client import PRODUCER_COMPRESSION, new_id
from driftline.config import TOPIC_INFERENCE
from driftline.events import INFERENCE_SCHEMA, rfc3339
from driftline.store import db as store_db
from driftline.store.models import BaselineRecord, PredictionRecord, WindowStateRecord

MODEL, VERSION = "bench-model", "1"
NUMERIC = [f"num_{k}" for k in range(17)]
CATEGORICAL = {"region": ["north", "south", "east", "west"], "segment": ["a", "b", "c"], "channel": ["web", "app"]}
TIME_LIMIT_S = 120.0
_SCRIPT = Path(sys.executable).with_name("driftline")
# Without the installed script (packages unpacked with `pip install --target`, as on the GPU machine), the module.
DRIFTLINE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "driftline"]


def make_events(n: int, events_per_window: int, request_ids: str, seed: int = 0) -> list[bytes]:
    rng = np.random.default_rng(seed)
    make_id = new_id if request_ids == "client" else lambda: uuid.uuid4().hex
    start = (int(time.time() * 1000) - 86_400_000) // 60_000 * 60_000  # on a window bound
    numbers = rng.normal(0, 1, (n, len(NUMERIC))) + np.arange(len(NUMERIC))
    out = []
    for i in range(n):
        features = dict(zip(NUMERIC, numbers[i].round(4).tolist()))
        for name, values in CATEGORICAL.items():
            features[name] = values[i % len(values)]
        out.append(orjson.dumps({
            "schema": INFERENCE_SCHEMA, "event_id": new_id(), "request_id": make_id(),
            "ts": rfc3339(start + i * 60_000 // events_per_window), "model": MODEL, "version": VERSION,
            "features": features,
            "prediction": float(numbers[i, 0] % 1.0), "latency_ms": {"total": 12.3, "queue": 4.1, "compute": 7.9},
            "status": "ok", "batch_size": 8, "cache_hit": False}))
    return out


def produce(bootstrap: str, messages: list[bytes], compression: str | None = PRODUCER_COMPRESSION) -> float:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, acks=1, linger_ms=20,
                             batch_size=262_144, max_request_size=8 << 20, compression_type=compression)
    started = time.perf_counter()
    for i, value in enumerate(messages):
        producer.send(TOPIC_INFERENCE, key=str(i).encode(), value=value)
    producer.flush()
    elapsed = time.perf_counter() - started
    producer.close()
    return len(messages) / elapsed


def raw_consume(bootstrap: str, n: int, decode: bool) -> float:
    """Events/s of a bare group consumer, timed from its first record (the group join excluded)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=f"bench-raw-{uuid.uuid4().hex[:8]}",
                             enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=2000,
                             heartbeat_interval_ms=500, max_poll_records=5000, max_partition_fetch_bytes=8 << 20,
                             fetch_max_bytes=64 << 20)
    consumer.subscribe([TOPIC_INFERENCE])
    seen, first, deadline = 0, None, time.monotonic() + TIME_LIMIT_S
    loads = orjson.loads
    while seen < n and time.monotonic() < deadline:
        batches = consumer.poll(timeout_ms=200, max_records=5000)
        for records in batches.values():
            if first is None:
                first = time.perf_counter()
            if decode:
                for r in records:
                    loads(r.value)
            seen += len(records)
    elapsed = time.perf_counter() - (first or time.perf_counter())
    consumer.close(autocommit=False)
    return seen / elapsed if elapsed > 0 else 0.0


def raw_consume_confluent(bootstrap: str, n: int) -> float:
    """Events/s of a bare librdkafka group consumer (each value taken), timed from its first record."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-raw-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 2000,
                         "heartbeat.interval.ms": 500, "max.partition.fetch.bytes": 8 << 20,
                         "fetch.max.bytes": 64 << 20, "receive.message.max.bytes": 65 << 20})
    consumer.subscribe([TOPIC_INFERENCE])
    seen, first, deadline = 0, None, time.monotonic() + TIME_LIMIT_S
    while seen < n and time.monotonic() < deadline:
        for message in consumer.consume(5000, 0.2):
            if message.error() is None:
                if first is None:
                    first = time.perf_counter()
                message.value()
                seen += 1
    elapsed = time.perf_counter() - (first or time.perf_counter())
    consumer.close()
    return seen / elapsed if elapsed > 0 else 0.0


def source_read(bootstrap: str, n: int, client: str) -> tuple[float, float]:
    """(events/s, polling-thread CPU µs per event) of the collector's `RecordSource` on `client`, from its
    first record; every partition is read from its beginning, as a placement without stored offsets does."""
    from driftline.collector.config import CollectorConfig
    from driftline.collector.record_source import open_record_source

    cfg = CollectorConfig(bootstrap, "sqlite://", group_id=f"bench-source-{uuid.uuid4().hex[:8]}",
                          session_timeout_ms=2000, heartbeat_interval_ms=500, kafka_client=client)
    assigned: list = []
    source = open_record_source(cfg, assigned.extend, lambda _partitions: None)
    seen, placed, first, cpu_first = 0, False, None, 0.0
    deadline = time.monotonic() + TIME_LIMIT_S
    try:
        while seen < n and time.monotonic() < deadline:
            batches = source.poll(0.2, 5000)
            if assigned and not placed:  # librdkafka's partitions start paused until placed (ConfluentSource)
                for tp in source.assignment():
                    source.seek(tp, None)
                source.resume(source.assignment())
                placed = True
            for records in batches.values():
                if first is None:
                    first, cpu_first = time.perf_counter(), time.thread_time()
                for record in records:
                    record.value  # noqa: B018 (what the collector reads of each record)
                seen += len(records)
        elapsed, cpu = time.perf_counter() - (first or time.perf_counter()), time.thread_time() - cpu_first
    finally:
        source.close()
    return (seen / elapsed if elapsed > 0 else 0.0), (cpu / seen * 1e6 if seen else 0.0)


def register_baseline(url: str) -> None:
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({name: rng.normal(k, 1, 5000) for k, name in enumerate(NUMERIC)})
    for name, values in CATEGORICAL.items():
        frame[name] = rng.choice(values, 5000)
    baseline = compute_baseline(frame, categorical=list(CATEGORICAL), predictions=rng.random(5000))
    with store_db.session_scope(url) as session:
        session.add(BaselineRecord(model=MODEL, version=VERSION, rows=5000, summary=baseline.to_dict(), source="bench"))


def fresh_store(url: str) -> None:
    """Migrate `url` and leave it holding the bench model's baseline and nothing else of it."""
    store_db.upgrade(url)
    with store_db.session_scope(url) as session:
        for table in (WindowStateRecord, PredictionRecord, BaselineRecord):
            session.execute(delete(table).where(table.model == MODEL))
    register_baseline(url)


def segments_options(tmp: str, columns: int) -> list[str]:
    """`--config` with a [segments] table of the first `columns` categorical features (none: no option)."""
    if not columns:
        return []
    path = Path(tmp) / f"segments-{columns}.toml"
    path.write_text(f"[segments]\ncolumns = {list(CATEGORICAL)[:columns]!r}\n".replace("'", '"'))
    return ["--config", str(path)]


def _metric(port: int, name: str) -> float:
    import urllib.request

    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
    except OSError:
        return 0.0
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def run_collectors(bootstrap: str, url: str, n: int, processes: int, extra: list[str], broker_pid: int | None = None,
                   ) -> tuple[float, float, list[tuple[float, int, float]], dict[str, float]]:
    """`processes` x `driftline collector` in one group, each in its own process.

    Returns the aggregate rate (timed from the first record consumed to the moment all N are
    stored, i.e. consumed with nothing pending), the steady rate in the middle of the run
    (`_steady_rate`), samples (s, consumed, RSS MB of the largest)
    and the CPU seconds spent until then by the collector processes, their decoders and the broker.
    """
    group = f"bench-{uuid.uuid4().hex[:8]}"
    ports = [free_port() for _ in range(processes)]
    started = time.perf_counter()
    procs = [subprocess.Popen([*DRIFTLINE, "collector", "--bootstrap-servers", bootstrap, "--db", url, "--group-id",
                               group, "--metrics-port", str(port), "--session-timeout-ms", "2000",
                               "--heartbeat-interval-ms", "500", "--log-level", "warning", *extra])
             for port in ports]
    samples: list[tuple[float, int, float]] = []
    first = done = None
    broker_cpu_before = _cpu_s(broker_pid) if broker_pid else 0.0
    cpu: dict[str, float] = {}
    try:
        while time.perf_counter() - started < TIME_LIMIT_S and all(p.poll() is None for p in procs):
            consumed = sum(int(_metric(port, "driftline_collector_messages_consumed_total")) for port in ports)
            pending = sum(int(_metric(port, "driftline_collector_pending_messages")) for port in ports)
            now = time.perf_counter()
            if consumed and first is None:
                first = now
                cpu_at_first = _process_cpu(procs)  # start-up (imports, joining the group) left out
            rss = max(_rss_mb(p.pid) for p in procs)
            samples.append((now - started, consumed, rss))
            if consumed >= n and pending == 0:
                done = now
                cpu = {name: seconds - cpu_at_first[name] for name, seconds in _process_cpu(procs).items()}
                cpu["broker"] = (_cpu_s(broker_pid) - broker_cpu_before) if broker_pid else 0.0
                break
            time.sleep(0.05 if first is None else 0.25)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
    if done is None or first is None:
        return 0.0, 0.0, samples, cpu
    return n / (done - first), _steady_rate(samples, n), samples, cpu


def _steady_rate(samples: list[tuple[float, int, float]], n: int) -> float:
    """Events/s consumed from 20 % to 80 % of the run (interpolated between samples): the rate
    without the start (decoders warming up) and the tail (the last flush waits for its interval).
    Consumption runs at most COLLECTOR_FLUSH_MAX_EVENTS ahead of the store, so in the middle of a
    long run it goes at the storing rate."""
    def time_at(count: float) -> float:
        for (t0, c0, _), (t1, c1, _) in zip(samples, samples[1:]):
            if c0 <= count <= c1 and c1 > c0:
                return t0 + (t1 - t0) * (count - c0) / (c1 - c0)
        return float("nan")

    low, high = 0.2 * n, 0.8 * n
    return (high - low) / (time_at(high) - time_at(low))


def _process_cpu(procs: list[subprocess.Popen]) -> dict[str, float]:
    return {"collector": sum(_cpu_s(p.pid) for p in procs),
            "decoders": sum(_cpu_s(c) for p in procs for c in _children(p.pid))}


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process so far."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    """Resident memory of a collector with its decoder processes (its children)."""
    total = 0.0
    for proc in [pid] + _children(pid):
        try:
            with open(f"/proc/{proc}/statm") as fh:
                total += int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
        except OSError:
            pass
    return total


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--events-per-window", type=int, default=20_000)
    parser.add_argument("--runs", nargs="+", default=["1:0", "1:auto", "2:auto"],
                        help="collector runs as PROCESSES:DECODERS[:RECORD_READER] (one group each run; "
                             "RECORD_READER lean, the default, or kafka-python)")
    parser.add_argument("--kafka-clients", nargs="+", default=["confluent", "kafka-python"],
                        choices=["confluent", "kafka-python"], help="repeat each run on these collector clients")
    parser.add_argument("--compression", default=PRODUCER_COMPRESSION, choices=["lz4", "none"],
                        help="how the events are compressed on the topic (default: as the worker sends them)")
    parser.add_argument("--request-ids", default="client", choices=["client", "random"],
                        help="request ids as the worker and InferenceLogger make them (time-ordered UUIDv7, "
                             "the default) or wholly random (uuid4, as a team's own ids may be)")
    parser.add_argument("--db", default=None,
                        help="store URL, a scratch database (default: a fresh SQLite file per run); migrated "
                             "here, and the bench model's rows are deleted before each run")
    parser.add_argument("--segment-columns", nargs="+", type=int, default=[0], choices=range(len(CATEGORICAL) + 1),
                        help="repeat each run with this many [segments] columns (e.g. 0 1 3), the same events")
    parser.add_argument("collector_options", nargs="*", help="extra `driftline collector` options (after --)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(port=free_port(), partitions=4) as broker:
        url = args.db or f"sqlite:///{tmp}/bench-0.db"
        messages = make_events(args.events, args.events_per_window, args.request_ids)
        print(f"{len(messages)} events of ~{sum(map(len, messages[:100])) // 100} bytes, 20 features, "
              f"{args.events_per_window} per 60 s window ({args.events // args.events_per_window} windows), "
              f"{args.compression} compression, {args.request_ids} request ids, store {url.split(':')[0]}, "
              f"{os.cpu_count()} CPUs, "
              f"load {os.getloadavg()[0]:.1f}")
        produced = produce(broker.bootstrap_servers, messages,
                           None if args.compression == "none" else args.compression)
        del messages
        print(f"produce (kafka-python)          {produced:>10,.0f} events/s")
        raw = raw_consume(broker.bootstrap_servers, args.events, decode=False)
        print(f"raw consume (kafka-python)      {raw:>10,.0f} events/s")
        raw_rates = {"kafka-python": raw}
        if "confluent" in args.kafka_clients:
            raw_rates["confluent"] = raw_consume_confluent(broker.bootstrap_servers, args.events)
            print(f"raw consume (confluent)         {raw_rates['confluent']:>10,.0f} events/s  "
                  f"({raw_rates['confluent'] / raw:.1f}x kafka-python)")
        decoded = raw_consume(broker.bootstrap_servers, args.events, decode=True)
        print(f"raw consume + orjson.loads      {decoded:>10,.0f} events/s  ({decoded / raw:.0%} of raw)")
        for client in args.kafka_clients:
            rate, cpu = source_read(broker.bootstrap_servers, args.events, client)
            print(f"source ({client}){'':<{16 - len(client)}} {rate:>10,.0f} events/s  ({rate / raw_rates[client]:.0%} of "
                  f"its raw), polling thread {cpu:.2f} us CPU per event")
        plain: dict[str, tuple[float, float]] = {}  # run -> (rate, state bytes per window) without segments
        for index, (client, run, columns) in enumerate((client, run, columns) for client in args.kafka_clients
                                                       for run in args.runs for columns in args.segment_columns):
            count, decoders, *reader = run.split(":")
            count = int(count)
            reader_options = ["--record-reader", reader[0]] if reader else []
            reader_options += ["--kafka-client", client]
            raw = raw_rates[client]
            # Every run starts from an empty store: a later run would otherwise find its
            # predictions stored already (the same events), and skip the inserts that cost most.
            url = args.db or f"sqlite:///{tmp}/bench-{index}.db"
            fresh_store(url)
            rate, steady, samples, cpu = run_collectors(broker.bootstrap_servers, url, args.events, count,
                                                ["--decoders", decoders, *reader_options,
                                                 *segments_options(tmp, columns), *args.collector_options],
                                                broker_pid=broker.process.pid if broker.process else None)
            label = f"{client} x{count}, decoders {decoders}" + (f", {reader[0]}" if reader else "") + (
                f", {columns} segment columns" if args.segment_columns != [0] else "")
            print(f"{label:<31} {rate:>10,.0f} events/s  ({rate / raw:.0%} of its raw); "
                  f"steady (20-80 % of the run) {steady:,.0f}/s ({steady / raw:.0%})")
            if cpu:
                print("  CPU per event: " + ", ".join(f"{name} {seconds / args.events * 1e6:.1f} us"
                                                      for name, seconds in cpu.items()))
            if run == "1:auto":
                print("  RSS over the run (s, messages consumed, MB of the largest collector with its decoders):")
                step = max(len(samples) // 12, 1)
                for t, consumed, mb in samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else []):
                    print(f"    {t:6.1f} s  {consumed:>9,}  {mb:7.1f} MB")
            with store_db.session_scope(url) as session:
                stored, windows, state_bytes = session.execute(
                    select(func.sum(WindowStateRecord.events),
                           func.count(func.distinct(WindowStateRecord.window_start_ms)),
                           func.sum(func.length(WindowStateRecord.state)))
                    .where(WindowStateRecord.model == MODEL)).one()
            per_window = (state_bytes or 0) / max(windows or 0, 1)
            print(f"  stored: {stored} events in {windows} windows (expected {args.events}), window states "
                  f"{per_window / 1024:,.1f} KB per window (all partitions' rows)")
            if columns == 0:
                plain[client + run] = (rate, per_window)
            elif client + run in plain and plain[client + run][0] and plain[client + run][1]:
                print(f"  against no segments: rate {rate / plain[client + run][0]:.2f}x, "
                      f"state per window {per_window / plain[client + run][1]:.2f}x")
            if not args.db:  # a run's SQLite file holds ~250 bytes per event: freed before the next run
                store_db.get_engine(url).dispose()
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{tmp}/bench-{index}.db{suffix}").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
