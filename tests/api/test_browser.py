"""Debian's chromium through Playwright: the API docs work offline under the strict CSP, and a
token is created and revoked on the settings page; no console error on the way (CSP violations
count)."""

import shutil
from pathlib import Path

import pytest
from django.test import Client

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture
def page(monkeypatch, live_server, member):
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("Debian's chromium is not installed (the test command installs it)")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    client = Client()
    client.force_login(member)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, args=["--no-sandbox", "--disable-background-networking"]
        )
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_cookies(
            [
                {
                    "name": "sessionid",
                    "value": client.cookies["sessionid"].value,
                    "url": live_server.url,
                }
            ]
        )
        # Nothing may come from outside the site: the docs must work on a machine offline.
        outside = []
        context.route(
            "**/*",
            lambda route: (
                route.continue_()
                if route.request.url.startswith(live_server.url)
                else (outside.append(route.request.url), route.abort())
            ),
        )
        tab = context.new_page()
        tab.problems = []
        tab.outside = outside
        tab.on("console", lambda m: m.type in ("error", "warning") and tab.problems.append(m.text))
        tab.on("pageerror", lambda error: tab.problems.append(str(error)))
        yield tab
        browser.close()


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def test_the_api_docs_render_every_operation_offline_under_the_csp(page, live_server, project):
    page.goto(live_server.url + "/api/v1/docs")
    page.wait_for_selector(".opblock")
    # Every operation of the schema (tests/api/test_schema.py's OPERATIONS), one block each.
    assert page.locator(".opblock").count() == 28
    assert page.is_visible("button.authorize")
    _shot(page, "api-docs-1280.png")
    assert page.problems == []
    assert page.outside == []


def test_a_token_is_created_shown_once_and_revoked_in_place(page, live_server):
    page.goto(live_server.url + "/settings/tokens/")
    page.fill("#id_name", "training cluster")
    page.click("text=Create token")
    page.wait_for_selector("#new-token")
    secret = page.inner_text("#new-token")
    assert secret.startswith("cs_")
    _shot(page, "api-token-created-1280.png")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("button:has-text('Revoke')")
    page.wait_for_selector("td:has-text('revoked')")
    assert page.locator("#new-token").count() == 0
    assert page.problems == []
