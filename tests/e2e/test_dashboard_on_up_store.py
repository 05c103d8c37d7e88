"""The dashboard's pages on the store of a real `driftline up` run (not a seeded one): the no-drift run that
tests/e2e/test_scenarios.py checks, shared for the session (the pages only read it)."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
MODEL = "credit-default"
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def page(name: str | None, **state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120).run()
    if name:
        at.switch_page(f"views/{name}.py")
        for key, value in state.items():
            at.session_state[key] = value
        at.run()
    assert not at.exception, [e.message for e in at.exception]
    problems = [e.value for e in at.error if not e.value.startswith("**Breached**")]
    assert not problems, problems
    return at


@pytest.mark.xdist_group("up_none")  # reads the store of the no-drift test's run (a session fixture)
def test_every_page_renders_a_real_run(none_run, monkeypatch):
    run, _ = none_run
    assert run.returncode == 0, run.output[-3000:]
    monkeypatch.setenv("DRIFTLINE_DB", run.db_url)
    from streamlit import cache_data, cache_resource

    cache_data.clear()
    cache_resource.clear()
    overview = page(None)
    assert MODEL in " ".join(m.value for m in overview.markdown)
    model = page("model", model=MODEL, version="1")
    assert len(model.get("vega_lite_chart")) >= 4  # latency, traffic, error rate, drift heatmap, ...
    page("feature", model=MODEL, version="1")
    page("alerts")
    page("retraining")
    page("report", model=MODEL, version="1")
