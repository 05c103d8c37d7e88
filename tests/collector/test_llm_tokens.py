"""Generated answers through the collector: token counts and ttft/tpot folded into mergeable window summaries (the
columnar and the per-event decoders alike), a bad count dead-lettered with its reason, nothing else lost."""
from __future__ import annotations

import numpy as np
import orjson
import pytest

from driftline import defaults
from driftline.collector import folding
from driftline.collector.event_columns import parse_inference_columns
from driftline.collector.folding import FolderSetup, InferenceFolder
from driftline.config import TOPIC_INFERENCE
from driftline.events import parse_inference
from driftline.window_state import EventBatch, WindowState
from driftline.window_state.codec import STATE_FORMAT, unpack_document

T0 = 1_790_000_040_000


def message(i: int, **extra) -> bytes:
    doc = {"schema": "driftline.inference/v1", "event_id": f"e-{i}", "request_id": f"r-{i}", "ts": T0 + i,
           "model": "chat", "version": "1", "features": {"prompt_chars": float(10 + i)}, "prediction": "stop",
           "latency_ms": {"total": 400.0 + i, "ttft": 100.0 + i, "tpot": 5.0 + i / 10}, "tokens_in": 20 + i,
           "tokens_out": 60 + i}
    doc.update(extra)
    return orjson.dumps(doc)


def folder() -> InferenceFolder:
    return InferenceFolder(TOPIC_INFERENCE, 0, FolderSetup(60_000, 30_000, 1_000), baseline_for=lambda m, v: None,
                           stored_watermark=lambda m, v: None)


def fold(values: list[bytes]) -> WindowState:
    f = folder()
    f.process(list(range(len(values))), values)
    (partial,) = f.take().windows.values()
    return partial.state


def test_the_columnar_decoder_reads_token_counts_as_the_per_event_path_does():
    values = [message(i) for i in range(30)]
    columns = parse_inference_columns(values)
    assert columns is not None
    per_event = EventBatch.from_events([parse_inference(v) for v in values])
    for name in ("tokens_in", "tokens_out"):
        np.testing.assert_array_equal(columns.batch.tokens[name], per_event.tokens[name])
    for part in ("ttft", "tpot"):
        np.testing.assert_array_equal(columns.batch.latency_ms[part], per_event.latency_ms[part])


@pytest.mark.parametrize("bad", [{"tokens_out": -1}, {"tokens_in": 2.5}, {"tokens_out": defaults.TOKENS_MAX + 1},
                                 {"tokens_in": True}])
def test_a_batch_with_a_bad_count_is_left_to_the_per_event_path(bad):
    assert parse_inference_columns([message(0), message(1, **bad)]) is None


def test_bad_counts_become_dead_letters_and_the_rest_is_folded():
    values = [message(i) for i in range(20)]
    values[3] = message(3, tokens_out=-4)
    values[7] = message(7, tokens_in="many")
    values[9] = message(9, latency_ms={"total": 1.0, "ttft": -2.0})
    f = folder()
    f.process(list(range(20)), values)
    delta = f.take()
    letters = {letter.offset: letter for letter in delta.dead_letters}
    assert set(letters) == {3, 7, 9}
    assert letters[3].field == "tokens_out" and "outside 0" in letters[3].reason
    assert letters[7].field == "tokens_in" and "whole number" in letters[7].reason
    assert letters[9].field == "latency_ms.ttft" and "non-negative" in letters[9].reason
    (partial,) = delta.windows.values()
    kept = [i for i in range(20) if i not in (3, 7, 9)]
    state = partial.state
    assert state.tokens["tokens_out"].count == 17 and state.tokens["tokens_out"].sum == sum(60 + i for i in kept)
    assert state.tokens["tokens_in"].sum == sum(20 + i for i in kept)
    assert state.latency["ttft"].count == state.latency["tpot"].count == 17


def _same(a: WindowState, b: WindowState) -> None:
    assert set(a.tokens) == set(b.tokens) and set(a.latency) == set(b.latency)
    for mine, theirs in [*zip(a.tokens.values(), b.tokens.values()), *((a.latency[p], b.latency[p]) for p in a.latency)]:
        np.testing.assert_array_equal(mine.counts, theirs.counts)
        assert (mine.count, mine.min, mine.max, mine.out_of_range) == (theirs.count, theirs.min, theirs.max,
                                                                      theirs.out_of_range)
        assert mine.sum == pytest.approx(theirs.sum, rel=1e-12)


def test_summaries_merge_exactly_and_survive_the_stores_round_trip():
    values = [message(i) for i in range(60)]
    whole = fold(values)
    merged = fold(values[:25]).merge(fold(values[25:]))
    _same(merged, whole)
    assert whole.tokens["tokens_out"].sum == sum(60 + i for i in range(60))  # integers: the sum is exact
    assert merged.quantile("latency.ttft", 0.99) == whole.quantile("latency.ttft", 0.99)
    blob = merged.to_bytes()
    assert unpack_document(blob)["format"] == STATE_FORMAT == 3
    _same(WindowState.from_bytes(blob), whole)
    # a window whose events carry no counts stores none (and reads back with none)
    plain = fold([message(i, tokens_in=None, tokens_out=None) for i in range(5)])
    assert plain.tokens == {} and "tokens" not in unpack_document(plain.to_bytes())
    assert WindowState.from_bytes(plain.to_bytes()).tokens == {}
    _same(plain.merge(whole), whole.merge(plain))


def test_a_window_keeps_at_most_the_bounded_number_of_latency_parts():
    limit = defaults.LATENCY_MAX_PARTS
    values = [message(i, latency_ms={"total": 1.0, f"a{i}": 2.0, f"b{i}": 3.0}) for i in range(limit)]
    state = fold(values)
    assert len(state.latency) == limit and "total" in state.latency
    assert state.latency_left_out == 2 * limit + 1 - limit  # every value of a part past the bound, counted
    again = WindowState.from_bytes(state.to_bytes())
    assert again.latency_left_out == state.latency_left_out
    other = fold([message(100 + i, latency_ms={"total": 1.0, f"c{i}": 9.0}) for i in range(3)])
    merged = state.merge(other)
    assert len(merged.latency) == limit and merged.latency["total"].count == limit + 3
    assert merged.latency_left_out == state.latency_left_out + 3


def test_events_with_counts_take_the_columnar_path(monkeypatch):
    seen = []
    original = folding.parse_inference_columns
    monkeypatch.setattr(folding, "parse_inference_columns",
                        lambda values, max_ts_ms=None: seen.append(original(values, max_ts_ms)) or seen[-1])
    state = fold([message(i) for i in range(10)])
    assert seen and seen[0] is not None
    assert state.tokens["tokens_out"].count == 10
