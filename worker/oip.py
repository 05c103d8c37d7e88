"""Open Inference Protocol v2, the protocol-neutral half: tensors to rows, metadata, answers, errors.

The worker's model takes one row of named features; OIP carries named tensors. A request maps to
rows the way MLServer's pandas codec does: one input per feature (named as in the model metadata),
each of shape [N] or [N, 1], all with the same N; numbers as FP64/FP32/INT64 (any numeric datatype),
categories as BYTES. Row i becomes one /predict request (request id `ID:i` when N > 1, `ID` when
N = 1), checked by the same per-value rules (worker/validation.py). The answer is one output,
`prediction` (FP64, shape [N, 1]). REST (worker/oip_rest.py) and gRPC (worker/oip_grpc.py) adapt this.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from driftline.client import new_id
from driftline.rollouts import pinned_role
from driftline.vocabulary import CATEGORICAL, NUMERIC
from driftline.worker.validation import InputError, PredictRequest, check_id, check_value

OUTPUT_NAME = "prediction"
NUMBER_DATATYPES = frozenset({"FP64", "FP32", "FP16", "INT64", "INT32", "INT16", "INT8",
                              "UINT64", "UINT32", "UINT16", "UINT8"})
BYTES = "BYTES"
# The datatype each feature kind is listed with in the model metadata.
METADATA_DATATYPES = {NUMERIC: "FP64", CATEGORICAL: BYTES}
PLATFORM = "pytorch"


class OipError(Exception):
    """A request the protocol refuses: `status` is the HTTP status, `grpc_code` the name of a grpc.StatusCode."""

    def __init__(self, message: str, status: int = 400, grpc_code: str = "INVALID_ARGUMENT"):
        super().__init__(message)
        self.message = message
        self.status = status
        self.grpc_code = grpc_code

    @classmethod
    def not_found(cls, message: str) -> "OipError":
        return cls(message, 404, "NOT_FOUND")

    @classmethod
    def from_input_error(cls, exc: InputError) -> "OipError":
        message = f"{exc.field}: {exc.message}" if exc.field else exc.message
        if exc.status == 413:
            return cls(message, 413, "RESOURCE_EXHAUSTED")
        if exc.status == 408:
            return cls(message, 408, "DEADLINE_EXCEEDED")
        return cls(message, 400, "INVALID_ARGUMENT")


@dataclass(frozen=True, slots=True)
class Tensor:
    """One input tensor, protocol-neutral: `data` is flat, row-major."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    data: Sequence[Any]


def check_model(name: str, served: str) -> None:
    if name != served:
        raise OipError.not_found(f"unknown model {name!r}; this worker serves {served!r}")


def served_versions(production: Any, routing: Any) -> list[str]:
    """The versions a request may name: production, and the rollout plan's canary or A/B arms that are loaded."""
    return [production.version, *(v for v in routing.versions if v != production.version
                                  and pinned_role(routing.plan, production.version, v) is not None)]


def pinned(version: str, production: Any, routing: Any) -> tuple[Any, str]:
    """(the loaded version, its role) for a request naming `version` (worker.server's LoadedVersion, Routing);
    OipError 404 for a version that answers no request (unknown, or a shadow candidate)."""
    role = pinned_role(routing.plan, production.version, version)
    loaded = production if version == production.version else routing.versions.get(version)
    if role is None or loaded is None:
        raise OipError.not_found(f"version {version!r} is not served; the served versions are "
                                 f"{', '.join(served_versions(production, routing))} (production and the rollout "
                                 "plan's canary or A/B arms; the unversioned path follows the plan)")
    return loaded, role


