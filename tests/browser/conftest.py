"""The browser the browser tests drive: Debian's chromium through Playwright's sync API (its own
browser download is not used), with every console error or warning and page error collected in
`page.problems`, so that a test can assert there was none (CSP violations count)."""

import shutil

import pytest


@pytest.fixture
def browser_page(monkeypatch):
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("Debian's chromium is not installed (the test command installs it)")
    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are
    # synchronous and safe.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            args=["--no-sandbox", "--disable-background-networking"],
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.problems = []
        page.on(
            "console",
            lambda msg: msg.type in ("error", "warning") and page.problems.append(msg.text),
        )
        page.on("pageerror", lambda error: page.problems.append(str(error)))
        yield page
        browser.close()
