"""One corpus of hostile inputs, and what each door events enter by must make of each.

The doors (`DOORS`): the worker's `POST /predict`, its Open Inference Protocol over REST and gRPC, the receiver's
KServe CloudEvents in binary and structured mode, its `POST /events` (JSON lines), and Kafka
(`driftline.inference`, read by the collector). A `HostileCase` says what the input is, how to build it for each
door it applies to (`payloads`: door -> builder, called only when the door is exercised, so the large payloads are
made lazily), what that door must make of it (`expect`), and, for every other door, why it does not apply
(`not_applicable`). The outcomes:

* `Refused`: the door answers a 4xx (or a gRPC status) whose message names the problem; nothing is taken, so no
  dead letter and no window holds it;
* `DeadLettered`: the door takes it (or answers a 4xx listing it) and it is in the store's dead letters with a
  reason naming the problem;
* `Counted`: a valid event by the contract whose value is a data-quality finding: its window counts it (the
  `check` on the window states of the door's model says how) and no sum is poisoned.

Every payload carries `ctx.marker` (in its ids and in its bytes) so that its dead letters can be found by it.
tests/core/test_hostile_doors.py runs the corpus against every door.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import orjson

from driftline import defaults
from driftline.events import INFERENCE_SCHEMA, MAX_EVENT_BYTES, REQUEST_ID_CHARS, rfc3339

PREDICT = "predict"  # worker POST /predict
OIP_REST = "oip-rest"  # worker POST /v2/models/{name}/infer
OIP_GRPC = "oip-grpc"  # worker inference.GRPCInferenceService/ModelInfer
CE_BINARY = "ce-binary"  # receiver POST /, ce-* headers
CE_STRUCTURED = "ce-structured"  # receiver POST /, application/cloudevents+json (and -batch+json)
EVENTS = "events"  # receiver POST /events, JSON lines
KAFKA = "kafka"  # driftline.inference, read by the collector
DOORS = (PREDICT, OIP_REST, OIP_GRPC, CE_BINARY, CE_STRUCTURED, EVENTS, KAFKA)
WORKER_DOORS = (PREDICT, OIP_REST, OIP_GRPC)
HTTP_DOORS = (PREDICT, OIP_REST, CE_BINARY, CE_STRUCTURED, EVENTS)
CLOUDEVENT_DOORS = (CE_BINARY, CE_STRUCTURED)
EVENT_DOORS = (EVENTS, KAFKA)  # a whole contract event, written by the producer

REQUEST_TYPE = "org.kubeflow.serving.inference.request"
RESPONSE_TYPE = "org.kubeflow.serving.inference.response"
FOREIGN_HOST = "evil.example"  # a DNS-rebinding page's own name
DAY_MS = 86_400_000
NUMERIC = "age"  # a numeric input of the worker's model (and one of its features)
WORKER_MAX_BODY = defaults.WORKER_MAX_BODY_BYTES
RECEIVER_MAX_BODY = defaults.RECEIVER_MAX_BODY_BYTES


# --- what a door is handed ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class HttpCall:
    path: str
    body: bytes
    headers: Mapping[str, str]


@dataclass(frozen=True)
class GrpcCall:
    """A ModelInfer call: `request` (a ModelInferRequest), or `raw` bytes sent as the message as they are."""

    request: Any = None
    raw: bytes | None = None


Payload = Sequence[Any]  # the calls (HttpCall, GrpcCall) or Kafka messages (bytes) of one case, in order


@dataclass(frozen=True)
class Context:
    """What a builder needs of the door it builds for."""

    door: str
    model: str  # the door's clean model: the counted cases' events land in its windows
    marker: str  # unique to (door, case): in the payload's ids and bytes
    ts_ms: int  # event time of the door's events (the worker stamps its own)
    now_ms: int  # the wall clock when the corpus is built
    inputs: Mapping[str, Any] = field(default_factory=dict)  # one valid row of the worker's inputs
    schema: Sequence[Mapping[str, Any]] = ()  # the worker's input schema ({"name", "kind", ...})
    version: str = "1"


# --- outcomes ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Refused:
    """Refused at the door: `status` (an HTTP status, or a grpc.StatusCode name) with every one of `words` in the
    message; nothing taken."""

    status: int | str
    words: tuple[str, ...]


ANY_FIELD = "<any>"


@dataclass(frozen=True)
class DeadLettered:
    """In the store's dead letters with `words` in a reason (and `field`, unless ANY_FIELD); `status`: what the door
    answers the case's last call (None: no answer, as for Kafka); `letters`: how many letters it leaves."""

    words: str
    field: str | None = ANY_FIELD
    status: int | None = None
    letters: int = 1


@dataclass(frozen=True)
class Counted:
    """Accepted: `events` more events in the windows of the door's model; `check(states)` on those window states
    says the value was counted as `what`. No dead letter."""

    what: str
    check: Callable[[Sequence[Any]], bool]
    status: int | None = 200
    events: int = 1


Outcome = Refused | DeadLettered | Counted


