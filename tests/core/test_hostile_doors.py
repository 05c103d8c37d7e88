"""Every door events enter by, handed one hostile corpus (tests/support/hostile_corpus.py) between ordinary events.

Per door: nothing is lost silently (each case is refused with a message naming its problem, dead-lettered with a
reason, or counted in its window as the corpus says), monitoring goes on (every ordinary event is in its window, no
model's window is lost and none is made for a hostile name), and the door's memory stays under a stated bound while
it handles the corpus. Everything runs in this process: the worker under uvicorn in a thread (OIP gRPC on its event
loop), one receiver per receiver door on a TestClient, one fresh embedded broker and one collector thread, which
reads what the worker and the receivers publish as well as the Kafka door's messages.
"""
from __future__ import annotations

import contextlib
import gc
import shutil
import time
import tracemalloc
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import httpx
import orjson
import pytest
from sqlalchemy import select

from driftline import defaults
from driftline.broker import free_port
from driftline.config import TOPIC_INFERENCE
from driftline.store import db as store_db
from driftline.store.models import DeadLetter, PredictionRecord, WindowStateRecord
from driftline.window_state import WindowState
from tests.support.collector_helpers import T0_MS, collector_thread, config, produce
from tests.support.hostile_corpus import (CASES, CE_BINARY, CE_STRUCTURED, CORPUS, DOORS, EVENTS, KAFKA,
                                          OIP_GRPC, OIP_REST, PREDICT, WORKER_DOORS, ANY_FIELD, Context, Counted,
                                          DeadLettered, GrpcCall, HttpCall, Refused, cases_for, clean, matrix)
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]  # ~17 s alone on 2 cores: over 20 s beside other tests

WORKER_MODEL = "credit-default"
DOOR_MODELS = {PREDICT: WORKER_MODEL, OIP_REST: WORKER_MODEL, OIP_GRPC: WORKER_MODEL,
               CE_BINARY: "clean-ce-binary", CE_STRUCTURED: "clean-ce-structured", EVENTS: "clean-events",
               KAFKA: "clean-kafka"}
CLEAN_BETWEEN = 2  # ordinary events before each hostile case (and after the last)
PAIR_WAIT_S = 2.0  # the unpaired half is dead-lettered by the receiver's sweeper within the run

# tracemalloc peak of this process's Python allocations while a door handles its corpus (payloads built before):
PEAK_BOUND = {
    # the worker reads at most 64 KiB a body and keeps nothing of a request but its event (~1.4 MB measured)
    PREDICT: 8 << 20, OIP_REST: 8 << 20, OIP_GRPC: 8 << 20,
    # halves wait as bytes and the 4 MiB bodies are refused on their Content-Length (~0.7 MB measured)
    CE_BINARY: 8 << 20, CE_STRUCTURED: 8 << 20,
    # the 20 000-line call: each refusal a line, a reason and a letter until the call's letters leave (~15 MB measured)
    EVENTS: 32 << 20,
    # the collector thread reading every door's events and the Kafka door's 1 MiB message (~16 MB measured)
    KAFKA: 64 << 20,
}
# The receiver's own count of waiting halves' bytes: at most two small halves of this corpus wait at once (~2.7 KB).
PENDING_BYTES_BOUND = 8 << 10
# Refusing a 4 MiB body for its two million lines needs no Python object per line (~100 bytes each: 200 MB).
LINES_PEAK_BOUND = 32 << 20
# The answer to 20 000 junk lines lists `receiver_max_errors` (100) refusals, each a line's reason: tens of KB.
ANSWER_BOUND = 64 << 10


@dataclass
class Answer:
    status: int | str  # an HTTP status, or a grpc.StatusCode name
    text: str
    size: int = 0


@dataclass
class DoorReport:
    door: str
    model: str
    markers: dict[str, str] = field(default_factory=dict)  # case -> its marker
    answers: dict[str, Answer] = field(default_factory=dict)  # case -> the answer to its last call
    clean_ids: list[str] = field(default_factory=list)  # ordinary events' request ids, as sent
    clean_failures: list[str] = field(default_factory=list)  # ordinary calls the door did not answer 200
    peak_bytes: int = 0
    pending_bytes: int = 0  # the most the receiver's waiting halves held after any call