def rows_from_tensors(tensors: Sequence[Tensor], schema: Sequence[dict[str, Any]], request_id: Any,
                      entity_id: Any = None) -> list[PredictRequest]:
    """The rows of a request, each checked like a /predict body; OipError (400) names what is wrong."""
    try:
        base_id = check_id(request_id, "id") if request_id != "" else None  # "": the protocol's "no id"
        entity = check_id(entity_id, "parameters.entity_id")
    except InputError as exc:
        raise OipError.from_input_error(exc) from None
    kinds = {entry["name"]: entry["kind"] for entry in schema}
    by_name: dict[str, Tensor] = {}
    for tensor in tensors:
        if tensor.name not in kinds:
            raise OipError(f"unknown input {tensor.name!r}; this model takes {', '.join(kinds)}")
        if tensor.name in by_name:
            raise OipError(f"input {tensor.name!r} is given twice")
        by_name[tensor.name] = tensor
    missing = [name for name in kinds if name not in by_name]
    if missing:
        raise OipError(f"missing input {missing[0]!r}: one input per feature, named as the model metadata lists "
                       f"them ({', '.join(kinds)})")
    rows_count: int | None = None
    for name, tensor in by_name.items():
        _check_datatype(tensor, kinds[name])  # first: a wrong datatype's values may sit in another gRPC field
        n = _rows_of(tensor)
        if rows_count is None:
            rows_count = n
        elif n != rows_count:
            raise OipError(f"input {name!r} has {n} rows, another input has {rows_count}: every input needs the "
                           "same number of rows")
        _check_datatype(tensor, kinds[name])
    assert rows_count is not None
    rows: list[dict[str, Any]] = [{} for _ in range(rows_count)]
    try:
        for name, kind in kinds.items():
            data = by_name[name].data
            for i in range(rows_count):
                rows[i][name] = check_value(data[i], kind, f"inputs.{name}[{i}]")
    except InputError as exc:
        raise OipError.from_input_error(exc) from None
    if rows_count == 1:
        return [PredictRequest(rows[0], base_id, entity)]
    base = base_id or new_id()
    return [PredictRequest(row, f"{base}:{i}", entity) for i, row in enumerate(rows)]


def check_rows(count: int, max_pending: int) -> None:
    """More rows than the admission bound could never be admitted together: a client error, not an overload."""
    if count > max_pending:
        raise OipError(f"{count} rows are more than the {max_pending} requests the worker admits at once "
                       "(--max-pending): split the request", 413, "RESOURCE_EXHAUSTED")


def _rows_of(tensor: Tensor) -> int:
    shape = tensor.shape
    if not (len(shape) == 1 or (len(shape) == 2 and shape[1] == 1)) or shape[0] < 1:
        raise OipError(f"input {tensor.name!r} has shape {list(shape)}; expected [N] or [N, 1] with N >= 1 "
                       "(one value per row)")
    if len(tensor.data) != shape[0]:
        raise OipError(f"input {tensor.name!r} has shape {list(shape)} but {len(tensor.data)} values")
    return shape[0]


def _check_datatype(tensor: Tensor, kind: str) -> None:
    if kind == NUMERIC and tensor.datatype not in NUMBER_DATATYPES:
        raise OipError(f"input {tensor.name!r} is numeric: datatype FP64, FP32 or INT64, got {tensor.datatype!r}")
    if kind == CATEGORICAL and tensor.datatype != BYTES:
        raise OipError(f"input {tensor.name!r} is categorical: datatype BYTES, got {tensor.datatype!r}")


def answer_version(answers: Sequence[dict[str, Any]]) -> tuple[str, list[str] | None]:
    """(model_version, per-row versions or None): rows a canary or A/B arm answered make the versions differ."""
    versions = [answer["version"] for answer in answers]
    if all(v == versions[0] for v in versions):
        return versions[0], None
    return ",".join(sorted(set(versions))), versions


def model_metadata(name: str, versions: Sequence[str], schema: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"name": name, "versions": list(versions), "platform": PLATFORM,
            "inputs": [{"name": entry["name"], "datatype": METADATA_DATATYPES[entry["kind"]], "shape": [-1, 1]}
                       for entry in schema],
            "outputs": [{"name": OUTPUT_NAME, "datatype": "FP64", "shape": [-1, 1]}]}


def predictions(answers: Sequence[dict[str, Any]]) -> list[float]:
    values = [float(answer["prediction"]) for answer in answers]
    if not all(math.isfinite(v) for v in values):  # a model bug: say so rather than send NaN in JSON
        raise ValueError("the model returned a value that is not a finite number")
    return values
