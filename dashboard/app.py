"""The driftline dashboard (Streamlit entry script): `driftline dashboard`, or
`streamlit run dashboard/app.py` (with driftline installed) and DRIFTLINE_DB pointing at the store.

The sign-on gate (driftline.dashboard.signon) runs first, before anything reads the store; the
sidebar holds the shared selectors; each page is a file in dashboard/views/.
"""
from __future__ import annotations

import streamlit as st

from driftline.config import load_settings
from driftline.dashboard import queries, signon, ui
from driftline.dashboard.access import AccessPolicy
from driftline.store.db import redacted_url

st.set_page_config(page_title="driftline", page_icon=":material/monitoring:", layout="wide")

PAGES = [
    st.Page("views/overview.py", title="Overview", icon=":material/dashboard:", default=True),
    st.Page("views/model.py", title="Model", icon=":material/model_training:", url_path="model"),
    st.Page("views/feature.py", title="Feature drill-down", icon=":material/query_stats:", url_path="feature"),
    st.Page("views/alerts.py", title="Alerts", icon=":material/notifications_active:", url_path="alerts"),
    st.Page("views/retraining.py", title="Retraining", icon=":material/autorenew:", url_path="retraining"),
    st.Page("views/rollouts.py", title="Rollouts", icon=":material/call_split:", url_path="rollouts"),
    st.Page("views/llm.py", title="LLM", icon=":material/chat:", url_path="llm"),
]
REPORT = st.Page("views/report.py", title="Report", icon=":material/description:", url_path="report")

settings = load_settings()
policy = AccessPolicy.from_settings(settings)
identity = signon.gate(policy)  # stops here, with a login or refusal page, for anyone not allowed in
url = settings.db_url
try:
    migrated = queries.store_is_migrated(url)
except Exception as exc:  # noqa: BLE001 - any connection failure is shown, not raised
    st.error(f"Cannot open the store at `{redacted_url(url)}`: {str(exc).splitlines()[0]}. "
             "Check `--db` / DRIFTLINE_DB and that the database server is running.")
    st.stop()
if not migrated:
    st.title("driftline")
    st.error(f"The store at `{redacted_url(url)}` has no tables yet. Create them with `driftline db upgrade` "
             "(or start everything with `driftline up`), then reload this page.")
    st.stop()

# the Report page shows sampled feature values: only to those the policy lets see them
navigation = st.navigation(PAGES + ([REPORT] if policy.may_see_report(identity) else []))
signon.sidebar_account(policy, identity)
ui.sidebar(url)
navigation.run()
