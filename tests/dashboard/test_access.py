"""The sign-on policy's decisions (driftline.dashboard.access), the `[auth]` secrets file and `driftline dashboard
--host`'s refusals."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import tomllib
from datetime import datetime, timezone
from pathlib import Path

import pytest

from driftline.config import Settings, load_settings
from driftline.dashboard.access import AccessPolicy, Identity, check_settings, single_values
from driftline.dashboard.auth_secrets import auth_toml, redirect_uri, write_auth_secrets
from driftline.dashboard.signon import login_line
from driftline.errors import UserError

DRIFTLINE = str(Path(sys.executable).with_name("driftline"))
CLIENT_SECRET = "client-secret-7f3a9c"


def policy(**settings) -> AccessPolicy:
    return AccessPolicy.from_settings(Settings(**{"dashboard_auth": "oidc", **settings}))


def oidc_settings(**overrides) -> Settings:
    return Settings(**{"dashboard_auth": "oidc", "dashboard_oidc_metadata_url": "https://idp.example/.well-known/"
                       "openid-configuration", "dashboard_oidc_client_id": "driftline",
                       "dashboard_oidc_client_secret": CLIENT_SECRET, "dashboard_allowed_domains": "example.com",
                       **overrides})


def test_users_are_allowed_by_domain_list_or_group_and_refused_otherwise():
    p = policy(dashboard_allowed_domains="example.com, @corp.example", dashboard_allowed_users="Carol@Gmail.com",
               dashboard_allowed_groups="ml-oncall")
    assert p.decide(Identity("alice@example.com")).allowed
    assert p.decide(Identity("dan@corp.example")).allowed
    assert p.decide(Identity("carol@gmail.com")).allowed  # addresses compare without case
    assert p.decide(Identity("eve@evil.example", groups=frozenset({"ml-oncall"}))).allowed
    refused = p.decide(Identity("bob@other.org", groups=frozenset({"sales"})))
    assert not refused.allowed and "bob@other.org is not among the allowed" in refused.reason
    # a domain is a whole domain: no suffix tricks
    assert not p.decide(Identity("mallory@notexample.com")).allowed
    assert not p.decide(Identity("mallory@example.com.evil.org")).allowed
    # an address the provider has not verified proves nothing
    unverified = p.decide(Identity("alice@example.com", email_verified=False))
    assert not unverified.allowed and "not verified" in unverified.reason


def test_identity_from_id_token_claims_reads_the_configured_groups_claim():
    p = policy(dashboard_allowed_groups="admins", dashboard_groups_claim="roles")
    identity = p.identity_from_claims({"sub": "u1", "email": "a@x.org", "roles": ["admins", "ops"],
                                       "groups": ["ignored"]})
    assert identity.groups == {"admins", "ops"} and identity.subject == "u1" and p.decide(identity).allowed
    assert p.identity_from_claims({"email": "a@x.org", "roles": "admins, ops"}).groups == {"admins", "ops"}
    assert not p.identity_from_claims({"email": "a@x.org", "email_verified": False}).email_verified
    assert p.identity_from_claims({"email": "a@x.org", "roles": 7}).groups == frozenset()


def test_an_email_counts_only_when_the_provider_says_it_is_verified():
    """nOAuth: an ID token without email_verified, or with 0 or "no", does not get in by its address or domain."""
    p = policy(dashboard_allowed_domains="example.com", dashboard_allowed_users="carol@gmail.com",
               dashboard_allowed_groups="ml-oncall")
    alice = {"sub": "u1", "email": "alice@example.com"}
    for verified in (True, "true", "TRUE", "True"):
        assert p.decide(p.identity_from_claims({**alice, "email_verified": verified})).allowed, verified
    for claims in (alice, *({**alice, "email_verified": v} for v in (0, 1, "no", "yes", "1", False, "false", None))):
        refused = p.decide(p.identity_from_claims(claims))
        assert not refused.allowed, claims
        assert "has not verified alice@example.com" in refused.reason and "only a verified e-mail" in refused.reason
    assert not p.decide(p.identity_from_claims({"email": "carol@gmail.com"})).allowed  # a listed user too
    # group rules do not depend on the e-mail
    assert p.decide(p.identity_from_claims({**alice, "email_verified": "no", "groups": ["ml-oncall"]})).allowed
    # the operator's opt-out, which the dashboard notes at start
    trusting = policy(dashboard_allowed_domains="example.com", dashboard_trust_unverified_email=True)
    assert trusting.decide(trusting.identity_from_claims(alice)).allowed
    assert trusting.decide(trusting.identity_from_claims({**alice, "email_verified": "no"})).allowed
    assert any("dashboard_trust_unverified_email is true" in n
               for n in check_settings(oidc_settings(dashboard_trust_unverified_email=True), "0.0.0.0"))
    assert not any("unverified" in n for n in check_settings(oidc_settings(), "0.0.0.0"))
    # a trusted proxy's header is the proxy's own assertion after its sign-in: no claim to check
    proxy = policy(dashboard_auth="proxy", dashboard_allowed_domains="example.com", dashboard_proxy_addresses="10.0.0.5")
    assert proxy.decide(proxy.identity_from_headers({"X-Forwarded-Email": "alice@example.com"}, "10.0.0.5")).allowed


def test_proxy_headers_count_only_from_the_proxy_addresses():
    p = policy(dashboard_auth="proxy", dashboard_allowed_domains="example.com",
               dashboard_proxy_addresses="10.0.0.5, 192.168.10.0/24, ::1")
    headers = {"x-forwarded-email": "alice@example.com", "X-Forwarded-Groups": "a, b"}
    assert p.identity_from_headers(headers, "10.0.0.5") == Identity("alice@example.com", groups=frozenset({"a", "b"}),
                                                                     source="proxy")
    assert p.identity_from_headers(headers, "192.168.10.77") is not None
    assert p.identity_from_headers(headers, "10.0.0.6") is None  # anyone else could send the header
    assert p.identity_from_headers(headers, None) is None  # loopback (None) is not listed as 127.0.0.1 ...
    assert p.identity_from_headers(headers, "::1") is not None  # ... but ::1 is
    assert p.identity_from_headers(headers, "not an address") is None
    assert p.identity_from_headers({"X-Forwarded-Groups": "a"}, "10.0.0.5") is None  # names nobody
    assert p.identity_from_headers({"X-Forwarded-Email": "a" * 9000}, "10.0.0.5") is None  # absurd header
    # sent twice (the client's own, then the proxy's appended): neither counts
    doubled = single_values({"x-forwarded-email": ["mallory@example.com", "alice@example.com"],
                             "x-forwarded-groups": ["a"]})
    assert doubled == {"x-forwarded-email": "", "x-forwarded-groups": "a"}
    assert p.identity_from_headers(doubled, "10.0.0.5") is None
    loopback = policy(dashboard_auth="proxy", dashboard_proxy_addresses="127.0.0.1")
    assert loopback.identity_from_headers(headers, None) is not None  # Streamlit reports loopback peers as None
    with pytest.raises(UserError, match="'proxy.example' is not an IP address"):
        policy(dashboard_auth="proxy", dashboard_proxy_addresses="proxy.example")


def test_the_report_page_is_off_or_for_the_report_group_only():
    analyst = Identity("a@example.com", groups=frozenset({"analysts"}))
    viewer = Identity("v@example.com")
    assert AccessPolicy.from_settings(Settings()).may_see_report(None)  # loopback, no login: as before
    assert not AccessPolicy.from_settings(Settings(dashboard_report=False)).may_see_report(None)
    grouped = policy(dashboard_report_group="analysts")
    assert grouped.may_see_report(analyst) and not grouped.may_see_report(viewer)
    assert not grouped.may_see_report(None)
    assert not policy().may_see_report(analyst)  # a login and no report group: nobody
    assert not policy(dashboard_report_group="analysts", dashboard_report=False).may_see_report(analyst)


def test_settings_the_dashboard_cannot_start_with_are_clear_errors():
    with pytest.raises(UserError, match=r"would listen on 0\.0\.0\.0, reachable from other machines, without a login"):
        check_settings(Settings(), "0.0.0.0")
    assert check_settings(Settings(), "127.0.0.1") == [] and check_settings(Settings(), "::1") == []
    with pytest.raises(UserError, match="nobody is allowed in"):
        check_settings(oidc_settings(dashboard_allowed_domains=""), "0.0.0.0")
    with pytest.raises(UserError, match="dashboard_oidc_client_id, dashboard_oidc_client_secret are not set"):
        check_settings(oidc_settings(dashboard_oidc_client_id=None, dashboard_oidc_client_secret=None), "0.0.0.0")
    with pytest.raises(UserError, match="dashboard_oidc_metadata_url must be an http"):
        check_settings(oidc_settings(dashboard_oidc_metadata_url="idp.example"), "0.0.0.0")
    with pytest.raises(UserError, match="dashboard_proxy_addresses is empty"):
        check_settings(Settings(dashboard_auth="proxy", dashboard_allowed_users="a@b.c"), "0.0.0.0")
    notes = check_settings(oidc_settings(), "0.0.0.0")
    assert any("cookie_secret is not set" in n for n in notes) and any("Report page" in n for n in notes)
    assert check_settings(oidc_settings(dashboard_oidc_cookie_secret="c" * 32, dashboard_report=False), "::") == []
    with pytest.raises(UserError, match="invalid setting dashboard_auth: Input should be 'none', 'oidc' or 'proxy'"):
        load_settings(dashboard_auth="ldap")


def test_the_auth_secrets_file_is_private_and_what_streamlit_reads(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    settings = oidc_settings(dashboard_url="http://dash.example:8501/", dashboard_oidc_scopes="openid email groups",
                             dashboard_oidc_cookie_secret='quote " and \\ back')
    path = write_auth_secrets(settings, 8765)
    assert path.parent == tmp_path / "driftline" / "dashboard-8765"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    auth = tomllib.loads(path.read_text())["auth"]
    assert auth == {"redirect_uri": "http://dash.example:8501/oauth2callback", "cookie_secret": 'quote " and \\ back',
                    "client_id": "driftline", "client_secret": CLIENT_SECRET,
                    "server_metadata_url": "https://idp.example/.well-known/openid-configuration",
                    "client_kwargs": {"scope": "openid email groups"}}
    assert write_auth_secrets(settings, 8765) == path  # rewritten at the next start
    assert redirect_uri(oidc_settings(dashboard_oidc_redirect_uri="https://d.example/oauth2callback")) == \
        "https://d.example/oauth2callback"
    # no cookie secret set: a fresh random one per start
    first, second = (tomllib.loads(auth_toml(oidc_settings()))["auth"]["cookie_secret"] for _ in range(2))
    assert first != second and len(first) >= 32
    assert CLIENT_SECRET not in repr(settings)  # the setting itself never shows its secret


def test_a_shared_folder_someone_else_may_read_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    (tmp_path / "driftline").mkdir(mode=0o755)
    os.chmod(tmp_path / "driftline", 0o755)
    with pytest.raises(UserError, match="is not a private folder of this user"):
        write_auth_secrets(oidc_settings(), 8765)


def test_the_login_line_says_who_and_when_and_nothing_else():
    line = login_line(Identity("alice@example.com", subject="u-1", groups=frozenset({"b", "a"})),
                      policy(dashboard_allowed_domains="example.com").decide(Identity("alice@example.com")),
                      datetime(2026, 12, 3, 20, 30, 5, tzinfo=timezone.utc))
    assert line == ("dashboard login allowed: alice@example.com; subject u-1; groups a,b via oidc at "
                    "2026-12-03T20:30:05Z (domain example.com)")


def run_dashboard(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([DRIFTLINE, "dashboard", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "DRIFTLINE_HOME": os.devnull, **env})


def test_dashboard_refuses_a_public_address_without_a_login(tmp_path):
    result = run_dashboard("--host", "0.0.0.0", "--db", f"sqlite:///{tmp_path / 'x.db'}")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "would listen on 0.0.0.0, reachable from other machines, without a login" in result.stderr
    assert "DRIFTLINE_DASHBOARD_AUTH=oidc" in result.stderr
    result = run_dashboard(DRIFTLINE_DASHBOARD_HOST="10.1.2.3", DRIFTLINE_DASHBOARD_AUTH="proxy",
                           DRIFTLINE_DASHBOARD_ALLOWED_USERS="a@example.com")
    assert result.returncode == 1 and "dashboard_proxy_addresses is empty" in result.stderr
    # a secret given in the environment never shows, even in a refusal
    result = run_dashboard("--host", "0.0.0.0", DRIFTLINE_DASHBOARD_AUTH="oidc",
                           DRIFTLINE_DASHBOARD_ALLOWED_DOMAINS="example.com",
                           DRIFTLINE_DASHBOARD_OIDC_CLIENT_SECRET=CLIENT_SECRET)
    assert result.returncode == 1
    assert "dashboard_oidc_metadata_url, dashboard_oidc_client_id are not set" in result.stderr
    assert CLIENT_SECRET not in result.stderr + result.stdout