@dataclass
class Letter:
    topic: str
    reason: str
    field: str | None
    raw: bytes


@dataclass
class Run:
    bootstrap: str
    db_url: str
    reports: dict[str, DoorReport]
    letters: list[Letter]
    windows: dict[str, dict[int, tuple[int, list[WindowState]]]]  # model -> window start -> (events, states)
    predictions: dict[str, int]  # the worker model's request id -> its window start


@contextlib.contextmanager
def traced(report: DoorReport) -> Iterator[None]:
    """The tracemalloc peak of what runs inside, into `report.peak_bytes`."""
    gc.collect()
    tracemalloc.start()
    try:
        yield
    finally:
        report.peak_bytes = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


def exercise(report: DoorReport, send: Callable[[list[Any]], Answer | None], now_ms: int,
             row: dict[str, Any] | None = None, trace: bool = True,
             then: Callable[[], None] | None = None) -> DoorReport:
    """The door's corpus, each case after `CLEAN_BETWEEN` ordinary events. `send` hands a payload to the door and
    returns its answer to the last call (None: the door does not answer, as Kafka); `row`: the worker's inputs and
    schema; `trace`: the tracemalloc peak of the calls and `then` (the rest of the door's handling) in the report."""
    door, base = report.door, {"door": report.door, "model": report.model, "now_ms": now_ms, **(row or {})}
    steps: list[tuple[str | None, str, list[Any]]] = []  # (case or None for an ordinary event, marker, payload)
    for case in [*cases_for(door), None]:
        for _ in range(CLEAN_BETWEEN):
            tick = len(steps) + 1
            marker = f"{door}.clean.{tick}.{uuid.uuid4().hex[:6]}"
            steps.append((None, marker, list(clean(Context(marker=marker, ts_ms=T0_MS + tick * 10, **base), tick))))
        if case is not None:
            marker = f"{door}.{case.name}.{uuid.uuid4().hex[:6]}"
            context = Context(marker=marker, ts_ms=T0_MS + (len(steps) + 1) * 10, **base)
            steps.append((case.name, marker, list(case.payloads[door](context))))
    # built before the door is traced: the client's payloads (4 MiB bodies) are not the door's memory
    with traced(report) if trace else contextlib.nullcontext():
        for name, marker, payload in steps:
            answer = send(payload)
            if name is None:
                report.clean_ids.append(marker)
                if answer is not None and answer.status not in (200, "OK"):
                    report.clean_failures.append(f"{marker}: {answer.status} {answer.text[:300]}")
            else:
                report.markers[name] = marker
                if answer is not None:
                    report.answers[name] = answer
        if then is not None:
            then()
    return report


# --- the worker's doors --------------------------------------------------------------------------------------------

def http_answer(response: Any) -> Answer:
    return Answer(response.status_code, response.text, len(response.content))


def worker_doors(bootstrap: str, db_url: str, tmp: Any, now_ms: int) -> dict[str, DoorReport]:
    import grpc

    from driftline.worker.dataset import generate
    from driftline.worker.publish import publish
    from driftline.worker.registry import Registry
    from driftline.worker.server import Worker, WorkerConfig
    from driftline.worker.training import TrainConfig, train_model
    from tests.support.worker_helpers import make_settings, serving

    settings = make_settings(tmp, bootstrap, db_url=db_url)
    inputs, labels = generate(1_500, 3)
    publish(Registry(settings.db_url, settings.artifacts_dir), WORKER_MODEL,
            train_model(inputs, labels, TrainConfig(size="test", epochs=1, seed=3)))
    port = free_port()
    worker = Worker(settings, WorkerConfig(model=WORKER_MODEL, device="cpu", listen_for_labels=False, alias_poll_s=0,
                                           cache_size=0, grpc_port=port, event_producer="thread", max_wait_ms=1.0))
    reports = {}
    with serving(worker) as url, httpx.Client(base_url=url, timeout=30) as client, \
            grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        row = {"inputs": dict(worker.example), "schema": list(worker.current.schema)}
        infer = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")  # bytes in, bytes out

        def send_http(calls: list[HttpCall]) -> Answer:
            answer = None
            for call in calls:
                answer = http_answer(client.post(call.path, content=call.body, headers=dict(call.headers)))
            return answer

        def send_grpc(calls: list[GrpcCall]) -> Answer:
            (call,) = calls
            raw = call.raw if call.raw is not None else call.request.SerializeToString()
            try:
                infer(raw, timeout=30)
            except grpc.RpcError as exc:
                return Answer(exc.code().name, exc.details() or "")
            return Answer("OK", "")

        for door, send in ((PREDICT, send_http), (OIP_REST, send_http), (OIP_GRPC, send_grpc)):
            reports[door] = exercise(DoorReport(door, WORKER_MODEL), send, now_ms, row)
    return reports  # leaving `serving` stopped the worker, which flushed its events to Kafka


