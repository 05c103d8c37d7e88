"""Model and version names: one safe alphabet, checked wherever a name enters.

A name becomes a folder under the artifacts directory, a label on /metrics and a
key in the store, so it may not hold path separators, dots that climb (`..`),
whitespace or control characters.
"""
from __future__ import annotations

import re

# Letters, digits, and . _ - inside; starts with a letter or digit (so never "." or "..").
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
MAX_NAME_CHARS = 128
_NAME_RE = re.compile(NAME_PATTERN)


def is_safe_name(name: object) -> bool:
    """True when `name` is a string in the safe alphabet (no '..', no separators)."""
    return type(name) is str and _NAME_RE.fullmatch(name) is not None and ".." not in name


def name_problem(name: object) -> str | None:
    """Why `name` cannot be a model or version name, in words; None when it can."""
    if type(name) is not str:
        return f"expected a string, got {type(name).__name__}"
    if is_safe_name(name):
        return None
    return (f"expected 1-{MAX_NAME_CHARS} characters of letters, digits, '.', '_' or '-', "
            "starting with a letter or digit and without '..'")
