"""The collector keeps the model's own decision (`predicted_class`): in the window's decision counts, whichever
decoder took the batch, and beside the prediction it stores for the label join, so joined labels follow it."""
from __future__ import annotations

import numpy as np
import orjson

from driftline.collector import folding
from driftline.collector.folding import FolderSetup, InferenceFolder
from driftline.collector.labels import fold_pairs
from driftline.config import TOPIC_INFERENCE
from driftline.detectors.stats.quality import quality_metrics
from driftline.vocabulary import ACCURACY, PREDICTED_CLASS
from driftline.window_state import WindowState

T0 = 1_796_040_000_000


def messages(scores, decisions) -> list[bytes]:
    return [orjson.dumps({"schema": "driftline.inference/v1", "event_id": f"e-{i}", "request_id": f"r-{i}",
                          "ts": T0 + i, "model": "m", "version": "1", "features": {"x": float(s)},
                          "prediction": float(s), "latency_ms": {"total": 4.0}, PREDICTED_CLASS: d})
            for i, (s, d) in enumerate(zip(scores, decisions))]


def folded(values: list[bytes], monkeypatch=None):
    folder = InferenceFolder(TOPIC_INFERENCE, 0, FolderSetup(60_000, 30_000, 10_000), baseline_for=lambda m, v: None,
                             stored_watermark=lambda m, v: None)
    folder.process(list(range(len(values))), values)
    delta = folder.take()
    assert not delta.dead_letters
    (partial,) = delta.windows.values()
    return partial.state, delta.predictions


def test_both_decoders_count_the_decisions_and_store_them_for_the_label_join(monkeypatch):
    rng = np.random.default_rng(3)
    scores = rng.uniform(size=300)
    numbers = [int(s >= 0.3) for s in scores]  # one JSON type: the columnar decoder takes the batch
    columnar = []
    original = folding.parse_inference_columns
    monkeypatch.setattr(folding, "parse_inference_columns",
                        lambda *a, **k: columnar.append(result := original(*a, **k)) or result)
    state, predictions = folded(messages(scores, numbers))
    assert columnar[-1] is not None and columnar[-1].batch.decisions is not None
    # the same decisions, the first one a boolean: two JSON types in one column, decoded event by event
    by_event, _ = folded(messages(scores, [bool(numbers[0])] + numbers[1:]))
    for counts in (state.decisions, by_event.decisions):
        assert counts.rows.sum() == 300 and counts.called.sum() == sum(numbers)
    assert columnar[-1] is None  # a boolean beside numbers: the per-event path

    stored = {row.request_id: row.prediction for row in predictions.values()}
    assert stored["r-1"] == {"prediction": float(scores[1]), PREDICTED_CLASS: float(numbers[1])}
    joined = WindowState.empty(None)
    outcome = (rng.uniform(size=300) < scores).astype(int)
    assert fold_pairs(joined, [stored[f"r-{i}"] for i in range(300)], outcome.tolist()) == 0
    assert joined.labels.called_positives.sum() + joined.labels.called_negatives.sum() == sum(numbers)
    assert quality_metrics(joined.labels)[ACCURACY] == np.mean(np.array(numbers) == outcome)
