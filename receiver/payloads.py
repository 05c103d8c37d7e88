"""Rows out of serving payloads: KServe v1 (`instances` / `predictions`) and Open Inference Protocol v2 tensors.

Pure functions over decoded JSON; a payload that cannot be read raises `EventError` with the reason
and the JSON path, which becomes the dead letter's reason and field.

* v1 request ``{"instances": [row, ...]}``: a row is an object (feature name -> value) or a list
  read positionally against the registered feature names, or against the version's raw input names
  when it has as many values as they are (a lone scalar for a one-feature model).
* v1 response ``{"predictions": [p, ...]}``: one prediction per row (number, label or probabilities).
* v2 request ``{"inputs": [{"name", "shape", "datatype", "data"}, ...]}``: one tensor per feature
  (shape ``[N]`` or ``[N, 1]``, named as registered; a registered feature without a tensor is left
  out of the rows, and other tensors are kept by their names, as a model's raw inputs are), or a
  single ``[N, F]`` tensor whose columns are the registered features (or the raw inputs) in order.
  ``data`` may be flat (row-major) or nested.
* v2 response ``{"outputs": [...]}``: the first output (or the one named by `output`); shape ``[N]``
  or ``[N, 1]`` gives a scalar per row, ``[N, K]`` a list of K values per row.
"""
from __future__ import annotations

from typing import Any, Sequence

from driftline.events import EventError
from driftline.json_types import json_type_name


def _flatten(data: Any) -> list[Any]:
    """A tensor's `data`, nested or flat, as one row-major list."""
    if not isinstance(data, list):
        return [data]
    out: list[Any] = []
    stack = [iter(data)]
    while stack:  # iterative: a hostile nesting depth cannot exhaust the recursion limit
        item = next(stack[-1], _END)
        if item is _END:
            stack.pop()
        elif isinstance(item, list):
            stack.append(iter(item))
        else:
            out.append(item)
    return out


_END = object()


def _shape(tensor: dict[str, Any], field: str) -> list[int]:
    shape = tensor.get("shape")
    if not isinstance(shape, list) or not shape or not all(type(d) is int and d >= 0 for d in shape):
        raise EventError("expected a list of non-negative integers", f"{field}.shape")
    return shape


def _tensor_rows(tensor: Any, field: str) -> tuple[int, int, list[Any]]:
    """(rows, columns, flat values) of one v2 tensor; a 1-d tensor is N rows of one column."""
    if not isinstance(tensor, dict):
        raise EventError(f"expected a tensor object, got {json_type_name(tensor)}", field)
    shape = _shape(tensor, field)
    if len(shape) > 2:
        raise EventError(f"expected a tensor of shape [N] or [N, K], got {shape}", f"{field}.shape")
    rows, columns = shape[0], (shape[1] if len(shape) == 2 else 1)
    values = _flatten(tensor.get("data"))
    if len(values) != rows * columns:
        raise EventError(f"shape {shape} needs {rows * columns} values, data has {len(values)}", f"{field}.data")
    return rows, columns, values


def _tensors(doc: Any, key: str) -> list[Any]:
    tensors = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(tensors, list) or not tensors:
        raise EventError(f"expected a non-empty list of tensors, got {json_type_name(tensors)}", key)
    return tensors


def is_v2(doc: Any, key: str) -> bool:
    """True when `doc` carries v2 tensors under `key` ("inputs" or "outputs"), not v1 rows."""
    tensors = doc.get(key) if isinstance(doc, dict) else None
    return isinstance(tensors, list) and bool(tensors) and isinstance(tensors[0], dict) and "datatype" in tensors[0]


def rows_of(doc: Any, request: bool) -> int:
    """The rows a body holds, read without reading them: a request's instances or first input tensor's rows, a
    response's predictions or first output's rows; 0 when it cannot say (the pair is then dead-lettered)."""
    if not isinstance(doc, dict):
        return 0
    tensors_key, rows_key = ("inputs", "instances") if request else ("outputs", "predictions")
    if is_v2(doc, tensors_key):
        shape = doc[tensors_key][0].get("shape")
        ok = isinstance(shape, list) and shape and type(shape[0]) is int and shape[0] >= 0
        return shape[0] if ok else 0
    items = doc.get(rows_key)
    return len(items) if isinstance(items, list) else 0


