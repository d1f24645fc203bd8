"""`wse view` in a real browser: Playwright driving Debian's Chromium (/usr/bin/chromium).

Installed by `WSE_BROWSER_TESTS=1 bash scripts/setup.sh` (apt chromium + the playwright package);
CI sets that variable, and then a missing browser fails these tests instead of skipping them."""
from __future__ import annotations

import os
import shutil

import pytest

from tests.view._view_fixture import HOSTILE, build_warehouse
from wse_platform.view.server import ViewServer

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
REQUIRED = os.environ.get("WSE_BROWSER_TESTS") == "1"
try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - depends on the install
    sync_playwright = None
if not REQUIRED and (sync_playwright is None or not os.path.exists(CHROMIUM)):
    pytest.skip("browser tests: run `WSE_BROWSER_TESTS=1 bash scripts/setup.sh` to install Chromium and Playwright",
                allow_module_level=True)

ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    server = ViewServer(build_warehouse(tmp_path_factory.mktemp("browser") / "wh.duckdb")).start()
    yield server.url
    server.stop()


def test_from_a_final_table_row_to_the_transcript_and_its_verdicts(browser, site):
    page = browser.new_page()
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(site)
    page.get_by_role("link", name="trajectories").first.click()
    page.wait_for_url("**/wse?model=gen&arch=B2")
    page.get_by_role("link", name="s1").click()
    first = page.locator("section.step.first")
    assert first.count() == 1 and first.get_attribute("id") == "step-2"
    assert "first agreed contradiction" in first.inner_text()
    assert "claim: Ada greets Bo" in first.inner_text()
    # the model's text is shown as text, never run
    assert HOSTILE in first.inner_text() and dialogs == []
    page.close()


def test_filters_and_a_failed_cell(browser, site):
    page = browser.new_page()
    page.goto(site + "wse")
    page.select_option("select[name=failure]", "story_agent")
    page.get_by_role("button", name="filter").click()
    rows = page.locator("tbody tr")
    assert rows.count() == 1 and "story_agent @ 1" in rows.first.inner_text()
    rows.first.get_by_role("link").click()
    assert "failure: invalid_json" in page.inner_text("main") and "Once upon a {broken" in page.inner_text("main")
    page.close()


def test_ncp_episode_and_endings_story_pages(browser, site):
    page = browser.new_page()
    page.goto(site + "ncp")
    page.get_by_role("link", name="movie26").click()
    text = page.inner_text("main")
    assert "ended CONFLICT after turn 2" in text and "episode ends here: CONFLICT" in text
    page.goto(site + "endings")
    page.get_by_role("link", name="human:pd/hour").click()
    assert page.locator("svg[aria-label='no-rate curve'] circle").count() == 2
    assert page.locator("span.pos").count() == 2 and "She lives happily (p0k1)" in page.inner_text("main")
    page.close()


def test_an_empty_warehouse_in_the_browser(browser, tmp_path):
    server = ViewServer(tmp_path / "missing.duckdb").start()
    try:
        page = browser.new_page()
        page.goto(server.url)
        assert "wse_cell_metrics is not built yet" in page.inner_text("main")
        page.goto(server.url + "wse/trajectory?model=x&arch=B1&seed=s")
        assert "no trajectory" in page.inner_text("main")
        page.close()
    finally:
        server.stop()
