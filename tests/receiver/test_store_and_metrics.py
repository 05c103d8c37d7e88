"""The receiver's dead letters reach the store (where `driftline status` counts them), and its /metrics."""
from __future__ import annotations

import uuid

import orjson
from click.testing import CliRunner
from cloudevents.v1.conversion import to_binary
from cloudevents.v1.http import CloudEvent
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from driftline import defaults
from driftline.cli import cli
from driftline.store.db import session_scope
from driftline.store.models import DeadLetter
from tests.receiver.conftest import register_baseline
from tests.receiver.test_receiver import REQUEST_TYPE, V1_REQUEST, V1_RESPONSE, half, post


def _letters(db_url: str) -> list[DeadLetter]:
    with session_scope(db_url) as s:
        return list(s.scalars(select(DeadLetter).order_by(DeadLetter.id)))


def test_malformed_cloudevents_and_lines_are_in_the_store_and_driftline_status(sqlite_url, receiver_factory, model):
    service, client = receiver_factory()
    ce_id = uuid.uuid4().hex
    headers, _ = to_binary(CloudEvent({"id": ce_id, "type": REQUEST_TYPE, "source": "s",
                                       "inferenceservicename": model}, None))
    assert client.post("/", headers=headers, content=b"{not json").status_code == 400
    huge = b"\x00" + b"x" * (defaults.COLLECTOR_DEAD_LETTER_RAW_BYTES + 10)
    assert client.post("/", content=huge, headers={"content-type": "application/cloudevents+json"}).status_code == 400
    bad_line = orjson.dumps({"schema": "driftline.inference/v1", "model": model})
    assert client.post("/events", content=b"\n" + bad_line).json()["dead_lettered"] == 1
    service.flush()

    half_letter, body_letter, line_letter = _letters(sqlite_url)
    assert half_letter.topic == "receiver:/" and half_letter.reason.startswith("the request body is not JSON")
    assert (half_letter.field, half_letter.model, half_letter.raw, half_letter.partition) == (
        "data", model, b"{not json", None)
    assert body_letter.reason.startswith("not JSON") and body_letter.model is None
    assert body_letter.raw_size == len(huge) and body_letter.raw == huge[:defaults.COLLECTOR_DEAD_LETTER_RAW_BYTES]
    assert (line_letter.topic, line_letter.offset, line_letter.model) == ("receiver:/events", 1, model)
    assert line_letter.raw == bad_line and line_letter.field

    status = CliRunner().invoke(cli, ["status", "--json", "--db", sqlite_url])
    assert status.exit_code == 0, status.output
    assert orjson.loads(status.output)["dead_letters"] == 3
    assert service.stats()["dead_letters_stored"] == 3


def test_a_failing_store_loses_no_topic_letter_and_bounds_what_waits(broker, tmp_path, receiver_factory, model):
    from tests.receiver.conftest import dead_letters_of

    # a store without its tables: every insert fails
    service, client = receiver_factory(db_url=f"sqlite:///{tmp_path / 'unmigrated.db'}")
    service.dead_letters.store.max_rows = 2
    markers = [f"garbage-{model}-{i}" for i in range(3)]
    for marker in markers:
        client.post("/", content=marker.encode(), headers={"content-type": "application/cloudevents+json"})
    service.flush()
    stats = service.stats()
    assert (stats["dead_letters_stored"], stats["dead_letters_not_stored"]) == (0, 1)
    assert stats["dead_letters_store_pending"] == 2  # kept for the next try
    for marker in markers:  # every letter is on the topic whatever the store did
        assert len(dead_letters_of(broker, marker, 1)) == 1


def _scrape(client) -> dict[str, float]:
    """/metrics read by prometheus_client's own parser: {sample name{labels}: value}."""
    answer = client.get("/metrics")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            samples[sample.name + (f"{{{labels}}}" if labels else "")] = sample.value
    return samples


def test_metrics_count_halves_pairs_unpaired_dead_letters_and_time_calls(broker, sqlite_url, tmp_path,
                                                                         receiver_factory, model):
    register_baseline(sqlite_url, tmp_path, model)
    service, client = receiver_factory(pair_wait_s=3600)
    before = _scrape(client)
    assert before["driftline_receiver_halves_total"] == 0 and before["driftline_receiver_pending_halves"] == 0
    paired = uuid.uuid4().hex
    post(client, half(model, paired, "request", V1_REQUEST, "2026-01-02T03:04:05Z"))
    post(client, half(model, paired, "response", V1_RESPONSE, "2026-01-02T03:04:05.01Z"))
    post(client, half(model, paired, "response", V1_RESPONSE, "2026-01-02T03:04:05.01Z"))  # a logger retry
    post(client, half(model, uuid.uuid4().hex, "request", V1_REQUEST, "2026-01-02T03:04:06Z"))  # waits
    client.post("/", content=b"junk", headers={"content-type": "application/cloudevents+json"})
    after = _scrape(client)
    assert after["driftline_receiver_halves_total"] == 4  # the junk body held no CloudEvent
    assert after["driftline_receiver_pairs_total"] == 1
    assert after["driftline_receiver_events_total"] == 2  # the pair's two rows
    assert after["driftline_receiver_duplicates_total"] == 1
    assert after["driftline_receiver_pending_halves"] == 1
    assert after["driftline_receiver_dead_letters_total"] == 1
    assert after['driftline_receiver_requests_total{code="200",endpoint="cloudevents"}'] == 4
    assert after['driftline_receiver_requests_total{code="400",endpoint="cloudevents"}'] == 1
    assert after['driftline_receiver_request_duration_seconds_count{endpoint="cloudevents"}'] == 5
    assert after["driftline_receiver_unpaired_total"] == 0
    service.close()  # the waiting half is dead-lettered at stop, as unpaired
    stopped = _scrape(client)
    assert stopped["driftline_receiver_unpaired_total"] == 1 and stopped["driftline_receiver_pending_halves"] == 0
    assert stopped["driftline_receiver_events_sent_total"] == 2
