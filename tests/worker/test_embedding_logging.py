"""With `log_embeddings` the worker's events carry the model's penultimate-layer activations, as its baseline knows them."""
from __future__ import annotations

import httpx
import numpy as np
import orjson
from sqlalchemy import select

from driftline.baseline import Baseline
from driftline.config import TOPIC_INFERENCE
from driftline.events import parse_inference
from driftline.store.db import session_scope
from driftline.store.models import BaselineRecord
from driftline.worker.activations import ACTIVATIONS, activations
from driftline.worker.dataset import generate_inputs
from driftline.worker.feature_transform import transform_row
from driftline.worker.server import Worker, WorkerConfig

from tests.support.worker_helpers import make_settings, read_topic, registry_with_versions, serving

MODEL = "credit-default"


def test_logged_activations_match_the_model_and_the_baseline(broker, tiny_results, tmp_path):
    settings = make_settings(tmp_path, broker)
    registry_with_versions(settings, tiny_results)
    worker = Worker(settings, WorkerConfig(model=MODEL, device="cpu", listen_for_labels=False, alias_poll_s=0,
                                           log_embeddings=True))
    inputs = generate_inputs(5, seed=21).to_dict("records")
    with serving(worker) as url:
        for i, row in enumerate(inputs):
            assert httpx.post(f"{url}/predict", json={"features": row, "request_id": f"act-{i}"}).status_code == 200
        raw = read_topic(broker, TOPIC_INFERENCE, {f"act-{i}" for i in range(5)})
        loaded = worker.current
    events = {i: parse_inference(raw[f"act-{i}"]) for i in range(5)}
    vectors = np.array([events[i].raw["embeddings"][ACTIVATIONS] for i in range(5)])
    expected = activations(loaded.net, loaded.transform, [transform_row(row) for row in inputs])
    np.testing.assert_allclose(vectors, expected, rtol=1e-5, atol=1e-6)
    with session_scope(settings.db_url) as session:
        baseline = Baseline.from_dict(session.scalars(select(BaselineRecord).where(
            BaselineRecord.model == MODEL, BaselineRecord.version == loaded.version)).one().summary)
    assert baseline.embeddings[ACTIVATIONS].dimension == vectors.shape[1] == tiny_results[0].model.hidden[-1]
    assert orjson.loads(raw["act-0"])["embeddings"].keys() == {ACTIVATIONS}
