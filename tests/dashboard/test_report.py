"""The dashboard's Evidently report: values from traffic never become markup next to the dashboard."""
from __future__ import annotations

import numpy as np
import pandas as pd

from driftline.dashboard.report import evidently_html
from tests.support.markup import injected

SCRIPT = "</script><script>alert(document.domain)</script>"


def test_hostile_category_values_and_names_stay_inert_in_the_report():
    rng = np.random.default_rng(3)

    def sample(n: int) -> pd.DataFrame:
        return pd.DataFrame({"income": rng.normal(5000, 1000, n), "region": rng.choice(["north", SCRIPT], n),
                             "<b onmouseover=alert(3)>": rng.choice(["a", "b"], n)})

    html = evidently_html(sample(300), sample(200), ["income"], ["region", "<b onmouseover=alert(3)>"])
    assert injected(html, "alert(document.domain)") == [] and injected(html, "alert(3)") == []
    assert SCRIPT not in html and "<b onmouseover" not in html
    assert "alert(document.domain)" in html  # the value is still shown
