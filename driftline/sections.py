"""Configuration sections ([drift], [data_quality], [skew], [model_quality], [latency], [alerts], [retention]) as pydantic models.

One way to read a TOML table: a `Section` subclass lists the keys a table may hold,
`parse_section` validates a mapping against it, and any unknown key or wrong type
is a `UserError` naming the table and the key (a typo must not silently fall back
to a default threshold).
"""
from __future__ import annotations

from typing import Any, Mapping, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from driftline.errors import UserError

__all__ = ["Section", "given", "parse_section"]

S = TypeVar("S", bound="Section")


class Section(BaseModel):
    """A TOML table: unknown keys rejected, no silent coercion ("0.2" is not a number)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, arbitrary_types_allowed=True)


def parse_section(model: type[S], mapping: Any, where: str) -> S:
    """`mapping` (None: empty) validated as `model`; a `UserError` naming `where` and the key otherwise."""
    if mapping is None:
        mapping = {}
    if not isinstance(mapping, Mapping):
        raise UserError(f"{where} must be a table, got {mapping!r}")
    try:
        return model.model_validate(dict(mapping))
    except ValidationError as exc:
        raise UserError(_describe(exc, model, where)) from None


def given(section: Section) -> dict[str, Any]:
    """The keys the table set (defaults stay with the type the section configures)."""
    return {name: getattr(section, name) for name in section.model_fields_set}


def _describe(exc: ValidationError, model: type[Section], where: str) -> str:
    errors = exc.errors()
    extra = [e["loc"] for e in errors if e["type"] == "extra_forbidden"]
    if extra:
        keys = ", ".join(repr(".".join(str(p) for p in loc)) for loc in extra)
        text = f"{where}: unknown key{'s' if len(extra) > 1 else ''} {keys}"
        if all(len(loc) == 1 for loc in extra):  # a nested table lists its own keys, not these
            text += f"; expected one of {', '.join(sorted(model.model_fields))}"
        return text
    first = errors[0]
    key = ".".join(str(p) for p in first["loc"])
    return f"{where} {key}: {first['msg'].lower()}, got {first.get('input')!r}"