# --- the receiver's doors ------------------------------------------------------------------------------------------

def receiver_door(door: str, bootstrap: str, db_url: str, now_ms: int) -> DoorReport:
    from fastapi.testclient import TestClient

    from driftline.receiver.app import create_app
    from driftline.receiver.service import Receiver, ReceiverConfig

    service = Receiver(ReceiverConfig(bootstrap_servers=bootstrap, db_url=db_url, pair_wait_s=PAIR_WAIT_S,
                                      sweep_interval_s=0.2))
    pending = [0]
    try:
        client = TestClient(create_app(service), base_url="http://127.0.0.1")

        def send(calls: list[HttpCall]) -> Answer:
            answer = None
            for call in calls:
                if len(call.body) > 100_000:  # every line is counted as an event before admission, junk too: a
                    service.flush()  # 20 000-line call fits only an empty buffer (503 while any event waits)
                answer = http_answer(client.post(call.path, content=call.body, headers=dict(call.headers)))
                pending[0] = max(pending[0], service.stats()["pending_bytes"])
            return answer

        def unpaired_expired() -> None:  # the unpaired half is the sweeper's to dead-letter; no other may wait
            wait_until(lambda: service.stats()["pending_halves"] == 0, timeout=PAIR_WAIT_S + 10,
                       message=f"{door}: the halves still waiting to be dead-lettered")

        report = exercise(DoorReport(door, DOOR_MODELS[door]), send, now_ms, then=unpaired_expired)
        report.pending_bytes = pending[0]
        return report
    finally:
        service.close()  # flushes the events and dead letters (to Kafka and the store)


# --- Kafka ---------------------------------------------------------------------------------------------------------

def kafka_door(bootstrap: str, now_ms: int) -> DoorReport:
    messages: list[bytes] = []

    def send(payload: list[bytes]) -> None:
        messages.extend(payload)

    report = exercise(DoorReport(KAFKA, DOOR_MODELS[KAFKA]), send, now_ms, trace=False)  # its handling: the collector
    produce(bootstrap, messages)
    return report


def topic_size(bootstrap: str) -> int:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        partitions = [TopicPartition(TOPIC_INFERENCE, p) for p in consumer.partitions_for_topic(TOPIC_INFERENCE)]
        return sum(consumer.end_offsets(partitions).values())
    finally:
        consumer.close()


def expected_events(reports: dict[str, DoorReport]) -> dict[str, int]:
    """Events each model's windows must hold: its ordinary events and the counted cases."""
    out: dict[str, int] = {}
    for door, report in reports.items():
        counted = sum(case.expect[door].events for case in cases_for(door) if isinstance(case.expect[door], Counted))
        out[report.model] = out.get(report.model, 0) + len(report.clean_ids) + counted
    return out


def store_events(db_url: str) -> dict[str, int]:
    with store_db.session_scope(db_url) as session:
        out: dict[str, int] = {}
        for model, events in session.execute(select(WindowStateRecord.model, WindowStateRecord.events)):
            out[model] = out.get(model, 0) + events
        return out


def letter_markers(db_url: str) -> list[bytes]:
    with store_db.session_scope(db_url) as session:
        return [raw or b"" for raw in session.scalars(select(DeadLetter.raw))]


