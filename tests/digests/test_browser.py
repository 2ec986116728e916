"""A real browser: a lead opens the digest settings, chooses daily and back to weekly, and
previews the next digest, which is the HTML part as it will be mailed; nothing complains in the
console. With SCREENSHOT_DIR set, the preview is saved there (the README's screenshot)."""

import os
from pathlib import Path

import pytest
import time_machine
from django.urls import reverse

from apps.digests.models import Subscription
from tests.factories import PASSWORD

from .conftest import SEND_AT

pytestmark = pytest.mark.browser


def test_a_lead_changes_the_digest_and_previews_it(
    live_server, transactional_db, world, lead, browser_page
):
    page = browser_page
    missing = []
    page.on("response", lambda response: response.status == 404 and missing.append(response.url))
    with time_machine.travel(SEND_AT, tick=True):
        page.goto(live_server.url + reverse("login"))
        page.fill("#id_username", lead.username)
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")

        page.click(".nav-wide >> text=Digests")
        assert page.is_checked("#id_active")
        page.select_option("#id_frequency", "daily")
        page.click("form.site-form button[type=submit]")
        page.wait_for_selector("text=Your digest settings are saved.")
        assert Subscription.objects.get(user=lead).frequency == "daily"
        page.select_option("#id_frequency", "weekly")
        page.click("form.site-form button[type=submit]")
        page.wait_for_selector("text=Your digest settings are saved.")

        page.click("text=Preview the next digest")
        page.wait_for_selector("#headline")
        assert page.inner_text("#headline") == (
            "$18.25 was wasted last week; 55% of it is one finding, Idle GPU on i-u."
        )
        assert page.inner_text("#wasted") == "$18.25"
        assert page.locator("script").count() == 0
        if os.environ.get("SCREENSHOT_DIR"):
            page.set_viewport_size({"width": 760, "height": 900})
            page.screenshot(
                path=str(Path(os.environ["SCREENSHOT_DIR"]) / "digest.png"), full_page=True
            )
    # The preview is the mail's HTML as it is, with no favicon link: the browser's own request
    # for /favicon.ico (when it makes one) is the only thing allowed to go missing.
    assert set(missing) <= {live_server.url + "/favicon.ico"}
    # Chromium logs its favicon request's 404 in the console, and does not always report it as a
    # response event: at most that one message, and nothing else.
    assert page.problems in (
        [],
        ["Failed to load resource: the server responded with a status of 404 (Not Found)"],
    )
