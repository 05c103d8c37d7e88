"""The sign-on gate in the app itself (AppTest, the seeded store): who sees data, who gets a login or a refusal,
who sees the Report page. AppTest seeds `st.user`; the proxy mode's headers and peer address, which AppTest cannot
seed, come through `signon.request` (tests/dashboard/test_signon_browser.py sends real ones)."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from driftline.dashboard import signon

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
TIMEOUT = 90
ALICE = {"is_logged_in": True, "email": "alice@example.com", "email_verified": True, "sub": "u-alice", "iat": 1,
         "groups": ["analysts"]}


@pytest.fixture
def oidc(monkeypatch):
    for name, value in {"DRIFTLINE_DASHBOARD_AUTH": "oidc", "DRIFTLINE_DASHBOARD_ALLOWED_DOMAINS": "example.com",
                        "DRIFTLINE_DASHBOARD_REPORT_GROUP": "analysts",
                        "DRIFTLINE_DASHBOARD_OIDC_METADATA_URL": "http://127.0.0.1:9/.well-known/openid-configuration",
                        "DRIFTLINE_DASHBOARD_OIDC_CLIENT_ID": "driftline",
                        "DRIFTLINE_DASHBOARD_OIDC_CLIENT_SECRET": "s"}.items():
        monkeypatch.setenv(name, value)


def run(user: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    if user is not None:
        at.user = user
    return at.run()


def shows_data(at: AppTest) -> bool:
    """Anything read from the store: the Overview's heading, metrics, charts or the sidebar's selectors."""
    return bool([t for t in at.title if t.value == "Overview"] or at.metric or at.get("vega_lite_chart")
                or at.sidebar.selectbox)


def test_an_anonymous_visitor_gets_a_login_and_no_data(seeded, oidc):
    at = run({"is_logged_in": False})
    assert not at.exception
    assert [b.label for b in at.button] == ["Log in"]
    assert "Sign in to see the dashboard." in [i.value for i in at.info]
    assert not shows_data(at)


def test_a_signed_in_user_of_an_allowed_domain_sees_the_overview(seeded, oidc):
    at = run(ALICE)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "Overview" in [t.value for t in at.title] and at.metric
    assert any("Signed in as **alice@example.com**" in c.value for c in at.sidebar.caption)
    assert "Log out" in [b.label for b in at.sidebar.button]


def test_a_user_outside_the_allowed_set_is_refused_with_no_data(seeded, oidc):
    at = run({**ALICE, "email": "bob@other.org", "sub": "u-bob"})
    assert not at.exception
    assert len(at.error) == 1 and "**bob@other.org** may not see this dashboard" in at.error[0].value
    assert "Log out" in [b.label for b in at.button]
    assert not shows_data(at)
    unverified = run({**ALICE, "email_verified": False, "sub": "u-unverified"})
    assert "the provider has not verified alice@example.com" in unverified.error[0].value
    assert not shows_data(unverified)


def test_an_id_token_that_does_not_verify_the_email_is_refused_with_the_reason(seeded, oidc):
    # nOAuth: no email_verified claim (or "no") must not let an allowed domain's address in
    for claims in ({k: v for k, v in ALICE.items() if k != "email_verified"}, {**ALICE, "email_verified": "no"}):
        at = run({**claims, "sub": "u-unverified-" + str(claims.get("email_verified"))})
        assert not at.exception
        assert len(at.error) == 1 and "the provider has not verified alice@example.com" in at.error[0].value
        assert "only a verified e-mail counts" in at.error[0].value
        assert not shows_data(at)


def test_a_group_named_by_the_groups_claim_lets_a_user_in(seeded, oidc, monkeypatch):
    monkeypatch.setenv("DRIFTLINE_DASHBOARD_ALLOWED_GROUPS", "ml-oncall")
    monkeypatch.setenv("DRIFTLINE_DASHBOARD_GROUPS_CLAIM", "roles")
    at = run({**ALICE, "email": "carol@partner.org", "sub": "u-carol", "roles": ["ml-oncall"]})
    assert "Overview" in [t.value for t in at.title]
    assert not shows_data(run({**ALICE, "email": "dave@partner.org", "sub": "u-dave", "groups": ["ml-oncall"]}))


def test_the_report_page_only_for_the_report_group(seeded, oidc):
    analyst = run(ALICE)
    analyst.switch_page("views/report.py").run()
    assert not analyst.exception and len(analyst.get("iframe")) == 1  # the Evidently report of sampled rows
    viewer = run({**ALICE, "email": "vic@example.com", "sub": "u-vic", "groups": []})
    assert "Overview" in [t.value for t in viewer.title]
    with pytest.raises(ValueError, match="Could not find a navigation page"):  # not among this user's pages
        viewer.switch_page("views/report.py")


def test_the_report_page_can_be_turned_off(seeded, monkeypatch):
    monkeypatch.setenv("DRIFTLINE_DASHBOARD_REPORT", "false")
    at = run()
    assert "Overview" in [t.value for t in at.title], [e.value for e in at.error]
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        at.switch_page("views/report.py")


def test_proxy_headers_from_the_proxy_let_a_user_in_and_from_anyone_else_do_not(seeded, monkeypatch):
    monkeypatch.setenv("DRIFTLINE_DASHBOARD_AUTH", "proxy")
    monkeypatch.setenv("DRIFTLINE_DASHBOARD_ALLOWED_USERS", "alice@example.com")
    monkeypatch.setenv("DRIFTLINE_DASHBOARD_PROXY_ADDRESSES", "10.0.0.5")
    headers = {"X-Forwarded-Email": "alice@example.com", "X-Forwarded-Groups": "analysts"}
    monkeypatch.setattr(signon, "request", lambda: (headers, "10.0.0.5"))
    at = run()
    assert "Overview" in [t.value for t in at.title] and at.metric
    monkeypatch.setattr(signon, "request", lambda: (headers, "10.0.0.99"))  # straight to the dashboard
    at = run()
    assert "did not come through it" in at.error[0].value and not shows_data(at)
    monkeypatch.setattr(signon, "request", lambda: ({**headers, "X-Forwarded-Email": "bob@example.com"}, "10.0.0.5"))
    at = run()
    assert "**bob@example.com** may not see this dashboard" in at.error[0].value and not shows_data(at)


def test_without_a_login_only_loopback_visitors_see_data(seeded, monkeypatch):
    monkeypatch.setattr(signon, "request", lambda: ({}, "192.0.2.10"))
    at = run()
    assert "answers only on this machine" in at.error[0].value and not shows_data(at)