@pytest.fixture(scope="module")
def run(embedded_broker_factory, _sqlite_template, tmp_path_factory) -> Run:
    """The corpus through every door, then one collector over everything published; the store as it ended."""
    tmp = tmp_path_factory.mktemp("hostile-doors")
    shutil.copyfile(_sqlite_template, tmp / "driftline.db")  # a fresh migrated store, as `sqlite_url` makes
    db_url = f"sqlite:///{tmp / 'driftline.db'}"
    bootstrap = embedded_broker_factory().bootstrap_servers  # fresh: the collector reads only this run's messages
    now_ms = int(time.time() * 1000)

    reports = worker_doors(bootstrap, db_url, tmp, now_ms)
    for door in (CE_BINARY, CE_STRUCTURED, EVENTS):
        reports[door] = receiver_door(door, bootstrap, db_url, now_ms)
    reports[KAFKA] = kafka_door(bootstrap, now_ms)

    total = topic_size(bootstrap)
    want = expected_events(reports)
    kafka_letters = [marker.encode() for name, marker in reports[KAFKA].markers.items()
                     if isinstance(CASES[name].expect[KAFKA], DeadLettered)]
    with traced(reports[KAFKA]), collector_thread(config(bootstrap, db_url, decoders=0)) as collector:
        def settled() -> bool:
            got = store_events(db_url)
            letters = letter_markers(db_url)
            return (collector.consumed >= total and not collector._pending()
                    and all(got.get(model, 0) >= n for model, n in want.items())
                    and all(any(marker in raw for raw in letters) for marker in kafka_letters))

        wait_until(settled, timeout=120, interval=0.2,
                   message=f"the collector to read all {total} messages and store their windows and letters")

    with store_db.session_scope(db_url) as session:
        letters = [Letter(d.topic, d.reason, d.field, d.raw or b"") for d in session.scalars(select(DeadLetter))]
        windows: dict[str, dict[int, tuple[int, list[WindowState]]]] = {}
        for row in session.scalars(select(WindowStateRecord)):
            of_model = windows.setdefault(row.model, {})
            events, states = of_model.get(row.window_start_ms, (0, []))
            of_model[row.window_start_ms] = (events + row.events, [*states, WindowState.from_bytes(row.state)])
        predictions = {p.request_id: p.window_start_ms for p in session.scalars(
            select(PredictionRecord).where(PredictionRecord.model == WORKER_MODEL))}
    store_db.get_engine(db_url).dispose()
    return Run(bootstrap, db_url, reports, letters, windows, predictions)


def test_the_corpus_gives_every_door_an_outcome_or_a_reason():
    assert len(CORPUS) == 19
    for case in CORPUS:
        for door in DOORS:
            assert door in case.expect or case.not_applicable.get(door), (case.name, door)
    assert all(cases_for(door) for door in DOORS)
    assert "model-path" in matrix()


def _letters_of(run: Run, marker: str) -> list[Letter]:
    return [letter for letter in run.letters if marker.encode() in letter.raw]


@pytest.mark.parametrize("door", DOORS)
def test_nothing_is_lost_silently(run, door):
    report = run.reports[door]
    problems = []
    for case in cases_for(door):
        outcome, marker = case.expect[door], report.markers[case.name]
        answer, letters = report.answers.get(case.name), _letters_of(run, marker)
        got = f"answered {answer.status} {answer.text[:300]!r}" if answer else "no answer"
        reasons = [(letter.reason[:200], letter.field) for letter in letters]
        if isinstance(outcome, Refused):
            if answer is None or answer.status != outcome.status or not all(w in answer.text for w in outcome.words):
                problems.append(f"{case.name}: expected {outcome.status} naming {outcome.words}, {got}")
            if letters:
                problems.append(f"{case.name}: refused at the door, yet dead-lettered: {reasons}")
        elif isinstance(outcome, DeadLettered):
            if outcome.status is not None and (answer is None or answer.status != outcome.status):
                problems.append(f"{case.name}: expected the door to answer {outcome.status}, {got}")
            named = [letter for letter in letters if outcome.words in letter.reason
                     and (outcome.field == ANY_FIELD or letter.field == outcome.field)]
            if len(letters) != outcome.letters or not named or not all(letter.reason for letter in letters):
                problems.append(f"{case.name}: expected {outcome.letters} dead letter(s), one saying "
                                f"{outcome.words!r} (field {outcome.field!r}); found {reasons}")
        else:
            assert isinstance(outcome, Counted)
            if outcome.status is not None and (answer is None or answer.status != outcome.status):
                problems.append(f"{case.name}: expected {outcome.status}, {got}")
            states = [s for _, states in run.windows.get(report.model, {}).values() for s in states]
            if letters or not outcome.check(states):
                problems.append(f"{case.name}: expected counted as {outcome.what} in {report.model}'s window "
                                f"({outcome.check.__doc__}); letters {reasons}")
    assert not problems, "\n".join(problems)


