"""Configuration sections ([drift], [data_quality], [skew], [model_quality], [latency], [alerts], [retention]) as pydantic models.

`SECTIONS` names every table the TOML file may hold beside the settings; each is
validated by the stage that reads it (`driftline config check` runs them all).

One way to read a TOML table: a `Table` subclass is the settings a table holds, each key with its
bounds, `parse_section` validates a mapping against it, and any unknown key, wrong type or value
out of bounds is a `UserError` naming the table and the key (a typo must not silently fall back
to a default threshold). A per-model override (`[x.models.NAME]`) sets only some keys: its
table as written is derived from the model's fields by `as_written`, never listed again.
"""
from __future__ import annotations

import difflib
import types
import typing
from typing import Annotated, Any, ClassVar, Mapping, Optional, Sequence, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, create_model, field_validator

from driftline import vocabulary
from driftline.errors import UserError

__all__ = ["SECTIONS", "Section", "Table", "as_written", "by_name", "close_match", "did_you_mean", "given", "parse_section"]

# The TOML file's tables, beside the settings themselves; any other table is an error naming it.
SECTIONS = ("drift", vocabulary.DATA_QUALITY, vocabulary.SKEW, vocabulary.MODEL_QUALITY,
            vocabulary.ESTIMATED_QUALITY, vocabulary.MULTIVARIATE_DRIFT, vocabulary.EMBEDDING_DRIFT,
            vocabulary.LATENCY, "alerts",
            "rollouts", "retention", "segments", "freshness", "cost", "capacity", "llm")
# How alike a typo and a known name must be to be offered (difflib's ratio; 0.5 pairs db_url with db).
CLOSE_MATCH_CUTOFF = 0.5

S = TypeVar("S", bound="Section")
T = TypeVar("T", bound="Table")


class Section(BaseModel):
    """A TOML table: unknown keys rejected, no silent coercion ("0.2" is not a number)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, arbitrary_types_allowed=True)


class Table(Section):
    """A section that is also the settings it holds, with its bounds (`Field(ge=...)`): built from a TOML
    table (`parse_section`) or in code, a bad value is a `UserError` naming `WHERE` and the key either way."""

    WHERE: ClassVar[str] = "[table]"

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise UserError(_describe(exc, type(self), self.WHERE)) from None

    def replace(self: T, **changes: Any) -> T:
        """A copy with `changes`, validated again (`model_copy(update=...)` would skip the bounds)."""
        return type(self)(**{**{name: getattr(self, name) for name in self.model_fields_set}, **changes})


def as_written(model: type[BaseModel], name: str | None = None, *, exclude: Sequence[str] = (),
               **extra: Any) -> Any:
    """`model`'s keys as a TOML table may write them, every one optional (None: not given), each with its bounds
    and its field validators (a TOML array made a tuple, a duration read): the table of a per-model override
    (`[x.models.NAME]`), whose values the model made from them checks across keys. A nested table is itself as
    written; `extra`: more fields, as `create_model` takes them. Built at run time (so typed Any): the keys are
    listed once, on `model`."""
    fields: dict[str, Any] = {key: (Optional[_written(field.annotation, field.metadata)], None)
                              for key, field in model.model_fields.items() if key not in exclude}
    validators: dict[str, Any] = {}
    for label, decorator in model.__pydantic_decorators__.field_validators.items():
        keys = [key for key in decorator.info.fields if key in fields]
        if keys:
            function = getattr(decorator.func, "__func__", decorator.func)  # bound to `model`: rebind to the copy
            validators[label] = field_validator(*keys, mode=decorator.info.mode)(classmethod(function))
    # in `model`'s module, so that a value kept beside it (DriftValues) pickles where it is named the same
    return create_model(name or f"{model.__name__}AsWritten", __base__=Section, __module__=model.__module__,
                        __validators__=validators, **fields, **extra)


def by_name(values: Any) -> tuple[Any, Any]:
    """An `as_written` extra field of tables by name (`[x.models.NAME]`), each a `values` table; none by default."""
    return types.GenericAlias(dict, (str, values)), {}


def _written(annotation: Any, metadata: Sequence[Any] = ()) -> Any:
    """One field's type as a table writes it: `T | None` -> T, a model (or a table of them by name) as written."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _written(options[0], metadata)
    elif origin is dict and isinstance(args[1], type) and issubclass(args[1], BaseModel):
        annotation = by_name(as_written(args[1]))[0]
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        annotation = as_written(annotation)
    return Annotated[annotation, *metadata] if metadata else annotation


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
    except UserError as exc:  # a Table names its own WHERE (validation runs its __init__): name `where` instead
        text = str(exc)
        if issubclass(model, Table) and where != model.WHERE and text.startswith(model.WHERE):
            raise UserError(where + text[len(model.WHERE):]) from None
        raise


def close_match(name: str, choices: Sequence[str]) -> str | None:
    """The choice closest to `name` (difflib), or None when none is close enough to be a typo of it."""
    close = difflib.get_close_matches(name, list(choices), n=max(1, len(choices)), cutoff=CLOSE_MATCH_CUTOFF)
    # a known name with a word added (db_url for db, psi_threshold for psi) beats a merely similar one (dashboard_url)
    extended = [choice for choice in sorted(choices, key=len, reverse=True)
                if name.lower().startswith(choice.lower() + "_")]
    return (extended or close or [None])[0]


def did_you_mean(name: str, choices: Sequence[str], form: str = "{!r}") -> str:
    """"; did you mean 'x'?" for the choice closest to `name`, or "" when none is close."""
    match = close_match(name, choices)
    return f"; did you mean {form.format(match)}?" if match is not None else ""


def given(section: Section) -> dict[str, Any]:
    """The keys the table set (defaults stay with the type the section configures)."""
    return {name: getattr(section, name) for name in section.model_fields_set}


def _describe(exc: ValidationError, model: type[Section], where: str) -> str:
    errors = exc.errors()
    extra = [e["loc"] for e in errors if e["type"] == "extra_forbidden"]
    if extra:
        keys = ", ".join(repr(".".join(str(p) for p in loc)) + _hint(model, loc) for loc in extra)
        text = f"{where}: unknown key{'s' if len(extra) > 1 else ''} {keys}"
        if all(len(loc) == 1 for loc in extra):  # a nested table lists its own keys, not these
            text += f"; expected one of {', '.join(sorted(model.model_fields))}"
        return text
    first = errors[0]
    key = ".".join(str(p) for p in first["loc"])
    message = first["msg"].removeprefix("Value error, ")  # a validator's own words, as it wrote them
    message = message[:1].lower() + message[1:]
    if not key:  # a check across keys (a model validator) names its keys itself
        return f"{where}: {message}"
    return f"{where} {key}: {message}, got {first.get('input')!r}"


def _hint(model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """" (did you mean 'x'?)" for the unknown key at `loc`, from the keys of the table that holds it."""
    table: Any = model
    for part in loc[:-1]:
        if isinstance(table, type) and issubclass(table, BaseModel):
            field = table.model_fields.get(str(part))
            table = field.annotation if field is not None else None
        elif typing.get_origin(table) is dict:  # a table of named tables: `part` is a name, not a key
            table = typing.get_args(table)[1]
        else:
            return ""
        if typing.get_origin(table) in (typing.Union, types.UnionType):  # `T | None` -> T
            options = [a for a in typing.get_args(table) if a is not type(None)]
            table = options[0] if len(options) == 1 else None
    if not (isinstance(table, type) and issubclass(table, BaseModel)):
        return ""
    match = close_match(str(loc[-1]), list(table.model_fields))
    return f" (did you mean {match!r}?)" if match is not None else ""
