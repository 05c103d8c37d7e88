"""Comparing two baselines' stored JSON: what must be equal, and the rounding that merged float sums may carry."""
from __future__ import annotations

import math
from typing import Any

# The documented bound for what rounding may move (merged moments, bin and loss sums added part by part).
REL = 1e-9


def assert_same(got: Any, expected: Any, path: str = "baseline", rel: float = REL) -> None:
    """Equal, floats within `rel` (relative, or absolute near zero); everything else, dict order too, exactly."""
    if isinstance(expected, dict):
        assert isinstance(got, dict) and list(got) == list(expected), path
        for key in expected:
            assert_same(got[key], expected[key], f"{path}.{key}", rel)
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), path
        for i, (a, b) in enumerate(zip(got, expected)):
            assert_same(a, b, f"{path}[{i}]", rel)
    elif isinstance(expected, float) and not isinstance(got, bool):
        assert isinstance(got, (int, float)), path
        assert math.isclose(got, expected, rel_tol=rel, abs_tol=rel * 1e-3), (path, got, expected)
    else:
        assert got == expected, (path, got, expected)
