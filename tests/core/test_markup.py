"""driftline.markup: the one sanitiser for values that reach an HTML report."""
from __future__ import annotations

import pandas as pd
import pytest

from driftline.markup import INERT_LT, inert, inert_report_inputs


def test_inert_replaces_every_lt_and_leaves_other_values_alone():
    assert inert("</script><!--x-->") == f"{INERT_LT}/script>{INERT_LT}!--x-->"
    assert inert(3.5) == 3.5 and inert(None) is None and inert("<=50K") == f"{INERT_LT}=50K"


def test_report_inputs_rename_columns_alike_and_keep_numeric_values():
    ref = pd.DataFrame({"<a>": ["<x>", "y"], "n": [1.0, 2.0]})
    cur = pd.DataFrame({"<a>": ["<z>", "y"], "n": [3.0, 4.0]})
    ref2, cur2, numeric, categorical = inert_report_inputs(ref, cur, ["n"], ["<a>"])
    assert categorical == [f"{INERT_LT}a>"] and numeric == ["n"]
    assert list(ref2.columns) == list(cur2.columns) == [f"{INERT_LT}a>", "n"]
    assert cur2[f"{INERT_LT}a>"].tolist() == [f"{INERT_LT}z>", "y"] and cur2["n"].tolist() == [3.0, 4.0]
    assert list(ref.columns) == ["<a>", "n"]  # the caller's frames are not changed


def test_two_names_that_would_look_the_same_are_a_clear_error():
    frame = pd.DataFrame({"<a": [1], f"{INERT_LT}a": [2]})
    with pytest.raises(ValueError, match="would look the same"):
        inert_report_inputs(frame, frame, ["<a", f"{INERT_LT}a"], [])
