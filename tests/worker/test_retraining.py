"""POST /admin/retrain: trains on recent labelled traffic, registers with a baseline, idempotent per key."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from sqlalchemy import func, select

from driftline.client import InferenceLogger
from driftline.store.db import session_scope
from driftline.store.models import BaselineRecord, RetrainRequest
from driftline.worker.dataset import RiskModel, default_probability, generate, generate_inputs, sample_labels
from driftline.worker.registry import HOLDOUT_FILE
from driftline.worker.retrain import RecentTraffic, RetrainJob, RetrainLimits, RetrainManager, run_retrain_job
from driftline.worker.server import Worker, WorkerConfig
from tests.support.waiting import wait_until
from tests.support.worker_helpers import MODEL, make_settings, registry_with_versions, serving

TOKEN = "retrain-token"


def _finished(url: str, request_id: str):
    document = httpx.get(f"{url}/admin/retrain/{request_id}", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    return document if document["status"] in ("succeeded", "failed", "rejected") else None


@pytest.mark.slow  # about a minute or more on two cores: out of `make test-fast`
def test_retrain_on_labelled_traffic_is_idempotent_and_promotes_only_a_better_model(
        broker, tiny_results, tmp_path, sqlite_url, unique_id):
    settings = make_settings(tmp_path, broker, sqlite_url).model_copy(update={"retrain_token": TOKEN})
    registry = registry_with_versions(settings, tiny_results)
    worker = Worker(settings, WorkerConfig(model=MODEL, device="cpu", alias_poll_s=0.1, retrain_min_rows=200,
                                           retrain_epochs=3, log_events=False))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with serving(worker) as url:
        assert httpx.post(f"{url}/admin/retrain", json={}).status_code == 401
        early = httpx.post(f"{url}/admin/retrain", json={"why": "too early"},
                           headers={**auth, "Idempotency-Key": f"{unique_id}-early"})
        assert early.status_code == 202
        rejected = wait_until(lambda: _finished(url, early.json()["request_id"]), timeout=60,
                              message="the early request to finish")
        assert rejected["status"] == "rejected" and "not enough labelled traffic" in rejected["response"]["error"]

        # Traffic whose labels follow a drifted concept, then its labels on driftline.labels.
        inputs = generate_inputs(400, seed=21)
        labels = sample_labels(default_probability(inputs, RiskModel(w_dti=7.0, w_late=0.9, w_south=1.2)), 22)
        ids = [f"{unique_id}-{i}" for i in range(len(inputs))]

        async def send_all():
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                return await asyncio.gather(*(client.post("/predict", json={"features": row, "request_id": rid})
                                              for row, rid in zip(inputs.to_dict("records"), ids)))
        assert {r.status_code for r in asyncio.run(send_all())} == {200}
        labeller = InferenceLogger(broker, model=MODEL, version="1")
        for request_id, label in zip(ids, labels):
            labeller.log_label(request_id, int(label))
        labeller.log_label("someone-else", 1)
        assert labeller.flush(20)
        labeller.close()
        wait_until(lambda: worker.traffic.counts()["labelled"] == 400, timeout=60, message="400 labelled requests")

        first = httpx.post(f"{url}/admin/retrain", json={"alert": "quality"},
                           headers={**auth, "Idempotency-Key": f"{unique_id}-a"})
        again = httpx.post(f"{url}/admin/retrain", json={"alert": "quality"},
                           headers={**auth, "Idempotency-Key": f"{unique_id}-a"})
        assert first.status_code == again.status_code == 202
        assert again.json()["request_id"] == first.json()["request_id"]
        assert first.json()["duplicate"] is False and again.json()["duplicate"] is True
        done = wait_until(lambda: _finished(url, first.json()["request_id"]), timeout=180,
                          message="the retraining request to finish")
        assert done["status"] == "succeeded", done
        assert done["new_version"] == "3" and done["reason"] == {"alert": "quality"}
        candidate, incumbent = done["response"]["candidate"], done["response"]["incumbent"]
        assert candidate["rows"] == incumbent["rows"] == 80  # the same holdout: 20 % of 400
        trusted = done["response"]["training_holdout"]  # version 1's own training holdout: 20 % of 1 500
        assert trusted["version"] == "1" and trusted["candidate"]["rows"] == trusted["incumbent"]["rows"] == 300
        assert done["promoted"] == (candidate["log_loss"] < incumbent["log_loss"]
                                    and trusted["candidate"]["log_loss"] <= 1.1 * trusted["incumbent"]["log_loss"])
        trainer = done["response"]["trainer"]  # trained in a child process, on one torch thread, at low priority
        assert trainer["pid"] != os.getpid() and trainer["torch_threads"] == 1
        assert trainer["niceness"] >= min(19, os.nice(0) + 1)
        info = registry.get(MODEL, "3")
        assert info.metrics["train_rows"] == 320 and "retrain request" in info.description
        with session_scope(settings.db_url) as session:
            assert session.scalar(select(BaselineRecord.rows).where(BaselineRecord.version == "3")) == 400
            assert session.scalar(select(func.count()).select_from(RetrainRequest)) == 2
        expected = "3" if done["promoted"] else "1"
        wait_until(lambda: httpx.get(f"{url}/healthz").json()["version"] == expected,
                   message=f"the worker to serve version {expected}")
        assert registry.alias(MODEL) == expected


def _labelled_traffic(rows: int, seed: int) -> RecentTraffic:
    traffic = RecentTraffic(rows)
    inputs, labels = generate(rows, seed)
    for i, (row, label) in enumerate(zip(inputs.to_dict("records"), labels)):
        traffic.add_request(f"r{i}", row)
        traffic.add_label(f"r{i}", int(label))
    return traffic


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, dead but not yet reaped by its new parent, counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_shutdown_stops_a_running_training_process_and_records_the_interruption(tiny_results, tmp_path, unique_id):
    settings = make_settings(tmp_path, "127.0.0.1:1")
    registry = registry_with_versions(settings, tiny_results)
    production = SimpleNamespace(version="1", info=registry.get(MODEL, "1"))
    # Epochs enough to train for hours: only shutdown() can end this job.
    manager = RetrainManager(registry, MODEL, _labelled_traffic(300, seed=8), min_rows=100,
                             current=lambda: production, limits=RetrainLimits(epochs=1_000_000))
    ticket = manager.submit(f"{unique_id}-long", {"why": "test"})
    process = wait_until(lambda: manager.process, timeout=60, message="the training process to start")
    assert process is not None and process.poll() is None and _alive(process.pid)
    assert manager.get(ticket.id)["status"] == "running"
    # While one is pending, any other POST (a new key, or none: a fresh one each time) answers that one.
    for i in range(5):
        again = manager.submit(f"{unique_id}-burst-{i}", {"why": "burst"})
        assert (again.id, again.created, again.idempotency_key) == (ticket.id, False, f"{unique_id}-long")
    with session_scope(settings.db_url) as session:
        assert session.scalar(select(func.count()).select_from(RetrainRequest)) == 1

    manager.shutdown()
    assert process.returncode == -signal.SIGTERM and not _alive(process.pid)
    assert manager.process is None
    document = manager.get(ticket.id)
    assert document["status"] == "failed" and "interrupted" in document["response"]["error"]
    assert registry.versions(MODEL)[-1].version == "2"  # nothing half-registered
    late = manager.submit(f"{unique_id}-late", {})  # recorded, never run
    assert late.status == "failed" and "shutting down" in manager.get(late.id)["response"]["error"]


ORPHAN_SCRIPT = textwrap.dedent("""
    import sys, time
    from types import SimpleNamespace
    from driftline.config import load_settings
    from driftline.store import db
    from driftline.worker.dataset import generate
    from driftline.worker.publish import publish
    from driftline.worker.registry import Registry
    from driftline.worker.retrain import RecentTraffic, RetrainLimits, RetrainManager
    from driftline.worker.training import TrainConfig, train_model
    from tests.support.waiting import wait_until

    home = sys.argv[1]
    settings = load_settings(home=home, db=f"sqlite:///{home}/driftline.db", bootstrap_servers="127.0.0.1:1")
    db.upgrade(settings.db_url)
    registry = Registry(settings.db_url, settings.artifacts_dir)
    inputs, labels = generate(300, 3)
    publish(registry, "m", train_model(inputs, labels, TrainConfig(size="test", epochs=1, seed=3)))
    traffic = RecentTraffic(300)
    for i, (row, label) in enumerate(zip(inputs.to_dict("records"), labels)):
        traffic.add_request(str(i), row)
        traffic.add_label(str(i), int(label))
    production = SimpleNamespace(version="1", info=registry.get("m", "1"))
    manager = RetrainManager(registry, "m", traffic, min_rows=100, current=lambda: production,
                             limits=RetrainLimits(epochs=1_000_000))
    manager.submit("orphan", {})
    wait_until(lambda: manager.process, timeout=60, message="the training process to start")
    print(manager.process.pid, flush=True)
    time.sleep(600)  # a worker that lives on until the test kills it