def test_a_flood_of_junk_lines_gets_a_small_answer(run):
    answer = run.reports[EVENTS].answers["invalid-lines-20000"]
    result = orjson.loads(answer.text)
    assert answer.size < ANSWER_BOUND, f"{answer.size} bytes of answer to 20 000 junk lines"
    assert result["dead_lettered"] == 20_000 and len(result["errors"]) == defaults.RECEIVER_MAX_ERRORS
    assert result["errors_left_out"] == 20_000 - defaults.RECEIVER_MAX_ERRORS


def test_no_ordinary_event_is_dead_lettered(run):
    stray = [(letter.topic, letter.reason[:200]) for letter in run.letters
             if not any(marker.encode() in letter.raw for report in run.reports.values()
                        for marker in report.markers.values())]
    assert not stray, stray


def test_no_window_is_lost_and_none_is_made_for_a_hostile_name(run):
    got = {model: sum(events for events, _ in windows.values()) for model, windows in run.windows.items()}
    assert got == expected_events(run.reports)


@pytest.mark.parametrize("door", DOORS)
def test_monitoring_goes_on(run, door):
    report = run.reports[door]
    assert not report.clean_failures, report.clean_failures
    want = expected_events(run.reports)
    windows = run.windows.get(report.model, {})
    assert sum(events for events, _ in windows.values()) == want[report.model]
    if door in WORKER_DOORS:  # the worker stamps its own times: each window holds the events stored in it
        missing = [rid for rid in report.clean_ids if rid not in run.predictions]
        assert not missing, f"{len(missing)} ordinary events of {door} not stored: {missing[:5]}"
        per_window: dict[int, int] = {}
        for start in run.predictions.values():
            per_window[start] = per_window.get(start, 0) + 1
        assert {start: events for start, (events, _) in windows.items()} == per_window
    else:  # every event of the door was stamped within the first minute after T0
        assert {start: events for start, (events, _) in windows.items()} == {T0_MS: want[report.model]}


@pytest.mark.parametrize("door", DOORS)
def test_memory_stays_bounded(run, door):
    report = run.reports[door]
    assert 0 < report.peak_bytes < PEAK_BOUND[door], f"{door}: tracemalloc peak {report.peak_bytes / 1e6:.1f} MB"
    if door in (CE_BINARY, CE_STRUCTURED, EVENTS):
        assert report.pending_bytes <= PENDING_BYTES_BOUND, f"{door}: {report.pending_bytes} bytes of halves waited"


def test_bytes_that_are_not_protobuf_are_invalid_argument(run):
    assert run.reports[OIP_GRPC].answers["not-json"].status == "INVALID_ARGUMENT"


def test_a_body_of_millions_of_lines_is_refused_without_an_object_per_line(run):
    from fastapi.testclient import TestClient

    from driftline.receiver.app import create_app
    from driftline.receiver.service import Receiver, ReceiverConfig

    service = Receiver(ReceiverConfig(bootstrap_servers=run.bootstrap, db_url=run.db_url, store_dead_letters=False))
    try:
        client = TestClient(create_app(service), base_url="http://127.0.0.1")
        body = b"x\n" * (defaults.RECEIVER_MAX_BODY_BYTES // 2)  # within the byte budget: 4 MiB of two-byte lines
        report = DoorReport(EVENTS, "none")
        with traced(report):
            answer = client.post("/events", content=body, headers={"content-type": "application/x-ndjson"})
        assert answer.status_code == 413 and "more than the" in answer.json()["detail"], answer.text
        assert report.peak_bytes < LINES_PEAK_BOUND, f"{report.peak_bytes / 1e6:.0f} MB to refuse a 4 MiB body"
    finally:
        service.close(timeout_s=2)