@dataclass(frozen=True)
class HostileCase:
    name: str
    what: str
    payloads: Mapping[str, Callable[[Context], Payload]]  # door -> builder
    expect: Mapping[str, Outcome]  # door -> outcome; the same doors as `payloads`
    not_applicable: Mapping[str, str] = field(default_factory=dict)  # door -> why the case cannot reach it

    def __post_init__(self) -> None:
        if set(self.payloads) != set(self.expect):
            raise ValueError(f"{self.name}: builders for {sorted(self.payloads)}, outcomes for {sorted(self.expect)}")
        unnamed = set(DOORS) - set(self.expect) - set(self.not_applicable)
        if unnamed or set(self.expect) & set(self.not_applicable):
            raise ValueError(f"{self.name}: every door needs an outcome or a reason, one of them ({unnamed})")

    @property
    def doors(self) -> tuple[str, ...]:
        return tuple(door for door in DOORS if door in self.expect)


# --- ordinary payloads, per door (the clean traffic, and the base of the header cases) -----------------------------

def predict_body(ctx: Context, request_id: str, **changes: Any) -> dict[str, Any]:
    return {"features": dict(ctx.inputs), "request_id": request_id, **changes}


def oip_body(ctx: Context, request_id: str, rows: int = 1, changes: Mapping[str, Any] | None = None,
             extra: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """An OIP v2 infer body: one [rows, 1] tensor per input, each row the context's inputs with `changes`."""
    row = {**ctx.inputs, **(changes or {})}
    inputs = [{"name": entry["name"], "datatype": "FP64" if entry["kind"] == "numeric" else "BYTES",
               "shape": [rows, 1], "data": [row[entry["name"]]] * rows} for entry in ctx.schema]
    return {"id": request_id, "inputs": [*inputs, *extra]}


def grpc_request(ctx: Context, request_id: str, rows: int = 1, changes: Mapping[str, Any] | None = None,
                 extra: Sequence[tuple[str, list[float]]] = (), model: str | None = None) -> GrpcCall:
    """A ModelInferRequest of typed contents (what a plain grpcio client sends)."""
    from tritonclient.grpc import service_pb2

    row = {**ctx.inputs, **(changes or {})}
    request = service_pb2.ModelInferRequest(model_name=model or ctx.model, id=request_id)
    for entry in ctx.schema:
        tensor = request.inputs.add(name=entry["name"], shape=[rows, 1])
        if entry["kind"] == "numeric":
            tensor.datatype = "FP64"
            tensor.contents.fp64_contents.extend([float(row[entry["name"]])] * rows)
        else:
            tensor.datatype = "BYTES"
            tensor.contents.bytes_contents.extend([str(row[entry["name"]]).encode()] * rows)
    for name, values in extra:
        tensor = request.inputs.add(name=name, shape=[1, len(values)], datatype="FP64")
        tensor.contents.fp64_contents.extend(values)
    return GrpcCall(request)


def contract_event(ctx: Context, event_id: str | None = None, **changes: Any) -> dict[str, Any]:
    """A valid inference event of the door's model (`changes` replace fields; None removes one)."""
    marker = event_id or ctx.marker
    doc = {"schema": INFERENCE_SCHEMA, "event_id": marker, "request_id": marker, "ts": ctx.ts_ms,
           "model": ctx.model, "version": ctx.version, "features": {"x": 1.0, "color": "red"}, "prediction": 0.4,
           "latency_ms": {"total": 3.0}, "status": "ok"}
    doc.update(changes)
    return {key: value for key, value in doc.items() if value is not None}


def kserve_request(ctx: Context, rows: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    return {"id": ctx.marker, "instances": list(rows or [{"x": 1.0, "color": "red"}])}


def kserve_response(ctx: Context, rows: int = 1) -> dict[str, Any]:
    return {"id": ctx.marker, "predictions": [0.4] * rows}


def half(ctx: Context, kind: str, data: Any, ce_id: str | None = None, time_ms: float | None = None,
         model: str | None = None, raw: bytes | None = None) -> HttpCall:
    """One KServe logger half for the door's mode; `raw`: the data's bytes as they are (not JSON)."""
    attributes = {"id": ce_id or ctx.marker, "type": REQUEST_TYPE if kind == "request" else RESPONSE_TYPE,
                  "source": "http://localhost:9081/", "specversion": "1.0",
                  "time": rfc3339(ctx.ts_ms if time_ms is None else time_ms),
                  "inferenceservicename": model or ctx.model}
    body = raw if raw is not None else orjson.dumps(data)
    path = f"/?version={ctx.version}"
    if ctx.door == CE_BINARY:
        headers = {f"ce-{name}": value for name, value in attributes.items()}
        return HttpCall(path, body, {**headers, "content-type": "application/json"})
    if raw is not None:  # structured mode has no room for bytes that are not JSON: the whole document is not JSON
        document = orjson.dumps({**attributes, "data": "@"}).replace(b'"@"', raw)
    else:
        document = orjson.dumps({**attributes, "data": data})
    return HttpCall(path, document, {"content-type": "application/cloudevents+json"})


def lines(*docs: Any) -> HttpCall:
    body = b"\n".join(doc if isinstance(doc, bytes) else orjson.dumps(doc) for doc in docs)
    return HttpCall("/events", body, {"content-type": "application/x-ndjson"})


def clean(ctx: Context, index: int) -> Payload:
    """One ordinary event's worth of the door's traffic (id `{marker}`); the events it makes: `CLEAN_EVENTS`."""
    if ctx.door == PREDICT:
        return [HttpCall("/predict", orjson.dumps(predict_body(ctx, ctx.marker)), {"content-type": "application/json"})]
    if ctx.door == OIP_REST:
        return [HttpCall(f"/v2/models/{ctx.model}/infer", orjson.dumps(oip_body(ctx, ctx.marker)),
                         {"content-type": "application/json"})]
    if ctx.door == OIP_GRPC:
        return [grpc_request(ctx, ctx.marker)]
    if ctx.door in CLOUDEVENT_DOORS:
        row = {"x": float(index), "color": "red" if index % 2 else "blue"}
        return [half(ctx, "request", kserve_request(ctx, [row])),
                half(ctx, "response", kserve_response(ctx), time_ms=ctx.ts_ms + 5)]
    doc = contract_event(ctx, features={"x": float(index), "color": "red" if index % 2 else "blue"})
    return [lines(doc)] if ctx.door == EVENTS else [orjson.dumps(doc)]


def _with_headers(ctx: Context, headers: Mapping[str, str]) -> Payload:
    """The door's ordinary first call (a request half for CloudEvents) with `headers` changed."""
    call = clean(ctx, 0)[0]
    return [HttpCall(call.path, call.body, {**call.headers, **headers})]


def _over_budget(ctx: Context) -> Payload:
    """A body one KiB past the door's byte budget, declared by Content-Length (the guard never reads it)."""
    budget = WORKER_MAX_BODY if ctx.door in WORKER_DOORS else RECEIVER_MAX_BODY
    call = clean(ctx, 0)[0]
    return [HttpCall(call.path, ctx.marker.encode() + b" " * (budget + 1024), call.headers)]


def _not_json(ctx: Context) -> bytes:
    return b"\xff\xfe{{{ not JSON " + ctx.marker.encode()


def _nan(document: Mapping[str, Any], value: float = 12345.5) -> bytes:
    """`document` as JSON with the number `value` written as the literal NaN (which JSON does not have)."""
    encoded = orjson.dumps(document)
    assert orjson.dumps(value) in encoded
    return encoded.replace(orjson.dumps(value), b"NaN", 1)


def _feature_states(states: Sequence[Any], name: str) -> list[Any]:
    return [state.features[name] for state in states if name in state.features]


def _ages(states: Sequence[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for state in states:
        for name, histogram in state.feature_age.items():
            out.setdefault(name, []).append(histogram)
    return out


def _counted_out_of_range(states: Sequence[Any]) -> bool:
    """One value of x beyond 1e50: counted out of range, kept out of the sums (which stay finite)."""
    windows = _feature_states(states, "x")
    return sum(w.nonfinite for w in windows) == 1 and all(abs(w.total) < 1e12 for w in windows)


def _only_served_ages(states: Sequence[Any]) -> bool:
    """The thousand names became no window: only x, a feature the event served, has an age."""
    ages = _ages(states)
    return set(ages) == {"x"} and sum(h.count for h in ages["x"]) == 1


def _future_stamp_is_age_zero(states: Sequence[Any]) -> bool:
    """A value stamped after its event (clock skew) counts as age 0, once."""
    ages = _ages(states).get(NUMERIC, [])
    return sum(h.count for h in ages) == 1 and max(h.max for h in ages if h.count) == 0


# --- the corpus ----------------------------------------------------------------------------------------------------

_WORKER_MEASURES_LATENCY = "the worker measures a request's latency itself: a client cannot state one"
_NO_EMBEDDINGS_IN_KSERVE = "KServe payloads carry no embeddings: the receiver never makes that field"
_NO_FRESHNESS = "the door's payload has no feature-freshness field"
_DECIDED_BY_THE_WORKER = "the worker logs its own model's decision: a client cannot state one"
_NO_DECISION_IN_KSERVE = "KServe payloads carry no separate decision: the receiver never makes that field"
_NO_BROWSER_GRPC = "no browser page can send gRPC (HTTP/2 with trailers): the ingress guard is HTTP's"
_KAFKA_NO_HTTP = "Kafka has no HTTP headers: a producer is trusted by the broker's own security"
_ONE_ROW = "one event per id: a 256-character id has no row suffix"
_NO_PAIRS = "only the CloudEvents doors pair halves"
_NO_BATCH = "only a CloudEvents batch (structured, batched mode) names several models in one call"
_ONLY_EVENTS = "only POST /events takes JSON lines"
_WORKER_SERVES_ONE = "/predict names no model: the worker serves one"
_OIP_NO_CLIENT_TIME = "an OIP request carries no client time: the worker stamps its events"

LATENCY_BOUND = "outside 0 .. 86400000 ms"
HOST_WORDS = ("does not serve the host", "worker_allowed_hosts")
RECEIVER_HOST_WORDS = ("does not serve the host", "receiver_allowed_hosts")

CORPUS: tuple[HostileCase, ...] = (
    HostileCase(
        "embedding-1e308", "an embedding vector [1e308, 1e308]: its square overflows a window's sums",
        payloads={
            PREDICT: lambda c: [HttpCall("/predict", orjson.dumps(predict_body(c, c.marker, embeddings={
                "prompt": [1e308, 1e308]})), {"content-type": "application/json"})],
            OIP_REST: lambda c: [HttpCall(f"/v2/models/{c.model}/infer", orjson.dumps(oip_body(c, c.marker, extra=[
                {"name": "embeddings", "datatype": "FP64", "shape": [1, 2], "data": [1e308, 1e308]}])),
                {"content-type": "application/json"})],
            OIP_GRPC: lambda c: [grpc_request(c, c.marker, extra=[("embeddings", [1e308, 1e308])])],
            EVENTS: lambda c: [lines(contract_event(c, embeddings={"prompt": [1e308, 1e308]}))],
            KAFKA: lambda c: [orjson.dumps(contract_event(c, embeddings={"prompt": [1e308, 1e308]}))],
        },
        expect={
            PREDICT: Refused(422, ("embeddings", "unknown field")),
            OIP_REST: Refused(400, ("unknown input 'embeddings'",)),
            OIP_GRPC: Refused("INVALID_ARGUMENT", ("unknown input 'embeddings'",)),
            EVENTS: DeadLettered("1e+308 is outside", "embeddings.prompt[0]", status=400),
            KAFKA: DeadLettered("1e+308 is outside", "embeddings.prompt[0]"),
        },
        not_applicable={CE_BINARY: _NO_EMBEDDINGS_IN_KSERVE, CE_STRUCTURED: _NO_EMBEDDINGS_IN_KSERVE},
    ),
    HostileCase(
        "feature-1e200", "a feature value of 1e200: the model's own data, beyond what a window can sum",
        payloads={
            PREDICT: lambda c: [HttpCall("/predict", orjson.dumps(predict_body(c, c.marker) | {
                "features": {**c.inputs, NUMERIC: 1e200}}), {"content-type": "application/json"})],
            OIP_REST: lambda c: [HttpCall(f"/v2/models/{c.model}/infer", orjson.dumps(oip_body(
                c, c.marker, changes={NUMERIC: 1e200})), {"content-type": "application/json"})],
            OIP_GRPC: lambda c: [grpc_request(c, c.marker, changes={NUMERIC: 1e200})],
            CE_BINARY: lambda c: [half(c, "request", kserve_request(c, [{"x": 1e200, "color": "red"}])),
                                  half(c, "response", kserve_response(c), time_ms=c.ts_ms + 5)],
            CE_STRUCTURED: lambda c: [half(c, "request", kserve_request(c, [{"x": 1e200, "color": "red"}])),
                                      half(c, "response", kserve_response(c), time_ms=c.ts_ms + 5)],
            EVENTS: lambda c: [lines(contract_event(c, features={"x": 1e200, "color": "red"}))],
            KAFKA: lambda c: [orjson.dumps(contract_event(c, features={"x": 1e200, "color": "red"}))],
        },
        expect={
            PREDICT: Refused(422, (f"features.{NUMERIC}", "magnitude is above 1e+50")),
            OIP_REST: Refused(400, (f"inputs.{NUMERIC}[0]", "magnitude is above 1e+50")),
            OIP_GRPC: Refused("INVALID_ARGUMENT", (f"inputs.{NUMERIC}[0]", "magnitude is above 1e+50")),
            **{door: Counted("x out of range, not summed", _counted_out_of_range)
               for door in (CE_BINARY, CE_STRUCTURED, EVENTS)},
            KAFKA: Counted("x out of range, not summed", _counted_out_of_range, status=None),
        },
    ),
    HostileCase(
        "feature-nan", "a feature value written NaN, which JSON does not have",
        payloads={
            PREDICT: lambda c: [HttpCall("/predict", _nan(predict_body(c, c.marker) | {
                "features": {**c.inputs, NUMERIC: 12345.5}}), {"content-type": "application/json"})],
            OIP_REST: lambda c: [HttpCall(f"/v2/models/{c.model}/infer", _nan(oip_body(
                c, c.marker, changes={NUMERIC: 12345.5})), {"content-type": "application/json"})],
            OIP_GRPC: lambda c: [grpc_request(c, c.marker, changes={NUMERIC: float("nan")})],
            CE_BINARY: lambda c: [half(c, "request", None, raw=_nan(kserve_request(c, [{"x": 12345.5}])))],
            CE_STRUCTURED: lambda c: [half(c, "request", None, raw=_nan(kserve_request(c, [{"x": 12345.5}])))],
            EVENTS: lambda c: [lines(_nan(contract_event(c, features={"x": 12345.5})))],
            KAFKA: lambda c: [_nan(contract_event(c, features={"x": 12345.5}))],
        },
        expect={
            PREDICT: Refused(422, (f"features.{NUMERIC}", "must be a finite number")),
            OIP_REST: Refused(400, ("not valid JSON",)),
            OIP_GRPC: Refused("INVALID_ARGUMENT", (f"inputs.{NUMERIC}[0]", "must be a finite number")),
            CE_BINARY: DeadLettered("not JSON", status=400),
            CE_STRUCTURED: DeadLettered("not JSON", status=400),
            EVENTS: DeadLettered("not JSON", status=400),
            KAFKA: DeadLettered("not valid UTF-8 JSON", None),
        },
    ),
    HostileCase(
        "latency-2.5e14", "a latency of 2.5e14 ms (a response stamped in the year 9999)",
        payloads={
            **{door: (lambda c: [half(c, "request", kserve_request(c)),
                                 half(c, "response", kserve_response(c), time_ms=253_402_300_799_000)])
               for door in CLOUDEVENT_DOORS},
            EVENTS: lambda c: [lines(contract_event(c, latency_ms={"total": 2.5e14}))],
            KAFKA: lambda c: [orjson.dumps(contract_event(c, latency_ms={"total": 2.5e14}))],
        },
        expect={
            **{door: DeadLettered(LATENCY_BOUND, "latency_ms.total", status=400) for door in CLOUDEVENT_DOORS},
            EVENTS: DeadLettered(LATENCY_BOUND, "latency_ms.total", status=400),
            KAFKA: DeadLettered(LATENCY_BOUND, "latency_ms.total"),
        },
        not_applicable={door: _WORKER_MEASURES_LATENCY for door in WORKER_DOORS},
    ),
    HostileCase(
        "feature-age-1000-names", "feature_age_ms of 1 000 unique names (the most an event may carry)",
        payloads={
            PREDICT: lambda c: [HttpCall("/predict", orjson.dumps(predict_body(c, c.marker, feature_ts={
                f"{c.marker}-n{i}": c.now_ms for i in range(1_000)})), {"content-type": "application/json"})],
            EVENTS: lambda c: [lines(contract_event(c, feature_age_ms={"x": 5.0, **{
                f"{c.marker}-n{i}": 1.0 for i in range(999)}}))],
            KAFKA: lambda c: [orjson.dumps(contract_event(c, feature_age_ms={"x": 5.0, **{
                f"{c.marker}-n{i}": 1.0 for i in range(999)}}))],
        },
        expect={
            PREDICT: Refused(422, ("feature_ts.", "unknown feature")),  # /predict's freshness field: feature_ts
            EVENTS: Counted("ages of served features only", _only_served_ages),
            KAFKA: Counted("ages of served features only", _only_served_ages, status=None),
        },
        not_applicable={OIP_REST: _NO_FRESHNESS, OIP_GRPC: _NO_FRESHNESS, CE_BINARY: _NO_FRESHNESS,
                        CE_STRUCTURED: _NO_FRESHNESS},
    ),
    HostileCase(
        "request-id-300", "a request id of 300 characters (the store holds 256)",
        payloads={
            PREDICT: lambda c: [HttpCall("/predict", orjson.dumps(predict_body(c, c.marker.ljust(300, "r"))),
                                         {"content-type": "application/json"})],
            OIP_REST: lambda c: [HttpCall(f"/v2/models/{c.model}/infer", orjson.dumps(oip_body(
                c, c.marker.ljust(300, "r"))), {"content-type": "application/json"})],
            OIP_GRPC: lambda c: [grpc_request(c, c.marker.ljust(300, "r"))],
            **{door: (lambda c: [half(c, "request", kserve_request(c), ce_id=c.marker.ljust(300, "r"))])
               for door in CLOUDEVENT_DOORS},
            EVENTS: lambda c: [lines(contract_event(c, request_id=c.marker.ljust(300, "r")))],
            KAFKA: lambda c: [orjson.dumps(contract_event(c, request_id=c.marker.ljust(300, "r")))],
        },
        expect={
            PREDICT: Refused(422, ("request_id", "longer than 256 characters")),
            OIP_REST: Refused(400, ("id", "longer than 256 characters")),
            OIP_GRPC: Refused("INVALID_ARGUMENT", ("id", "longer than 256 characters")),
            **{door: DeadLettered(f"above the limit of {REQUEST_ID_CHARS}", "id", status=400)
               for door in CLOUDEVENT_DOORS},
            EVENTS: DeadLettered(f"at most {REQUEST_ID_CHARS} characters", "request_id", status=400),
            KAFKA: DeadLettered(f"at most {REQUEST_ID_CHARS} characters", "request_id"),
        },
    ),
    HostileCase(
        "row-ids-256x2", "a 256-character id on a 2-row request: row 1's id `ID:1` is 258 characters",
        payloads={
            OIP_REST: lambda c: [HttpCall(f"/v2/models/{c.model}/infer", orjson.dumps(oip_body(
                c, c.marker.ljust(256, "r"), rows=2)), {"content-type": "application/json"})],
            OIP_GRPC: lambda c: [grpc_request(c, c.marker.ljust(256, "r"), rows=2)],
            **{door: (lambda c: [half(c, "request", kserve_request(c, [{"x": 1.0}, {"x": 2.0}]),
                                      ce_id=c.marker.ljust(256, "r"))])
               for door in CLOUDEVENT_DOORS},
        },
        expect={
            OIP_REST: Refused(400, ("row suffix ':1' of a 2-row request", "above the limit of 256")),
            OIP_GRPC: Refused("INVALID_ARGUMENT", ("row suffix ':1' of a 2-row request", "above the limit of 256")),
            **{door: DeadLettered("row suffix ':1' of a 2-row request", "id", status=400)
               for door in CLOUDEVENT_DOORS},
        },
        not_applicable={PREDICT: _ONE_ROW, EVENTS: _ONE_ROW, KAFKA: _ONE_ROW},
    ),
    HostileCase(
        "foreign-host", f"Host: {FOREIGN_HOST} (a DNS-rebinding page's requests)",
        payloads={door: (lambda c: _with_headers(c, {"host": FOREIGN_HOST})) for door in HTTP_DOORS},
        expect={door: Refused(400, HOST_WORDS if door in WORKER_DOORS else RECEIVER_HOST_WORDS)
                for door in HTTP_DOORS},
        not_applicable={OIP_GRPC: _NO_BROWSER_GRPC, KAFKA: _KAFKA_NO_HTTP},
    ),
    HostileCase(
        "text-plain", "Content-Type: text/plain (a cross-site form's type: no CORS preflight)",
        payloads={door: (lambda c: _with_headers(c, {"content-type": "text/plain"})) for door in HTTP_DOORS},
        expect={door: Refused(415, ("must be declared as", "text/plain")) for door in HTTP_DOORS},
        not_applicable={OIP_GRPC: _NO_BROWSER_GRPC, KAFKA: _KAFKA_NO_HTTP},
    ),
    HostileCase(
        "cross-site-origin", "Origin: http://evil.example (a cross-site page's fetch)",
        payloads={door: (lambda c: _with_headers(c, {"origin": f"http://{FOREIGN_HOST}"})) for door in HTTP_DOORS},
        expect={door: Refused(403, ("cross-origin request refused", FOREIGN_HOST)) for door in HTTP_DOORS},
        not_applicable={OIP_GRPC: _NO_BROWSER_GRPC, KAFKA: _KAFKA_NO_HTTP},
    ),
    HostileCase(
        "body-over-budget", "a body past the door's byte budget (worker 64 KiB, receiver 4 MiB, Kafka 1 MiB)",
        payloads={
            **{door: _over_budget for door in HTTP_DOORS},
            OIP_GRPC: lambda c: [grpc_request(c, c.marker, rows=1_000)],  # 14 inputs x 1 000 rows: ~130 KB
            KAFKA: lambda c: [orjson.dumps(contract_event(c, inputs={"blob": "y" * MAX_EVENT_BYTES}))],
        },
        expect={
            PREDICT: Refused(413, (f"above the limit of {WORKER_MAX_BODY}",)),
            OIP_REST: Refused(413, (f"above the limit of {WORKER_MAX_BODY}",)),
            OIP_GRPC: Refused("RESOURCE_EXHAUSTED", (f"vs. {WORKER_MAX_BODY}",)),
            **{door: Refused(413, (f"above the limit of {RECEIVER_MAX_BODY}",))
               for door in (CE_BINARY, CE_STRUCTURED, EVENTS)},
            KAFKA: DeadLettered(f"above the limit of {MAX_EVENT_BYTES}", None),
        },
    ),
    HostileCase(
        "unpaired-half", "a request half whose response never comes",
        payloads={door: (lambda c: [half(c, "request", kserve_request(c))]) for door in CLOUDEVENT_DOORS},
        expect={door: DeadLettered("unpaired: ", None, status=200) for door in CLOUDEVENT_DOORS},
        not_applicable={door: _NO_PAIRS for door in DOORS if door not in CLOUDEVENT_DOORS},
    ),
    HostileCase(
        "too-many-models", f"one batch of halves of {defaults.RECEIVER_MAX_MODELS_PER_CALL + 1} distinct models",
        payloads={CE_STRUCTURED: lambda c: [HttpCall(f"/?version={c.version}", orjson.dumps([
            {"specversion": "1.0", "id": f"{c.marker}-{i}", "type": REQUEST_TYPE, "source": "s",
             "time": rfc3339(c.ts_ms), "inferenceservicename": f"{c.marker}-model-{i}", "data": kserve_request(c)}
            for i in range(defaults.RECEIVER_MAX_MODELS_PER_CALL + 1)]),
            {"content-type": "application/cloudevents-batch+json"})]},
        expect={CE_STRUCTURED: Refused(413, (f"{defaults.RECEIVER_MAX_MODELS_PER_CALL + 1} models",
                                             "max models per call"))},
        not_applicable={door: _NO_BATCH for door in DOORS if door != CE_STRUCTURED},
    ),
    HostileCase(
        "invalid-lines-20000", "20 000 lines that are not JSON in one call",
        payloads={EVENTS: lambda c: [HttpCall("/events", b"\n".join(
            f"{c.marker} junk line {i}".encode() for i in range(20_000)), {"content-type": "application/x-ndjson"})]},
        # the first `receiver_max_errors` one by one, the others as one letter of their lines
        expect={EVENTS: DeadLettered("more refusals of one call", None, status=400,
                                     letters=defaults.RECEIVER_MAX_ERRORS + 1)},
        not_applicable={door: _ONLY_EVENTS for door in DOORS if door != EVENTS},
    ),
    HostileCase(
        "lines-past-the-buffer", f"{defaults.RECEIVER_EVENT_BUFFER + 1} lines: more events than the receiver buffers",
        payloads={EVENTS: lambda c: [HttpCall("/events", b"\n".join(
            b'{"event_id": "%s-%d"}' % (c.marker.encode(), i) for i in range(defaults.RECEIVER_EVENT_BUFFER + 1)),
            {"content-type": "application/x-ndjson"})]},
        # a call that could never be taken whole is refused whole: nothing is read from it
        expect={EVENTS: Refused(413, (f"{defaults.RECEIVER_EVENT_BUFFER + 1} lines", "event buffer"))},
        not_applicable={door: _ONLY_EVENTS for door in DOORS if door != EVENTS},
    ),
    HostileCase(
        "not-json", "bytes that are not JSON (for gRPC: not a protobuf message)",
        payloads={
            PREDICT: lambda c: [HttpCall("/predict", _not_json(c), {"content-type": "application/json"})],
            OIP_REST: lambda c: [HttpCall(f"/v2/models/{c.model}/infer", _not_json(c),
                                          {"content-type": "application/json"})],
            OIP_GRPC: lambda c: [GrpcCall(raw=_not_json(c))],
            **{door: (lambda c: [half(c, "request", None, raw=_not_json(c))]) for door in CLOUDEVENT_DOORS},
            EVENTS: lambda c: [lines(_not_json(c))],
            KAFKA: lambda c: [_not_json(c)],
        },
        expect={
            PREDICT: Refused(422, ("not valid JSON",)),
            OIP_REST: Refused(400, ("not valid JSON",)),
            # the worker's interceptor turns grpc.aio's own parse failure into the protocol's bad-input status
            OIP_GRPC: Refused("INVALID_ARGUMENT", ("not a valid protobuf message",)),
            **{door: DeadLettered("not JSON", status=400) for door in CLOUDEVENT_DOORS},
            EVENTS: DeadLettered("not JSON", None, status=400),
            KAFKA: DeadLettered("not valid UTF-8 JSON", None),
        },
    ),
    HostileCase(
        "model-path", "a model name that is a path, ../../etc",
        payloads={
            OIP_REST: lambda c: [HttpCall("/v2/models/..%2F..%2Fetc/infer", orjson.dumps(oip_body(c, c.marker)),
                                          {"content-type": "application/json"})],
            OIP_GRPC: lambda c: [grpc_request(c, c.marker, model="../../etc")],
            **{door: (lambda c: [half(c, "request", kserve_request(c), model="../../etc"),
                                 half(c, "response", kserve_response(c), time_ms=c.ts_ms + 5, model="../../etc")])
               for door in CLOUDEVENT_DOORS},
            EVENTS: lambda c: [lines(contract_event(c, model="../../etc"))],
            KAFKA: lambda c: [orjson.dumps(contract_event(c, model="../../etc"))],
        },
        expect={
            OIP_REST: Refused(404, ("no such endpoint",)),
            OIP_GRPC: Refused("NOT_FOUND", ("unknown model '../../etc'",)),
            **{door: DeadLettered("letters, digits", "model", status=400) for door in CLOUDEVENT_DOORS},
            EVENTS: DeadLettered("letters, digits", "model", status=400),
            KAFKA: DeadLettered("letters, digits", "model"),
        },
        not_applicable={PREDICT: _WORKER_SERVES_ONE},
    ),
    HostileCase(
        "future-30-days", "an event stamped 30 days in the future (for /predict: a feature value's time)",
        payloads={
            PREDICT: lambda c: [HttpCall("/predict", orjson.dumps(predict_body(c, c.marker, feature_ts={
                NUMERIC: c.now_ms + 30 * DAY_MS})), {"content-type": "application/json"})],
            **{door: (lambda c: [half(c, "request", kserve_request(c), time_ms=c.now_ms + 30 * DAY_MS),
                                 half(c, "response", kserve_response(c), time_ms=c.now_ms + 30 * DAY_MS + 5)])
               for door in CLOUDEVENT_DOORS},
            EVENTS: lambda c: [lines(contract_event(c, ts=c.now_ms + 30 * DAY_MS))],
            KAFKA: lambda c: [orjson.dumps(contract_event(c, ts=c.now_ms + 30 * DAY_MS))],
        },
        expect={
            # the worker stamps the event itself; a feature value stamped after it is clock skew: age 0
            PREDICT: Counted("feature age 0", _future_stamp_is_age_zero),
            **{door: DeadLettered("in the future", "ts", status=400) for door in CLOUDEVENT_DOORS},
            EVENTS: DeadLettered("in the future", "ts", status=400),
            KAFKA: DeadLettered("in the future", "ts"),
        },
        not_applicable={OIP_REST: _OIP_NO_CLIENT_TIME, OIP_GRPC: _OIP_NO_CLIENT_TIME},
    ),
    HostileCase(
        "predicted-class-object", "a `predicted_class` that is an object, not the model's decision",
        payloads={
            EVENTS: lambda c: [lines(contract_event(c, predicted_class={"class": [1e308]}))],
            KAFKA: lambda c: [orjson.dumps(contract_event(c, predicted_class={"class": [1e308]}))],
        },
        expect={
            EVENTS: DeadLettered("the model's decision", "predicted_class", status=400),
            KAFKA: DeadLettered("the model's decision", "predicted_class"),
        },
        not_applicable={**{door: _DECIDED_BY_THE_WORKER for door in WORKER_DOORS},
                        **{door: _NO_DECISION_IN_KSERVE for door in CLOUDEVENT_DOORS}},
    ),
)

CASES = {case.name: case for case in CORPUS}


def cases_for(door: str) -> list[HostileCase]:
    return [case for case in CORPUS if door in case.expect]


def matrix() -> str:
    """The doors x cases table, as the corpus states it (R: refused, D: dead-lettered, C: counted, -: n/a)."""
    mark = {Refused: "R", DeadLettered: "D", Counted: "C"}
    rows = [f"{'case':24} " + " ".join(f"{door:>18}" for door in DOORS)]
    for case in CORPUS:
        cells = []
        for door in DOORS:
            outcome = case.expect.get(door)
            if outcome is None:
                cells.append(f"{'-':>18}")
            else:
                status = getattr(outcome, "status", None)
                cells.append(f"{mark[type(outcome)] + (f' {status}' if status is not None else ''):>18}")
        rows.append(f"{case.name:24} " + " ".join(cells))
    return "\n".join(rows)


# --- the OpenTelemetry door: the receiver's POST /v1/traces (tests/receiver/test_otlp_hostile.py) --------------------
# Its payloads are OTLP export requests, not events or halves, so its cases are its own; the same outcomes hold.

OTLP = "otlp"  # receiver POST /v1/traces, OTLP protobuf or JSON


@dataclass(frozen=True)
class OtlpCase:
    name: str
    what: str
    build: Callable[[Context], HttpCall]
    expect: Outcome


def _otlp_call(spans: Sequence[Any], json: bool = False, **headers: str) -> HttpCall:
    from tests.support.otlp_traces import export_request, otlp_json

    request = export_request(spans)
    if json:
        return HttpCall("/v1/traces", orjson.dumps(otlp_json(request)), {"content-type": "application/json", **headers})
    return HttpCall("/v1/traces", request.SerializeToString(), {"content-type": "application/x-protobuf", **headers})


def _otlp_trace(ctx: Context, **changes: Any) -> list[Any]:
    from tests.support.otlp_traces import rag_trace

    return rag_trace(ctx.ts_ms, session=ctx.marker, **changes)


def _one_span(ctx: Context, start_ns: int, end_ns: int, attributes: Mapping[str, Any]) -> list[Any]:
    import os

    from tests.support.otlp_traces import span

    return [span(os.urandom(16), os.urandom(8), b"", "chat", start_ns, end_ns,
                 {"gen_ai.request.model": ctx.model, "session.id": ctx.marker, **attributes})]


def _nested_json(ctx: Context) -> HttpCall:
    value: dict[str, Any] = {"stringValue": ctx.marker}
    for _ in range(60):  # 240 JSON levels: under orjson's limit, far over the decoder's 64 message levels
        value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "x",
                                                          "attributes": [{"key": "deep", "value": value}]}]}]}]}
    return HttpCall("/v1/traces", orjson.dumps(doc), {"content-type": "application/json"})


