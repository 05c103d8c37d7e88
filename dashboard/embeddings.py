"""Pure shaping of an embedding's verdict for the model page (no I/O, no Streamlit): every test the
`embedding_drift` family ran on the newest window, with its value, its line and its vote, and the clusters whose
share moved most with example request ids.

The verdict is the detector's (its `details`, `driftline.vocabulary.EmbeddingDetails`); nothing is re-decided here.
"""
from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from driftline.vocabulary import CHI2, INSUFFICIENT_DATA

TEST_COLUMNS = ["test", "value", "line", "p-value", "vote"]
CLUSTER_COLUMNS = ["cluster", "window share", "training share", "change", "example request ids"]
# Request ids shown per moved cluster: enough to look a few up, short enough for a table cell.
EXAMPLES_SHOWN = 3


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _vote(test: Mapping[str, Any]) -> str:
    if test.get(INSUFFICIENT_DATA):
        return "insufficient data"
    return "drift" if test.get("drift") else "no drift"


def embedding_tests(details: Mapping[str, Any]) -> pd.DataFrame:
    """One row per test of one embedding's verdict, in the order the decision rule lists them.

    >>> embedding_tests({"mmd": {"value": 0.02, "threshold": 0.01, "p_value": 0.001, "drift": True},
    ...                  "cosine_distance": 0.1})[["test", "vote"]].values.tolist()
    [['MMD² (random features)', 'drift'], ['cosine distance of the means', 'reported']]
    """
    rows: list[tuple] = []

    def add(name: str, test: Any, value_key: str, line_key: str | None = "threshold") -> None:
        # a test that measured nothing (and does not say why) is left out rather than shown as a vote
        if isinstance(test, Mapping) and (_number(test.get(value_key)) is not None or test.get(INSUFFICIENT_DATA)):
            rows.append((name, _number(test.get(value_key)), _number(test.get(line_key)) if line_key else None,
                         _number(test.get("p_value")), _vote(test)))

    add("MMD² (random features)", details.get("mmd"), "value")
    add("drifted principal components (share)", details.get("drifted_components"), "share")
    add("cluster histogram (chi-square)", details.get("clusters"), CHI2, None)
    add("mean shift (whitened distance)", details.get("mean"), "value")
    add("domain classifier (AUC)", details.get("domain_classifier"), "auc")
    cosine = _number(details.get("cosine_distance"))
    if cosine is not None:
        rows.append(("cosine distance of the means", cosine, None, None, "reported"))
    return pd.DataFrame(rows, columns=TEST_COLUMNS)


def moved_clusters(details: Mapping[str, Any]) -> pd.DataFrame:
    """The clusters whose share of the window moved most from training, with a few of their request ids."""
    clusters = details.get("clusters")
    moved = clusters.get("moved") if isinstance(clusters, Mapping) else None
    rows = [(int(m["cluster"]), _number(m.get("share")), _number(m.get("reference_share")), _number(m.get("change")),
             ", ".join(str(r) for r in (m.get("examples") or [])[:EXAMPLES_SHOWN]))
            for m in (moved or []) if isinstance(m, Mapping) and isinstance(m.get("cluster"), int)]
    return pd.DataFrame(rows, columns=CLUSTER_COLUMNS)
