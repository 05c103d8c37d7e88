"""The collector folds events' embeddings and dead-letters a bad vector, with its reason, losing nothing else."""
from __future__ import annotations

import numpy as np
import orjson
import pandas as pd
import pytest

from driftline.baseline import compute_baseline
from driftline.collector import folding
from driftline.collector.folding import FolderSetup, InferenceFolder
from driftline.config import TOPIC_INFERENCE
from driftline.embeddings.reference import fit_reference
from tests.support.embeddings import draw

T0 = 1_790_000_040_000


@pytest.fixture(scope="module")
def baseline():
    frame = pd.DataFrame({"x": np.arange(200.0)})
    return compute_baseline(frame).add_embeddings({"prompt": fit_reference(draw(np.random.default_rng(0), 600, 8),
                                                                           "prompt")})


def message(i: int, vector, **extra) -> bytes:
    return orjson.dumps({"schema": "driftline.inference/v1", "event_id": f"e-{i}", "request_id": f"r-{i}",
                         "ts": T0 + i, "model": "search", "version": "1", "features": {"x": float(i)},
                         "prediction": 0.5, "latency_ms": {"total": 4.0}, "embeddings": {"prompt": vector}, **extra})


@pytest.mark.parametrize("baseline_known", [True, False])
def test_bad_vectors_become_dead_letters_and_the_rest_is_folded(baseline, baseline_known):
    folder = InferenceFolder(TOPIC_INFERENCE, 0, FolderSetup(60_000, 30_000, 1_000),
                             baseline_for=lambda m, v: baseline if baseline_known else None,
                             stored_watermark=lambda m, v: None)
    vectors = draw(np.random.default_rng(1), 20, 8)
    values = [message(i, v.tolist()) for i, v in enumerate(vectors)]
    values[3] = message(3, [0.5] * 5)  # the wrong dimension
    values[7] = message(7, [0.5, "x"] + [0.5] * 6)  # not a number
    values[9] = message(9, [0.5] * 8, embeddings={"prompt": []})  # (the extra replaces it) an empty vector
    folder.process(list(range(20)), values)
    delta = folder.take()
    letters = {letter.offset: letter for letter in delta.dead_letters}
    assert set(letters) == {3, 7, 9}
    if baseline_known:  # named at parse time against the version's baseline
        assert letters[3].field == "embeddings.prompt" and "baseline has 8" in letters[3].reason
    else:  # without a baseline the window's first dimension holds: the odd one cannot be folded
        assert "could not be folded" in letters[3].reason and "5 dimensions" in letters[3].reason
    assert letters[7].field == "embeddings.prompt[1]" and "expected a number" in letters[7].reason
    assert letters[9].field == "embeddings.prompt" and "empty" in letters[9].reason
    (partial,) = delta.windows.values()
    summary = partial.state.embeddings["prompt"]
    assert partial.events == summary.count == 17
    assert (summary.binned == 17) is baseline_known
    kept = [i for i in range(20) if i not in (3, 7, 9)]
    np.testing.assert_allclose(summary.sum, vectors[kept].sum(axis=0))


def test_events_with_embeddings_take_the_per_event_path(monkeypatch):
    columnar = []
    original = folding.parse_inference_columns
    monkeypatch.setattr(folding, "parse_inference_columns",
                        lambda values, max_ts_ms=None: columnar.append(original(values, max_ts_ms)) or columnar[-1])
    folder = InferenceFolder(TOPIC_INFERENCE, 0, FolderSetup(60_000, 30_000, 1_000),
                             baseline_for=lambda m, v: None, stored_watermark=lambda m, v: None)
    folder.process([0, 1], [message(0, [1.0, 2.0]), message(1, [3.0, 4.0])])
    assert columnar == [None]
    (partial,) = folder.take().windows.values()
    np.testing.assert_allclose(partial.state.embeddings["prompt"].sum, [4.0, 6.0])


@pytest.mark.parametrize("baseline_known", [True, False])
def test_vectors_past_the_value_bound_are_dead_lettered_alone_and_the_window_is_kept(baseline, baseline_known):
    """40 vectors of 1e308 among 200 made the window's sum overflow, and all 240 events were lost."""
    from driftline.collector.decoders import _pack_delta

    folder = InferenceFolder(TOPIC_INFERENCE, 0, FolderSetup(60_000, 30_000, 1_000),
                             baseline_for=lambda m, v: baseline if baseline_known else None,
                             stored_watermark=lambda m, v: None)
    vectors = draw(np.random.default_rng(2), 200, 8)
    values = [message(i, v.tolist()) for i, v in enumerate(vectors)]
    for k in range(40):  # spread through the poll, as the attacker sent them
        values.insert(5 * k + 3, message(1_000 + k, [1e308] * 8))
    folder.process(list(range(240)), values)
    delta = folder.take()
    assert len(delta.dead_letters) == 40 and delta.valid == 200
    letter = delta.dead_letters[0]
    assert letter.field == "embeddings.prompt[0]" and "outside -1e+50 .. 1e+50" in letter.reason, letter.reason
    (partial,) = delta.windows.values()
    assert partial.events == partial.state.embeddings["prompt"].count == 200
    np.testing.assert_allclose(partial.state.embeddings["prompt"].sum, vectors.sum(axis=0))
    windows, letters = _pack_delta((TOPIC_INFERENCE, 0), delta)[:2]  # what a decoder hands over: it encodes
    assert len(windows) == 1 and len(letters) == 40
