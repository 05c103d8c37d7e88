"""Checking a POST /predict body against the model's input schema, with messages that name the field.

Rules: the body is a JSON object with a "features" object holding exactly the schema's
fields (a missing or unknown field is an error); a numeric field takes a finite number
or null; a categorical field takes a string or null. Null is accepted on purpose: a
value the caller knows is missing reaches the model (the transform imputes it) and the
monitor, which counts it as a data-quality problem, while a missing *key* is a client
bug. Out-of-range numbers and unseen categories are accepted for the same reason.

Refused with 422, before anything is counted or logged: a number whose magnitude is above
`defaults.VALUE_MAX_ABS` (1e50; its square would overflow a window's sums, so it is a bug or
an attack, not an out-of-range value), and text that is not valid Unicode text (a lone
UTF-16 surrogate, which no UTF-8 encoder accepts) or holds a control character, in any
string of the body: ids, categories and field names.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

import orjson

from driftline import defaults
from driftline.events import MAX_ID_CHARS, EventError, parse_timestamp
from driftline.json_types import json_type_name
from driftline.vocabulary import NUMERIC

MAX_CATEGORY_CHARS = 200
# Lone surrogates (unencodable as UTF-8) and C0/C1 control characters (NUL breaks PostgreSQL text).
_INVALID_TEXT = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


class InputError(Exception):
    """A request the client must fix: `status` (413 or 422), `message`, `field` (JSON path or None)."""

    def __init__(self, message: str, field: str | None = None, status: int = 422):
        super().__init__(message)
        self.message = message
        self.field = field
        self.status = status

    def body(self) -> dict[str, Any]:
        detail = f"{self.field}: {self.message}" if self.field else self.message
        return {"detail": detail, "field": self.field}


@dataclass(frozen=True, slots=True)
class PredictRequest:
    inputs: dict[str, Any]
    request_id: str | None
    entity_id: str | None
    # feature -> event time (epoch ms) of the value the caller's feature fetch served (freshness)
    feature_ts: dict[str, int] | None = None


def _decode(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    # orjson refuses NaN and Infinity; the standard parser reads them, so the
    # check below can name the field instead of reporting a syntax error.
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"the body is not valid JSON ({exc})") from None


def parse_predict(body: bytes, schema: Sequence[dict[str, Any]]) -> PredictRequest:
    doc = _decode(body)
    if not isinstance(doc, dict):
        raise InputError(f'expected a JSON object like {{"features": {{...}}}}, got {json_type_name(doc)}')
    _check_names(doc, None)
    unknown_top = set(doc) - {"features", "request_id", "entity_id", "feature_ts"}
    if unknown_top:
        raise InputError("unknown field; expected features, request_id, entity_id, feature_ts", sorted(unknown_top)[0])
    features = doc.get("features")
    if features is None:
        raise InputError("required field is missing", "features")
    if not isinstance(features, dict):
        raise InputError(f"expected an object of feature values, got {json_type_name(features)}", "features")
    _check_names(features, "features")
    known = {entry["name"]: entry["kind"] for entry in schema}
    for name in features:
        if name not in known:
            raise InputError(f"unknown feature; this model takes {', '.join(known)}", f"features.{name}")
    inputs: dict[str, Any] = {}
    for name, kind in known.items():
        if name not in features:
            raise InputError("required feature is missing (send null for a value that is not known)",
                             f"features.{name}")
        inputs[name] = check_value(features[name], kind, f"features.{name}")
    return PredictRequest(inputs, _optional_id(doc, "request_id"), _optional_id(doc, "entity_id"),
                          check_feature_ts(doc.get("feature_ts"), known))


def check_feature_ts(value: Any, known: dict[str, str]) -> dict[str, int] | None:
    """The request's `feature_ts`: {model feature: RFC 3339 time or epoch ms}, as epoch ms (None: not sent)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InputError(f"expected an object of feature times, got {json_type_name(value)}", "feature_ts")
    _check_names(value, "feature_ts")
    out = {}
    for name, stamp in value.items():
        if name not in known:
            raise InputError(f"unknown feature; this model takes {', '.join(known)}", f"feature_ts.{name}")
        try:
            out[name] = parse_timestamp(stamp, f"feature_ts.{name}")
        except EventError as exc:
            raise InputError(exc.reason, exc.field) from None
    return out


def check_value(value: Any, kind: str, field: str) -> Any:
    """One feature value of `kind` ("numeric" or "categorical"), as a request field at `field`."""
    if value is None:
        return None
    if kind == NUMERIC:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"expected a number or null, got {json_type_name(value)}", field)
        try:
            as_float = float(value)
        except OverflowError:
            raise InputError("the number is too large", field) from None
        if not math.isfinite(as_float):
            raise InputError(f"must be a finite number, got {value}", field)
        if abs(as_float) > defaults.VALUE_MAX_ABS:
            raise InputError(f"the magnitude is above {defaults.VALUE_MAX_ABS:g}", field)
        return value
    if not isinstance(value, str):
        raise InputError(f"expected a string or null, got {json_type_name(value)}", field)
    if len(value) > MAX_CATEGORY_CHARS:
        raise InputError(f"longer than {MAX_CATEGORY_CHARS} characters", field)
    _check_text(value, field)
    return value


def _optional_id(doc: dict[str, Any], field: str) -> str | None:
    return check_id(doc.get(field), field)


def check_id(value: Any, field: str) -> str | None:
    """A request or entity id: None, or a non-empty string of valid text up to MAX_ID_CHARS characters."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InputError(f"expected a non-empty string, got {json_type_name(value)}", field)
    if len(value) > MAX_ID_CHARS:
        raise InputError(f"longer than {MAX_ID_CHARS} characters", field)
    _check_text(value, field)
    return value


def _check_text(value: str, field: str | None) -> None:
    bad = _INVALID_TEXT.search(value)
    if bad is not None:
        what = "a lone UTF-16 surrogate" if "\ud800" <= bad.group() <= "\udfff" else "a control character"
        raise InputError(f"not valid text: {what} (U+{ord(bad.group()):04X}) at character {bad.start()}", field)


def _check_names(document: dict[str, Any], field: str | None) -> None:
    """Field names are echoed in error messages and events: they must be valid text too."""
    for name in document:
        if _INVALID_TEXT.search(name):
            _check_text(name, field)
