"""OpenTelemetry traces to events: the rate at which the receiver decodes OTLP export requests, joins their spans
into traces and maps each to an event (driftline/otlp/), beside the contract's own check of the same events, which
every door pays (`validate_inference` + encoding), measured in the same run.

Run by hand: `.venv/bin/python bench/otlp_traces.py`. Prints figures; asserts nothing.
"""
from __future__ import annotations

import random
import time

import orjson

from driftline.events import encode_event, validate_inference
from driftline.llm_settings import LlmSettings
from driftline.otlp.joining import PendingTraces
from driftline.otlp.mapping import trace_event
from driftline.otlp.rag_standin import SERVICE, SUPPORT, RagStandin, export_request, questions
from driftline.otlp.spans import decode_json, decode_protobuf, to_otlp_json

TRACES = 4_000
PER_CALL = 100  # requests per export call: an SDK batch of 400 to 500 spans


def main() -> None:
    rng, standin = random.Random(0), RagStandin(seed=0)
    now_ms = int(time.time() * 1000) - 60_000
    calls = []
    for start in range(0, TRACES, PER_CALL):
        spans = [s for i, q in enumerate(questions(SUPPORT, PER_CALL, rng)) for s in standin.request(q, now_ms + i)]
        calls.append(export_request(spans))
    protobuf = [call.SerializeToString() for call in calls]
    json_bodies = [orjson.dumps(to_otlp_json(call)) for call in calls]
    settings = LlmSettings(models={SERVICE: {"model": "standin-chat", "version": "1"}})
    refusal = settings.refusal()

    def run(bodies, decode) -> tuple[float, list]:
        pending = PendingTraces(10_000, 256, 10.0)
        events = []
        started = time.perf_counter()
        for body in bodies:
            for spans in pending.add(decode(body).spans).whole:
                event = trace_event(spans, settings, refusal)
                if event is not None:
                    events.append(event)
        return time.perf_counter() - started, events

    seconds_pb, events = run(protobuf, decode_protobuf)
    seconds_json, _ = run(json_bodies, decode_json)
    started = time.perf_counter()
    for event in events:
        validate_inference(event)
        encode_event(event)
    seconds_check = time.perf_counter() - started
    spans = sum(len(r.scope_spans[0].spans) for c in calls for r in c.resource_spans)
    print(f"{len(events):,} traces of {spans:,} spans ({sum(map(len, protobuf)) / len(events):,.0f} protobuf bytes a "
          f"trace)")
    print(f"protobuf: decode + join + map {len(events) / seconds_pb:,.0f} traces/s")
    print(f"OTLP/JSON: decode + join + map {len(events) / seconds_json:,.0f} traces/s")
    print(f"peer, the contract's check + encoding of the same events: {len(events) / seconds_check:,.0f} events/s")
    print(f"ratio: protobuf mapping costs {seconds_pb / seconds_check:.1f}x, JSON {seconds_json / seconds_check:.1f}x "
          "the contract's check")


if __name__ == "__main__":
    main()
