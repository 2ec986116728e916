"""A real browser (Debian's chromium, driven by Playwright) through issue 5's allocation page:
staff add an allocation rule, preview it (the exact claim, from whom), save it, and watch the
re-attribution, run by a real Celery worker, reach done with what moved. Not one console error
on the way (CSP violations count)."""

import time
from pathlib import Path

import pytest
from django.urls import reverse

from apps.accounts.models import Organization
from apps.billing.models import AttributionRun, CostLineItem
from apps.billing.services import import_run_create, import_run_execute
from apps.projects.models import AllocationRule
from tests.billing.conftest import focus_line, write_focus
from tests.factories import PASSWORD, ProjectFactory, StaffFactory, TeamFactory

pytestmark = [
    pytest.mark.browser,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True, databases=["default", "progress"]),
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def expect(locator):
    # Playwright's assertions poll without evaluating strings in the page (the CSP forbids it).
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


@pytest.fixture
def bill(tmp_path):
    """Unattributed: two buckets of the vision team (12.50 and 0.004) and an instance (3.00),
    in two billing accounts (two deliveries)."""
    org = Organization.get()
    org.currency, org.time_zone = "USD", "UTC"
    org.save()
    StaffFactory(username="sam")
    team = TeamFactory(name="Vision", slug="vision")
    ProjectFactory(team=team, name="Image ranking", slug="image-ranking")
    s3 = "Amazon Simple Storage Service"
    lines = [
        focus_line(ResourceId="arn:aws:s3:::vision-data", ServiceName=s3, EffectiveCost="12.50"),
        focus_line(
            BillingAccountId="999999999999",
            ResourceId="arn:aws:s3:::vision-logs",
            ServiceName=s3,
            EffectiveCost="0.004",
        ),
        focus_line(ResourceId="i-0abc", EffectiveCost="3.00"),
    ]
    run = import_run_execute(
        import_run=import_run_create(paths=[str(write_focus(tmp_path / "bill.csv", lines))])
    )
    assert run.status == "succeeded", run.error


def test_staff_preview_a_rule_save_it_and_watch_the_re_attribution_reach_done(
    live_server, bill, browser_page, celery_worker_process
):
    page = browser_page
    page.goto(live_server.url + reverse("allocation"))
    page.fill("#id_username", "sam")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(live_server.url + reverse("allocation"))
    assert "No re-attribution has run yet" in page.inner_text("#run-status")

    page.click("#rule-add summary")
    form = page.locator("#rule-form")
    form.locator("#id_name").fill("Vision buckets")
    form.locator("#id_field").select_option("resource_id")
    form.locator("#id_pattern").fill("ARN:aws:s3:::vision-*")
    form.locator("#id_target").select_option(label="Image ranking (the project)")
    form.locator("#id_workload").select_option("storage")
    page.evaluate("window.__stillHere = true")
    form.locator("button[value=preview]").click()

    # The preview swaps in place: $12.504 over two lines, all of it unattributed today.
    expect(page.locator("#rule-preview .preview-total")).to_contain_text("Saving moves $12.50")
    assert page.evaluate("window.__stillHere") is True
    assert "(2 lines, all history loaded)" in page.inner_text("#rule-preview .preview-total")
    taken = page.locator("#rule-preview tr.movement-from")
    expect(taken).to_have_count(1)
    assert taken.inner_text().split("\t")[1:] == ["Unattributed", "USD", "2", "$12.50", "$0.00"]
    given = page.locator("#rule-preview tr.movement-to")
    assert given.inner_text().split("\t")[1:] == ["Image ranking", "USD", "2", "$12.50", "$0.00"]
    assert not AllocationRule.objects.exists()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "allocation-preview-1280.png"), full_page=True)

    page.locator("#rule-form button[value=save]").click()
    page.wait_for_url(live_server.url + reverse("allocation") + "?run=*")
    run = AttributionRun.objects.get()
    assert "Allocation rule “Vision buckets” added. Re-attributing the history now." in (
        page.inner_text(".flash")
    )
    seen = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        # Both in one read: htmx may swap the element between two separate reads.
        status, hx_get = page.locator("#run-status").evaluate(
            "box => [box.querySelector('.run-state').dataset.status, box.getAttribute('hx-get')]"
        )
        seen.append((status, hx_get))
        if seen[-1][0] == "succeeded":
            break
        page.wait_for_timeout(200)
    else:
        pytest.fail(f"the run never showed done: {seen[-5:]}; {celery_worker_process.log()}")

    # Done: the last answer (286) took the polling off and said what moved.
    status_url = reverse("allocation_run_status", args=[run.pk])
    assert seen[-1] == ("succeeded", None)
    assert all(hx_get == status_url for status, hx_get in seen[:-1])
    assert page.inner_text("#run-status .run-counts") == (
        "2 of 2 deliveries · 2 lines changed owner"
    )
    assert page.inner_text("#run-status .run-moved") == "Moved $12.50:"
    polls = []
    page.on("request", lambda request: status_url in request.url and polls.append(request.url))
    page.wait_for_timeout(2500)
    assert polls == []
    assert sorted(
        CostLineItem.objects.filter(project__isnull=False).values_list("resource_id", flat=True)
    ) == ["arn:aws:s3:::vision-data", "arn:aws:s3:::vision-logs"]
    page.screenshot(path=str(ARTIFACTS / "allocation-done-1280.png"), full_page=True)
    assert page.problems == []
