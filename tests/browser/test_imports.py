"""A real browser (Debian's chromium, driven by Playwright) through issue 5's upload: staff log in,
upload a FOCUS file on the upload page, land on the run's page and watch its progress bar,
which a real Celery worker moves, reach done; the totals shown are the file's, exactly; the
imports list shows the run. Not one console error on the way (CSP violations count).
"""

import re
import time
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest
from django.urls import reverse

from apps.accounts.models import Organization
from apps.billing.models import ImportRun
from bench.focus_bill import focus_benchmark_write
from tests.billing.test_worker import source_totals
from tests.factories import PASSWORD, StaffFactory

pytestmark = [
    pytest.mark.browser,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True, databases=["default", "progress"]),
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
ROWS = 40_000  # enough for the worker to report progress a few times on the way


def expect(locator):
    # Playwright's assertions poll without evaluating strings in the page (the CSP forbids it).
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def _cents(amount: Decimal) -> str:
    return f"${amount.quantize(Decimal('0.01'), rounding=ROUND_HALF_UP):,.2f}"


def test_staff_upload_a_bill_and_watch_its_import_reach_done(
    live_server, browser_page, celery_worker_process, tmp_path, settings
):
    org = Organization.get()
    org.currency, org.time_zone = "USD", "UTC"
    org.save()
    StaffFactory(username="sam")
    settings.BILLING_UPLOAD_DIR = tmp_path / "uploads"
    bill = focus_benchmark_write(tmp_path / "acme-january.csv", rows=ROWS)
    rows, billed, effective = source_totals(bill)
    assert rows == ROWS

    page = browser_page
    page.goto(live_server.url + reverse("import_upload"))
    page.fill("#id_username", "sam")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(live_server.url + reverse("import_upload"))
    page.select_option("#id_format", "focus")
    page.set_input_files("#id_file", str(bill))
    page.click("#upload-form button[type=submit]")

    # htmx follows the redirect to the run's page, whose progress part polls itself.
    page.wait_for_url(re.compile(r"/imports/\d+/$"))
    run = ImportRun.objects.get()
    assert page.url == live_server.url + reverse("import_run_detail", args=[run.pk])
    assert (run.origin, run.display_name) == (ImportRun.Origin.UPLOAD, "acme-january.csv")
    seen = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        # Both attributes in one read: htmx may swap the element between two separate reads.
        status, trigger = page.locator("#run-live").evaluate(
            "live => [live.dataset.status, live.getAttribute('hx-trigger')]"
        )
        seen.append((status, trigger))
        if seen[-1][0] == "succeeded":
            break
        page.wait_for_timeout(200)
    else:
        pytest.fail(f"the run never showed done: {seen[-5:]}; {celery_worker_process.log()}")

    # Done: the last answer (286) took the polling off and carried the final figures.
    assert seen[-1] == ("succeeded", None)
    assert all(trigger == "every 1s" for status, trigger in seen[:-1])
    expect(page.locator("#run-progress")).to_have_attribute("value", "100")
    assert page.inner_text("#run-status") == "Succeeded"
    assert page.inner_text("#run-rows-done") == f"{ROWS:,} of {ROWS:,} rows"
    assert page.inner_text("#run-line-items") == f"{ROWS:,}"
    totals = page.locator("#run-totals tr[data-currency=USD]")
    assert totals.locator(".total-effective").inner_text() == _cents(effective)
    assert totals.locator(".total-billed").inner_text() == _cents(billed)
    run.refresh_from_db()
    assert Decimal(run.effective_cost["USD"]) == effective
    assert Decimal(run.billed_cost["USD"]) == billed
    requests_after = []
    page.on("request", lambda req: "/progress/" in req.url and requests_after.append(req.url))
    page.wait_for_timeout(2500)
    assert requests_after == []  # the polling stopped
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "import-run-1280.png"), full_page=True)

    # The imports list shows it; filtered to uploads, only it.
    ImportRun.objects.create(display_name="from-the-shell.csv", status=ImportRun.Status.SUCCEEDED)
    page.goto(live_server.url + reverse("import_list"))
    expect(page.locator("#import-runs tbody tr")).to_have_count(2)
    page.select_option("select[name=source]", "uploads")
    page.wait_for_url(re.compile(r"\?source=uploads$"))
    expect(page.locator("#import-runs tbody tr")).to_have_count(1)
    row = page.locator(f"#run-{run.pk}")
    assert "acme-january.csv" in row.inner_text()
    assert row.locator(".run-totals").inner_text() == _cents(effective)
    page.screenshot(path=str(ARTIFACTS / "imports-1280.png"), full_page=False)
    assert page.problems == []
