"""The model page shows embedding drift as a section of its own, per embedding, when a version's windows have it,
with every test behind the newest window's verdict (the domain classifier's AUC among them) and the moved clusters."""
from __future__ import annotations

from sqlalchemy import select

from driftline.store.db import session_scope
from driftline.store.models import DetectorResult
from driftline.vocabulary import DATASET_DRIFT, EMBEDDING_DRIFT
from tests.dashboard.test_app import assert_clean, open_app
from driftline.dashboard.embeddings import embedding_tests, moved_clusters
from tests.support.demo_store import CREDIT

# What the family stores for a drifted embedding (detectors/families/embedding_drift.py's judge_embedding).
VERDICT = {"drift": True, "rows": 300, "dimension": 16,
           "mmd": {"value": 0.01, "threshold": 0.004, "p_value": 0.0004, "drift": True, "bandwidth": 1.3},
           "drifted_components": {"share": 0.25, "threshold": 0.2, "drift": True, "level": 0.0125,
                                  "drifted": [0, 3], "p_values": [0.001, 0.4]},
           "clusters": {"chi2": 41.5, "p_value": 0.002, "drift": True, "jensenshannon": 0.12,
                        "moved": [{"cluster": 4, "share": 0.31, "reference_share": 0.12, "change": 0.19,
                                   "examples": ["req-17", "req-3", "req-99", "req-5"]}]},
           "cosine_distance": 0.08,
           "domain_classifier": {"auc": 0.71, "threshold": 0.6, "drift": True, "rows": 300, "top_features": []}}


def test_embedding_drift_gets_a_section_on_the_model_page(seeded):
    url, _summary = seeded
    with session_scope(url) as session:
        windows = session.scalars(select(DetectorResult).where(
            DetectorResult.model == CREDIT, DetectorResult.version == "2", DetectorResult.detector == DATASET_DRIFT,
            DetectorResult.segment == "")).all()
        for i, window in enumerate(windows):
            session.add(DetectorResult(
                model=CREDIT, version="2", window_start_ms=window.window_start_ms, window_end_ms=window.window_end_ms,
                detector=EMBEDDING_DRIFT, feature="activations", metric="mmd2", value=0.001 * (1 + (i == 0) * 9),
                threshold=0.004, breached=i == len(windows) - 1,
                details=VERDICT if i == len(windows) - 1 else {"rows": 300}, segment=""))
    assert windows
    at = open_app("model", model=CREDIT, version="2")
    assert_clean(at)
    assert "Embedding drift" in [h.value for h in at.header]
    assert any("activations" in c.value for c in at.caption), [c.value for c in at.caption]
    tables = [t.value for t in at.dataframe]
    tests = next(t for t in tables if "test" in t.columns and "domain classifier (AUC)" in set(t["test"]))
    assert tests.set_index("test").loc["domain classifier (AUC)", "value"] == 0.71
    moved = next(t for t in tables if "example request ids" in t.columns)
    assert moved["example request ids"].tolist() == ["req-17, req-3, req-99"]


def test_every_test_of_a_verdict_gets_a_row_with_its_vote():
    tests = embedding_tests(VERDICT).set_index("test")
    assert list(tests.index) == ["MMD² (random features)", "drifted principal components (share)",
                                 "cluster histogram (chi-square)", "domain classifier (AUC)",
                                 "cosine distance of the means"]
    assert tests.loc["drifted principal components (share)", ["value", "line"]].tolist() == [0.25, 0.2]
    assert tests.loc["cluster histogram (chi-square)", "p-value"] == 0.002
    assert tests.loc["cosine distance of the means", "vote"] == "reported"
    starved = dict(VERDICT, domain_classifier={"auc": None, "drift": False, "insufficient_data": True, "rows": 12})
    assert embedding_tests(starved).set_index("test").loc["domain classifier (AUC)", "vote"] == "insufficient data"


def test_hostile_details_give_empty_tables_not_errors():
    for details in ({}, {"mmd": "oops", "clusters": {"moved": [{"cluster": "x"}, None, 3]}}, {"cosine_distance": True}):
        assert embedding_tests(details).empty
        assert moved_clusters(details).empty