def _gzip_bomb(ctx: Context) -> HttpCall:
    import gzip

    return HttpCall("/v1/traces", gzip.compress(b"\x00" * (RECEIVER_MAX_BODY * 2)),
                    {"content-type": "application/x-protobuf", "content-encoding": "gzip"})


MS_NS = 1_000_000
OTLP_CORPUS: tuple[OtlpCase, ...] = (
    OtlpCase("otlp-junk", "bytes that are no ExportTraceServiceRequest",
             lambda c: HttpCall("/v1/traces", b"\xff\xff" + c.marker.encode(),
                                {"content-type": "application/x-protobuf"}),
             Refused(400, ("ExportTraceServiceRequest",))),
    OtlpCase("otlp-nested", "OTLP/JSON whose attribute nests 60 maps deep",
             _nested_json, Refused(400, ("OTLP/JSON",))),
    OtlpCase("otlp-gzip-bomb", "a gzip body that inflates past the body bound",
             _gzip_bomb, Refused(413, ("inflates",))),
    OtlpCase("otlp-tokens", "an output token count beyond any context window",
             lambda c: _otlp_call(_one_span(c, c.ts_ms * MS_NS, (c.ts_ms + 5) * MS_NS,
                                            {"gen_ai.usage.output_tokens": 10 ** 12})),
             DeadLettered("beyond any context window", "tokens_out", status=200)),
    OtlpCase("otlp-two-days", "an LLM span of two days",
             lambda c: _otlp_call(_one_span(c, c.ts_ms * MS_NS, (c.ts_ms + 2 * DAY_MS) * MS_NS, {})),
             DeadLettered("no request is served for a day", "latency_ms.total", status=200)),
    OtlpCase("otlp-epoch-zero", "a span stamped at the epoch (a clock never set)",
             lambda c: _otlp_call(_one_span(c, 1, 5 * MS_NS, {})),
             DeadLettered("outside 2000-2100", "ts", status=200)),
    OtlpCase("otlp-huge-vector", "an embedding of 1e308 values (dropped, the request still counted)",
             lambda c: _otlp_call(_otlp_trace(c, embedding=[1e308] * 8), json=True),
             Counted("no embedding, the event kept", lambda events: all("embeddings" not in e for e in events))),
    OtlpCase("otlp-long-answer", "an answer of 1 MB (cut at the attribute bound)",
             lambda c: _otlp_call(_otlp_trace(c, answer="y" * (1 << 20))),
             Counted("answer_chars at the bound", lambda events: all(
                 e["features"]["answer_chars"] == defaults.OTLP_MAX_ATTRIBUTE_CHARS for e in events))),
)
