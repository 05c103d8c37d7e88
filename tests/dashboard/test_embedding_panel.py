"""The model page shows embedding drift as a section of its own, per embedding, when a version's windows have it."""
from __future__ import annotations

from sqlalchemy import select

from driftline.store.db import session_scope
from driftline.store.models import DetectorResult
from driftline.vocabulary import DATASET_DRIFT, EMBEDDING_DRIFT
from tests.dashboard.test_app import assert_clean, open_app
from tests.support.demo_store import CREDIT


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
                threshold=0.004, breached=i == 0, details={"rows": 300}, segment=""))
    assert windows
    at = open_app("model", model=CREDIT, version="2")
    assert_clean(at)
    assert "Embedding drift" in [h.value for h in at.header]
    assert any("activations" in c.value for c in at.caption), [c.value for c in at.caption]
