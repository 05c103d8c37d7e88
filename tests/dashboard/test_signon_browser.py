"""Sign-on in a real browser: `driftline dashboard` with an OpenID Connect login against a real OpenID provider
(PyPI `oidc-provider-mock`, started here on loopback), and behind a trusted proxy's headers.

Playwright drives Debian's Chromium through the whole authorization-code flow: an anonymous visitor sees a
login and no data; Alice (allowed by her domain) logs in at the provider and lands on the Overview, with the
Report page in her navigation (her group); Bob (another domain) logs in and is refused, with no data; the
dashboard's log records both logins (who, when) and holds no token and no secret.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import quote

import httpx
import oidc_provider_mock
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright
from werkzeug.serving import make_server

from driftline.broker import free_port, wait_for_port

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
DRIFTLINE = str(Path(sys.executable).with_name("driftline"))
WAIT_MS = 240_000  # a shared two-core machine, busy with other tests, can be slow to start Streamlit
CLIENT_SECRET = "oidc-client-secret-5e1d0c"
COOKIE_SECRET = "cookie-secret-9b7a1f0c2d4e6a8b"
# A JSON Web Token: three base64url parts, the first a JSON header ('{"' encodes as "eyJ").
JWT = re.compile(r"eyJ[\w-]{5,}\.[\w-]{5,}\.[\w-]*")
pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def provider():
    """A real OpenID provider on 127.0.0.1 (discovery, authorization form, token endpoint, signed ID tokens)."""
    server = make_server("127.0.0.1", 0, oidc_provider_mock.app(), threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        for sub, claims in {"alice": {"email": "alice@example.com", "groups": ["analysts"]},
                            "bob": {"email": "bob@other.org", "groups": ["analysts"]}}.items():
            answer = httpx.put(f"{base}/users/{quote(sub)}", json={**claims, "email_verified": True}, timeout=30)
            assert answer.status_code == 204, answer.text
        yield base
    finally:
        server.shutdown()
        thread.join(timeout=10)


def start_dashboard(tmp_path: Path, db_url: str, **settings: str) -> tuple[str, subprocess.Popen, Path]:
    port = free_port()
    log_path = tmp_path / f"dashboard-{port}.log"
    env = {**os.environ, "DRIFTLINE_DB": db_url, "XDG_RUNTIME_DIR": str(tmp_path),
           **{f"DRIFTLINE_{k.upper()}": v.replace("{port}", str(port)) for k, v in settings.items()}}
    with log_path.open("w") as log:
        process = subprocess.Popen([DRIFTLINE, "dashboard", "--port", str(port), "--refresh-seconds", "0"],
                                   stdout=log, stderr=subprocess.STDOUT, env=env)
    assert wait_for_port("127.0.0.1", port, 60, process), log_path.read_text()
    return f"http://127.0.0.1:{port}", process, log_path


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


def settled(page: Page) -> None:
    page.wait_for_selector('[data-test-connection-state="CONNECTED"]', timeout=WAIT_MS)
    page.wait_for_selector('[data-test-script-state="notRunning"]', timeout=WAIT_MS)
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)


def no_data(page: Page) -> None:
    expect(page.get_by_role("heading", name="Overview", exact=True)).to_have_count(0)
    expect(page.locator('[data-testid="stMetric"], [data-testid="stVegaLiteChart"], [data-testid="stSidebar"]')) \
        .to_have_count(0)


def log_in(browser: Browser, base: str, sub: str) -> Page:
    """A fresh browser profile: open the dashboard, press Log in, authorize as `sub` at the provider."""
    page = browser.new_context(viewport={"width": 1440, "height": 1200}).new_page()
    page.goto(base + "/")
    settled(page)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_selector('input[name="sub"]', timeout=WAIT_MS)  # the provider's authorization form
    page.fill('input[name="sub"]', sub)
    page.get_by_role("button", name="Authorize").click()
    page.wait_for_url(re.compile(re.escape(base) + r"/?(\?.*)?$"), timeout=WAIT_MS)
    settled(page)
    return page


def test_openid_connect_login_in_a_real_browser(seeded, provider, tmp_path):
    db_url, _ = seeded
    base, process, log_path = start_dashboard(
        tmp_path, db_url, dashboard_auth="oidc",
        dashboard_oidc_metadata_url=f"{provider}/.well-known/openid-configuration",
        dashboard_oidc_client_id="driftline-tests", dashboard_oidc_client_secret=CLIENT_SECRET,
        dashboard_oidc_redirect_uri="http://127.0.0.1:{port}/oauth2callback",
        dashboard_oidc_cookie_secret=COOKIE_SECRET, dashboard_allowed_domains="example.com",
        dashboard_report_group="analysts")
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                anonymous = browser.new_page()
                anonymous.goto(base + "/")
                settled(anonymous)
                expect(anonymous.get_by_role("button", name="Log in")).to_be_visible()
                expect(anonymous.get_by_text("Sign in to see the dashboard.")).to_be_visible()
                no_data(anonymous)
                anonymous.goto(base + "/alerts")  # a deep link shows the same login, no data
                settled(anonymous)
                expect(anonymous.get_by_role("button", name="Log in")).to_be_visible()
                no_data(anonymous)

                alice = log_in(browser, base, "alice")
                expect(alice.get_by_role("heading", name="Overview", exact=True)).to_be_visible(timeout=WAIT_MS)
                expect(alice.get_by_text("Signed in as alice@example.com")).to_be_visible()
                expect(alice.get_by_role("link", name="Report")).to_be_visible()  # her group may see sampled rows

                bob = log_in(browser, base, "bob")
                expect(bob.get_by_text("bob@other.org may not see this dashboard")).to_be_visible(timeout=WAIT_MS)
                no_data(bob)
                bob.goto(base + "/report")
                settled(bob)
                expect(bob.get_by_text("bob@other.org may not see this dashboard")).to_be_visible()
                no_data(bob)
            finally:
                browser.close()
    finally:
        stop(process)
    log = log_path.read_text()
    assert re.search(r"dashboard login allowed: alice@example.com; subject alice; groups analysts via oidc at "
                     r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(domain example.com\)", log), log
    assert re.search(r"dashboard login refused: bob@other.org; subject bob; .* at \d{4}-\d\d-\d\dT", log), log
    assert log.count("dashboard login allowed: alice@example.com") == 1  # one line per login, not per page
    assert not JWT.search(log) and CLIENT_SECRET not in log and COOKIE_SECRET not in log
    secrets_file = tmp_path / "driftline" / f"dashboard-{base.rsplit(':', 1)[1]}" / "secrets.toml"
    assert CLIENT_SECRET in secrets_file.read_text()  # where Streamlit read it: the private runtime folder


def test_trusted_proxy_headers_in_a_real_browser(seeded, tmp_path):
    """oauth2-proxy in front: its headers name the user. Believed from the proxy's address (here loopback,
    where the browser connects from), and ignored when the dashboard expects the proxy elsewhere."""
    db_url, _ = seeded
    headers = {"X-Forwarded-Email": "alice@example.com", "X-Forwarded-Groups": "analysts"}
    trusted, process, log_path = start_dashboard(
        tmp_path, db_url, dashboard_auth="proxy", dashboard_proxy_addresses="127.0.0.1, ::1",
        dashboard_allowed_users="alice@example.com", dashboard_report_group="analysts")
    elsewhere, other, _ = start_dashboard(
        tmp_path, db_url, dashboard_auth="proxy", dashboard_proxy_addresses="10.0.0.5",
        dashboard_allowed_users="alice@example.com")
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                proxied = browser.new_context(extra_http_headers=headers).new_page()
                proxied.goto(trusted + "/")
                settled(proxied)
                expect(proxied.get_by_role("heading", name="Overview", exact=True)).to_be_visible(timeout=WAIT_MS)
                expect(proxied.get_by_text("Signed in as alice@example.com")).to_be_visible()
                expect(proxied.get_by_role("link", name="Report")).to_be_visible()

                direct = browser.new_page()  # no proxy in between: no identity
                direct.goto(trusted + "/")
                settled(direct)
                expect(direct.get_by_text("did not come through it")).to_be_visible()
                no_data(direct)

                spoofed = browser.new_context(extra_http_headers=headers).new_page()
                spoofed.goto(elsewhere + "/")  # the headers, but not from the proxy's address
                settled(spoofed)
                expect(spoofed.get_by_text("did not come through it")).to_be_visible()
                no_data(spoofed)
            finally:
                browser.close()
    finally:
        stop(process)
        stop(other)
    assert "dashboard login allowed: alice@example.com; groups analysts via proxy at" in log_path.read_text()