def request_rows(doc: Any, feature_names: Sequence[str] | None,
                 input_names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The rows of a v1 or v2 request body; `feature_names`: the registered names, in training order;
    `input_names`: the version's raw inputs, in order, when a registered transform makes the features."""
    if not isinstance(doc, dict):
        raise EventError(f"expected a JSON object, got {json_type_name(doc)}")
    if is_v2(doc, "inputs"):
        return _v2_request_rows(_tensors(doc, "inputs"), feature_names, input_names)
    instances = doc.get("instances")
    if not isinstance(instances, list) or not instances:
        raise EventError("expected a non-empty list of instances (KServe v1) or v2 \"inputs\" tensors",
                         "instances")
    return [_v1_row(row, feature_names, input_names, f"instances[{i}]") for i, row in enumerate(instances)]


def _v1_row(row: Any, names: Sequence[str] | None, input_names: Sequence[str] | None, field: str) -> dict[str, Any]:
    if isinstance(row, dict):
        return dict(row)
    values = row if isinstance(row, list) else [row]
    for order in (names, input_names):
        if order and len(values) == len(order):
            return dict(zip(order, values))
    if names is None:
        raise EventError("a positional instance needs the model version's registered feature names; register "
                         "its baseline (driftline baseline) or send objects of named features", field)
    raw = f" and {len(input_names)} raw inputs" if input_names else ""
    raise EventError(f"{len(values)} values, the registered baseline has {len(names)} features{raw}", field)


def _v2_request_rows(tensors: list[Any], names: Sequence[str] | None,
                     input_names: Sequence[str] | None) -> list[dict[str, Any]]:
    named = {t.get("name"): i for i, t in enumerate(tensors) if isinstance(t, dict)}
    if names is not None and all(name in named for name in names):
        return _per_feature_rows(tensors, [(name, named[name]) for name in names])
    known = {*(names or ()), *(input_names or ())}
    if len(tensors) == 1 and not _one_named_column(tensors[0], known):
        # one [N, F] matrix: its columns are the registered features (or the raw inputs), in order
        if names is None and not input_names:
            raise EventError("a single input tensor needs the model version's registered feature names for its "
                             "columns; register its baseline (driftline baseline)", "inputs[0]")
        rows, columns, values = _tensor_rows(tensors[0], "inputs[0]")
        for order in (names, input_names):
            if order and columns == len(order):
                return [dict(zip(order, values[r * columns:(r + 1) * columns])) for r in range(rows)]
        raw = f" and {len(input_names)} raw inputs" if input_names else ""
        raise EventError(f"{columns} columns, the registered baseline has {len(names or ())} features{raw}",
                         "inputs[0].shape")
    # one tensor per column, named: a registered feature without one is missing from the rows (counted as
    # missing, as an event without it is), and other names stay (a registered transform's raw inputs)
    by_name: list[tuple[str, int]] = []
    for i, tensor in enumerate(tensors):
        name = tensor.get("name") if isinstance(tensor, dict) else None
        if not isinstance(name, str) or not name:
            raise EventError("expected the input tensor's name, a non-empty string", f"inputs[{i}].name")
        if any(name == given for given, _ in by_name):
            raise EventError(f"two input tensors are named {name!r}", f"inputs[{i}].name")
        by_name.append((name, i))
    return _per_feature_rows(tensors, by_name)


def _one_named_column(tensor: Any, known: set[str]) -> bool:
    """Whether a lone tensor is one named column ([N] or [N, 1] named as a feature or raw input), not a matrix."""
    if not isinstance(tensor, dict) or tensor.get("name") not in known:
        return False
    shape = tensor.get("shape")
    return isinstance(shape, list) and (len(shape) == 1 or (len(shape) == 2 and shape[1] == 1))


def _per_feature_rows(tensors: list[Any], columns: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """Rows from one single-column tensor per feature: (feature name, tensor index)."""
    columns_of: dict[str, list[Any]] = {}
    for name, i in columns:
        _rows, width, values = _tensor_rows(tensors[i], f"inputs[{i}]")
        if width != 1:
            raise EventError(f"a per-feature tensor has one column, {name!r} has {width}", f"inputs[{i}].shape")
        columns_of[name] = values
    counts = {len(values) for values in columns_of.values()}
    if len(counts) != 1:
        raise EventError(f"the input tensors have different row counts {sorted(counts)}", "inputs")
    (rows,) = counts
    return [{name: values[r] for name, values in columns_of.items()} for r in range(rows)]


def response_predictions(doc: Any, output: str | None = None) -> list[Any]:
    """One prediction per row of a v1 or v2 response body (`output`: the v2 output to read; default the first)."""
    if not isinstance(doc, dict):
        raise EventError(f"expected a JSON object, got {json_type_name(doc)}")
    if is_v2(doc, "outputs"):
        tensors = _tensors(doc, "outputs")
        index = 0
        if output is not None:
            index = next((i for i, t in enumerate(tensors) if isinstance(t, dict) and t.get("name") == output), -1)
            if index < 0:
                raise EventError(f"no output tensor named {output!r}", "outputs")
        rows, columns, values = _tensor_rows(tensors[index], f"outputs[{index}]")
        if columns == 1:
            return values
        return [values[r * columns:(r + 1) * columns] for r in range(rows)]
    predictions = doc.get("predictions")
    if not isinstance(predictions, list) or not predictions:
        raise EventError("expected a non-empty list of predictions (KServe v1) or v2 \"outputs\" tensors",
                         "predictions")
    return predictions


def response_error(doc: Any) -> str | None:
    """The error message of an error response (`{"error": "..."}`, both protocols), else None."""
    if isinstance(doc, dict) and isinstance(doc.get("error"), str) and doc["error"]:
        return doc["error"]
    return None