""")


@pytest.mark.slow  # about a minute or more on two cores: out of `make test-fast`
def test_a_training_process_exits_when_the_worker_is_killed(tmp_path):
    (tmp_path / "home").mkdir()
    worker = subprocess.Popen([sys.executable, "-c", ORPHAN_SCRIPT, str(tmp_path / "home")], stdout=subprocess.PIPE,
                              cwd=Path(__file__).resolve().parents[2])
    try:
        line = worker.stdout.readline()
        assert line.strip().isdigit(), "the worker script did not start a training process"
        child = int(line)
        assert _alive(child)
        worker.kill()  # SIGKILL: no shutdown code runs in the worker
        worker.wait(timeout=10)
        wait_until(lambda: not _alive(child), timeout=60, message="the orphaned training process to exit")
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        worker.stdout.close()


def test_the_buffer_is_keyed_by_the_worker_so_a_repeated_request_id_cannot_overwrite_inputs():
    traffic = RecentTraffic(3)
    traffic.add_request("victim", {"income": 1})
    traffic.add_request("attacker-choice", {"income": 2})
    traffic.add_request("victim", {"income": 666})  # a second request reusing the victim's id
    assert traffic.add_label("victim", 1) is False  # ambiguous: neither request is trained on
    assert traffic.add_label("attacker-choice", 0) is True
    assert traffic.labelled() == ([{"income": 2}], [0])
    assert traffic.counts()["duplicate_request_ids"] == 1
    for i in range(3):  # the buffer stays bounded; evicted ids no longer match
        traffic.add_request(f"later-{i}", {"income": 10 + i})
    assert traffic.counts()["requests"] == 3 and traffic.add_label("attacker-choice", 1) is False
    assert traffic.add_label("later-0", 1) and traffic.labelled() == ([{"income": 10}], [1])


def _job(registry, tiny_results, labels_of, **changes) -> RetrainJob:
    inputs, labels = generate(600, seed=31)
    return RetrainJob(request_id=1, db_url=registry.db_url, artifacts_dir=str(registry.artifacts_dir), model="m",
                      inputs=inputs, labels=list(labels_of(labels)), epochs=3, incumbent=registry.get("m", "1"),
                      **changes)


def test_a_candidate_poisoned_by_recent_traffic_is_not_promoted(tiny_results, tmp_path):
    """Flipped labels: the candidate wins on the (poisoned) recent traffic but loses on version 1's training holdout."""
    from driftline.worker.publish import publish

    settings = make_settings(tmp_path, "127.0.0.1:1")
    registry = registry_with_versions(settings, [])
    publish(registry, "m", tiny_results[0])
    outcome = run_retrain_job(_job(registry, tiny_results, lambda labels: 1 - labels))
    recent, trusted = outcome["response"], outcome["response"]["training_holdout"]
    assert recent["candidate"]["log_loss"] < recent["incumbent"]["log_loss"]  # the old rule would have promoted
    assert trusted["candidate"]["log_loss"] > 1.1 * trusted["incumbent"]["log_loss"]
    assert outcome["promoted"] is False and registry.alias("m") == "1"
    assert "training holdout" in outcome["response"]["decision"]


def test_without_a_stored_training_holdout_a_candidate_is_not_promoted(tiny_results, tmp_path):
    from driftline.worker.publish import publish

    settings = make_settings(tmp_path, "127.0.0.1:1")
    registry = registry_with_versions(settings, [])
    publish(registry, "m", tiny_results[0])
    (registry.version_dir("m", "1") / HOLDOUT_FILE).unlink()  # a version registered before holdouts were kept
    outcome = run_retrain_job(_job(registry, tiny_results, lambda labels: labels))
    assert outcome["promoted"] is False and outcome["response"]["training_holdout"] is None
    assert "kept no training holdout" in outcome["response"]["decision"] and registry.alias("m") == "1"
