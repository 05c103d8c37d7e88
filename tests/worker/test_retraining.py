"""POST /admin/retrain: trains on recent labelled traffic, registers with a baseline, idempotent per key."""
from __future__ import annotations

import asyncio

import httpx
from sqlalchemy import func, select

from driftline.client import InferenceLogger
from driftline.store.db import session_scope
from driftline.store.models import BaselineRecord, RetrainRequest
from worker.dataset import RiskModel, default_probability, generate_inputs, sample_labels
from worker.server import Worker, WorkerConfig

TOKEN = "retrain-token"


def _finished(url: str, request_id: str):
    document = httpx.get(f"{url}/admin/retrain/{request_id}", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    return document if document["status"] in ("succeeded", "failed", "rejected") else None


def test_retrain_on_labelled_traffic_is_idempotent_and_promotes_only_a_better_model(
        kit, broker, tiny_results, tmp_path, sqlite_url, unique_id):
    settings = kit.make_settings(tmp_path, broker, sqlite_url).model_copy(update={"retrain_token": TOKEN})
    registry = kit.registry_with_versions(settings, tiny_results)
    worker = Worker(settings, WorkerConfig(model=kit.MODEL, device="cpu", alias_poll_s=0.1, retrain_min_rows=200,
                                           retrain_epochs=3, log_events=False))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with kit.serving(worker) as url:
        assert httpx.post(f"{url}/admin/retrain").status_code == 401
        early = httpx.post(f"{url}/admin/retrain", json={"why": "too early"},
                           headers={**auth, "Idempotency-Key": f"{unique_id}-early"})
        assert early.status_code == 202
        rejected = kit.wait_for(lambda: _finished(url, early.json()["request_id"]), timeout_s=30)
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
        labeller = InferenceLogger(broker, model=kit.MODEL, version="1")
        for request_id, label in zip(ids, labels):
            labeller.log_label(request_id, int(label))
        labeller.log_label("someone-else", 1)
        assert labeller.flush(20)
        labeller.close()
        assert kit.wait_for(lambda: worker.traffic.counts()["labelled"] == 400, timeout_s=30)

        first = httpx.post(f"{url}/admin/retrain", json={"alert": "quality"},
                           headers={**auth, "Idempotency-Key": f"{unique_id}-a"})
        again = httpx.post(f"{url}/admin/retrain", json={"alert": "quality"},
                           headers={**auth, "Idempotency-Key": f"{unique_id}-a"})
        assert first.status_code == again.status_code == 202
        assert again.json()["request_id"] == first.json()["request_id"]
        assert first.json()["duplicate"] is False and again.json()["duplicate"] is True
        done = kit.wait_for(lambda: _finished(url, first.json()["request_id"]), timeout_s=60)
        assert done["status"] == "succeeded", done
        assert done["new_version"] == "3" and done["reason"] == {"alert": "quality"}
        candidate, incumbent = done["response"]["candidate"], done["response"]["incumbent"]
        assert candidate["rows"] == incumbent["rows"] == 80  # the same holdout: 20 % of 400
        assert done["promoted"] == (candidate["log_loss"] < incumbent["log_loss"])
        info = registry.get(kit.MODEL, "3")
        assert info.metrics["train_rows"] == 320 and "retrain request" in info.description
        with session_scope(settings.db_url) as session:
            assert session.scalar(select(BaselineRecord.rows).where(BaselineRecord.version == "3")) == 400
            assert session.scalar(select(func.count()).select_from(RetrainRequest)) == 2
        expected = "3" if done["promoted"] else "1"
        assert kit.wait_for(lambda: httpx.get(f"{url}/healthz").json()["version"] == expected)
        assert registry.alias(kit.MODEL) == expected
