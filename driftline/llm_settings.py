"""The `[llm]` table: how traces of LLM and RAG services become events (docs/llm.md).

``[llm.models."NAME"]`` maps a model as the trace names it (gen_ai.request.model, else gen_ai.response.model) to
the driftline `model` and `version` its events carry (default: the requested model, and the model that answered);
a trace that names no model (a semantic-cache hit, which calls no LLM) is mapped by its service's name
(the resource's ``service.name``) instead, and without a mapping its model is the service and its version
"unversioned";
``[llm.prices."NAME"]`` prices a model's tokens (per million, input and output) for the `cost_usd` descriptor;
``refusal_patterns`` (regular expressions, case-insensitive, searched in an answer's first
`REFUSAL_SEARCH_CHARS` characters) say what a refused answer looks like.
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Mapping

from pydantic import Field, field_validator

from driftline.names import is_safe_name
from driftline.toml_sections import Table, parse_section

__all__ = ["DEFAULT_REFUSAL_PATTERNS", "LlmSettings", "ModelMapping", "TokenPrice", "REFUSAL_SEARCH_CHARS"]

# Answers that decline rather than answer, as the common chat models word it; a refusal rate that moves is a
# safety-filter or prompt change the token counts do not show.
DEFAULT_REFUSAL_PATTERNS = (
    r"\bI(?:'m| am) (?:sorry|afraid),? (?:but )?I (?:can(?:'|no)t|am unable|won't)",
    r"\bI (?:can(?:'|no)t|won't) (?:help|assist|provide|comply|answer)",
    r"\bI(?:'m| am) (?:unable|not able) to (?:help|assist|provide|answer|comply)",
    r"\bas an AI(?: language model)?,? I (?:can(?:'|no)t|am unable|don't)",
    r"\bI don't have (?:enough )?information (?:to|about)",
)
REFUSAL_SEARCH_CHARS = 500
_Money = Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]


class ModelMapping(Table):
    WHERE = "[llm.models.NAME]"

    model: str | None = None
    version: str | None = None

    @field_validator("model", "version")
    @classmethod
    def _safe(cls, value: str | None) -> str | None:
        if value is not None and not is_safe_name(value):
            raise ValueError(f"{value[:64]!r} must be letters, digits, '.', '_' or '-'")
        return value


class TokenPrice(Table):
    WHERE = "[llm.prices.NAME]"

    input_per_million: _Money = 0.0
    output_per_million: _Money = 0.0


class LlmSettings(Table):
    WHERE = "[llm]"

    models: dict[str, ModelMapping] = Field(default_factory=dict)
    prices: dict[str, TokenPrice] = Field(default_factory=dict)
    refusal_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_REFUSAL_PATTERNS), max_length=100)

    @field_validator("refusal_patterns")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{pattern[:64]!r} is no regular expression: {exc}") from None
        return patterns

    def refusal(self) -> re.Pattern[str]:
        """One pattern of them all (never matches when there are none)."""
        return re.compile("|".join(f"(?:{p})" for p in self.refusal_patterns) or r"(?!x)x", re.IGNORECASE)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None) -> "LlmSettings":
        return parse_section(cls, mapping, cls.WHERE)
