"""`driftline dashboard` on a seeded store, driven by Playwright in Debian's headless Chromium.

Checks what AppTest cannot: the real server starts from the command line on
127.0.0.1, the browser connects, the Vega-Lite charts draw, links between pages carry
the selection, the page refreshes itself, and no exception box is shown; the Rollouts page
draws the seeded canary (plan, verdicts, the comparisons' intervals, steps) and the model page's
Segment selector narrows it to one segment. It saves the model page as docs/img/dashboard.png,
the screenshot the README shows, and the Rollouts page as docs/img/rollouts.png. Auto-refresh is checked on
the Overview, then switched off from the sidebar (the choice carried by the URL) for the pages read after it.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from driftline.broker import free_port, wait_for_port
from driftline.config import ENV_UPDATE_SCREENSHOT
from tests.support.demo_store import CREDIT, DRIFTING_SEGMENT

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
DRIFTLINE = str(Path(sys.executable).with_name("driftline"))
# The README's picture is refreshed only on request (DRIFTLINE_UPDATE_SCREENSHOT=1), so a test run
# leaves the checkout clean; otherwise the screenshot goes to the test's temporary folder.
README_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "dashboard.png"
ROLLOUTS_SCREENSHOT = README_SCREENSHOT.with_name("rollouts.png")
UPDATE_README_SCREENSHOT = os.environ.get(ENV_UPDATE_SCREENSHOT) == "1"
WAIT_MS = 240_000  # a shared two-core machine, busy with other tests, can be slow to start Streamlit and draw
pytestmark = pytest.mark.timeout(900)
REFRESH_SECONDS = 4


@pytest.fixture
def server(seeded, tmp_path):
    url, summary = seeded
    port = free_port()
    log = (tmp_path / "dashboard.log").open("w")
    env = {**os.environ, "DRIFTLINE_DB": url}
    process = subprocess.Popen([DRIFTLINE, "dashboard", "--port", str(port), "--refresh-seconds",
                                str(REFRESH_SECONDS)], stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        assert wait_for_port("127.0.0.1", port, 60, process), (tmp_path / "dashboard.log").read_text()
        yield f"http://127.0.0.1:{port}", summary
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        log.close()


def wait_until_drawn(page: Page, min_charts: int) -> None:
    page.wait_for_selector('[data-test-connection-state="CONNECTED"]', timeout=WAIT_MS)
    page.wait_for_selector('[data-test-script-state="notRunning"]', timeout=WAIT_MS)
    page.wait_for_function(
        """n => document.querySelectorAll(
               '[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg').length >= n""",
        arg=min_charts, timeout=WAIT_MS)
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)


def test_dashboard_in_a_real_browser(server, tmp_path):
    screenshot = README_SCREENSHOT if UPDATE_README_SCREENSHOT else tmp_path / "dashboard.png"
    rollouts_screenshot = ROLLOUTS_SCREENSHOT if UPDATE_README_SCREENSHOT else tmp_path / "rollouts.png"
    base, summary = server
    assert shutil.which(CHROMIUM) or Path(CHROMIUM).exists(), \
        "Debian's chromium is needed for this test: scripts/install-system-deps.sh installs it"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1500})
            page.goto(base + "/")
            wait_until_drawn(page, 2)
            expect(page.get_by_role("heading", name="Overview", exact=True)).to_be_visible()
            expect(page.get_by_text(f"{CREDIT} · v2 ·").first).to_be_visible()
            expect(page.get_by_text(f"{len(summary.firing)} firing")).to_be_visible()

            # The page refreshes itself: the "Updated" time moves on without a reload.
            stamp = page.get_by_text(re.compile(r"^Updated \d\d:\d\d:\d\d UTC")).inner_text()
            page.wait_for_function(
                """old => [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
                       .some(e => e.innerText.startsWith('Updated') && !e.innerText.startsWith(old))""",
                arg=stamp.split(" · ")[0], timeout=(REFRESH_SECONDS * 5) * 1000)
            expect(page.locator('[data-testid="stException"]')).to_have_count(0)
            # The rest reads pages that stay still: auto-refresh off from the sidebar, carried by the URL.
            page.get_by_role("combobox", name="Auto-refresh").click()
            page.get_by_role("option", name="off", exact=True).click()
            page.wait_for_url(re.compile(r"refresh=off"), timeout=WAIT_MS)
            expect(page.get_by_text(re.compile(r"^Updated .* · auto-refresh off$"))).to_be_visible()

            # The card's link opens the model page with that model and version selected.
            page.get_by_role("link", name=f"Open {CREDIT} v2").click()
            page.wait_for_url(re.compile(r"/model\?.*model=credit-default"), timeout=WAIT_MS)
            wait_until_drawn(page, 10)
            expect(page.get_by_role("heading", name=f"{CREDIT} · v2")).to_be_visible()
            for section in ("Serving", "Feature drift", "Data quality"):
                expect(page.get_by_role("heading", name=section, exact=True)).to_be_visible()
            expect(page.get_by_text(re.compile(r"^SLO \d+ ms$"))).to_be_visible()  # the SLO line is drawn
            page.mouse.move(1430, 40)  # nothing hovered in the picture
            page.wait_for_selector('[data-test-script-state="notRunning"]', timeout=WAIT_MS)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot))

            # The sidebar's page navigation reaches the alerts page.
            page.get_by_role("link", name="Alerts").click()
            wait_until_drawn(page, 2)
            expect(page.get_by_role("heading", name="Alerts", exact=True)).to_be_visible()
            expect(page.get_by_text("failed after 8 attempts")).to_be_visible()

            # The Rollouts page: the canary's plan, its latest verdict with the analysis' reasons, the
            # per-window differences with their intervals, and the policy's step.
            rollout = summary.rollout
            page.get_by_role("link", name="Rollouts").click()
            wait_until_drawn(page, 4)  # events, p99 and error rate per arm, then the differences
            expect(page.get_by_role("heading", name="Rollouts", exact=True)).to_be_visible()
            plan = f"canary: v{rollout['candidate']} on {rollout['weight']:g} % of requests"
            expect(page.get_by_text(re.compile(f"^Plan: {plan}"))).to_be_visible()
            _, verdict, reasons = rollout["verdicts"][-1]
            latest = page.locator("p").filter(has_text=f"Latest verdict: {verdict}")
            expect(latest).to_be_visible()
            expect(latest).to_contain_text(reasons[0])
            for section in ("Arms side by side", "Verdicts", "Comparisons", "Steps"):
                expect(page.get_by_role("heading", name=re.compile(f"^{section}"))).to_be_visible()
            intervals = page.locator('[data-testid="stVegaLiteChart"]').nth(3)
            intervals.scroll_into_view_if_needed()
            expect(intervals).to_be_visible()
            assert intervals.bounding_box()["height"] > 100
            steps = page.locator('[data-testid="stDataFrame"]').last
            steps.scroll_into_view_if_needed()
            expect(steps).to_be_visible()
            expect(steps).to_contain_text("canary passed at 25 %")
            expect(page.locator('[data-testid="stException"]')).to_have_count(0)
            page.mouse.move(1430, 40)
            page.get_by_role("heading", name="Rollouts", exact=True).scroll_into_view_if_needed()
            page.screenshot(path=str(rollouts_screenshot))

            # The model page's Segment selector: one segment's results, the choice carried by the URL.
            page.goto(f"{base}/model?model={CREDIT}&version=2&refresh=off")
            wait_until_drawn(page, 10)
            page.get_by_role("combobox", name="Segment").click()
            page.get_by_role("option", name=DRIFTING_SEGMENT, exact=True).click()
            page.wait_for_url(re.compile(r"segment=region%3Dnorth"), timeout=WAIT_MS)
            wait_until_drawn(page, 10)
            feature = summary.drifted_segments[DRIFTING_SEGMENT][0]
            expect(page.get_by_role("combobox", name="Segment")).to_have_value(DRIFTING_SEGMENT)
            expect(page.get_by_role("combobox", name="Auto-refresh")).to_have_value("off")
            expect(page.get_by_text(re.compile(f"^Breached in this range: .*{feature}")).first).to_be_visible()
        finally:
            browser.close()
    assert screenshot.stat().st_size > 50_000
    assert rollouts_screenshot.stat().st_size > 50_000
