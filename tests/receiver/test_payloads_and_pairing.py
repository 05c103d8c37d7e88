"""The receiver's pure parts: reading KServe v1 / OIP v2 payloads, and pairing halves in bounded memory."""
from __future__ import annotations

import pytest

from driftline.events import EventError
from driftline.receiver.conversion import parse_ce_time
from driftline.receiver.pairing import REQUEST, RESPONSE, Half, Pairing
from driftline.receiver.payloads import request_rows, response_predictions

NAMES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]


def test_v1_positional_and_named_instances():
    assert request_rows({"instances": [[6.8, 2.8, 4.8, 1.4], [6.0, 3.4, 4.5, 1.6]]}, NAMES)[1] == dict(
        zip(NAMES, [6.0, 3.4, 4.5, 1.6]))
    assert request_rows({"instances": [{"a": 1, "b": "x"}]}, None) == [{"a": 1, "b": "x"}]
    assert response_predictions({"predictions": [1, 1]}) == [1, 1]


def test_v2_matrix_per_feature_and_nested_tensors():
    matrix = {"inputs": [{"name": "input-0", "shape": [2, 4], "datatype": "FP32",
                          "data": [6.8, 2.8, 4.8, 1.4, 6.0, 3.4, 4.5, 1.6]}]}
    assert request_rows(matrix, NAMES)[1]["petal_width"] == 1.6
    nested = {"inputs": [{"name": "input-0", "shape": [2, 4], "datatype": "FP32",
                          "data": [[6.8, 2.8, 4.8, 1.4], [6.0, 3.4, 4.5, 1.6]]}]}
    assert request_rows(nested, NAMES) == request_rows(matrix, NAMES)
    per_feature = {"inputs": [{"name": n, "shape": [1], "datatype": "FP64", "data": [float(i)]}
                              for i, n in enumerate(reversed(NAMES))]}
    assert request_rows(per_feature, NAMES) == [{"sepal_length": 3.0, "sepal_width": 2.0, "petal_length": 1.0,
                                                 "petal_width": 0.0}]
    probabilities = {"outputs": [{"name": "probs", "shape": [2, 3], "datatype": "FP32",
                                  "data": [0.1, 0.2, 0.7, 0.5, 0.25, 0.25]}]}
    assert response_predictions(probabilities) == [[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]]
    assert response_predictions({"outputs": [{"name": "p", "shape": [2, 1], "datatype": "INT64",
                                              "data": [1, 2]}]}) == [1, 2]


@pytest.mark.parametrize("doc, names, field", [
    ({"instances": [[1, 2, 3]]}, NAMES, "instances[0]"),  # 3 values for 4 features
    ({"instances": [[1, 2, 3, 4]]}, None, "instances[0]"),  # positional without a baseline
    ({"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32", "data": [1, 2]}]}, NAMES, "inputs[0].data"),
    ({"inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]}, NAMES, "inputs[0].shape"),
    ({"inputs": []}, NAMES, "instances"),
    ({"nothing": 1}, NAMES, "instances"),
])
def test_unreadable_requests_say_why(doc, names, field):
    with pytest.raises(EventError) as caught:
        request_rows(doc, names)
    assert caught.value.field == field


def test_ce_time_with_nanoseconds_as_go_writes_it():
    assert parse_ce_time("2026-01-02T03:04:05.123456789Z") == pytest.approx(1767323045123.456)
    assert parse_ce_time("not a time") is None


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def half(ce_id: str, kind: str) -> Half:
    return Half(("ns", "isvc", "predictor", ce_id), kind, ce_id, {}, {}, b"{}", 0.0)


@pytest.mark.parametrize("first, second", [(REQUEST, RESPONSE), (RESPONSE, REQUEST)])
def test_pairs_in_either_order_and_ignores_retries(first, second):
    pairing = Pairing(max_pending=10, wait_s=5, seen_max=10)
    assert pairing.offer(half("a", first)).pair is None
    assert pairing.offer(half("a", first)).duplicate  # a retry while waiting
    request, response = pairing.offer(half("a", second)).pair
    assert (request.kind, response.kind) == (REQUEST, RESPONSE)
    assert pairing.offer(half("a", second)).duplicate and pairing.offer(half("a", first)).duplicate
    assert len(pairing) == 0


def test_unpaired_halves_expire_and_the_late_other_half_is_not_kept():
    clock = Clock()
    pairing = Pairing(max_pending=10, wait_s=5, seen_max=10, clock=clock)
    pairing.offer(half("a", REQUEST))
    clock.now = 4.9
    assert pairing.expired() == []
    clock.now = 5.0
    assert [h.ce_id for h in pairing.expired()] == ["a"]
    assert pairing.offer(half("a", RESPONSE)).late
    assert len(pairing) == 0


def test_a_full_map_evicts_its_oldest_half():
    pairing = Pairing(max_pending=2, wait_s=5, seen_max=10)
    pairing.offer(half("a", REQUEST))
    pairing.offer(half("b", REQUEST))
    assert [h.ce_id for h in pairing.offer(half("c", REQUEST)).evicted] == ["a"]
    assert len(pairing) == 2
