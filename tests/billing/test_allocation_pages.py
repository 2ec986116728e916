"""The allocation page: staff only (404 for everyone else), htmx forms with errors in place and
a preview before saving, plain POST too, and the re-attribution's progress polled until done."""

import pytest
from django.urls import reverse

from apps.billing.models import AttributionRun
from apps.billing.services import attribution_run_execute
from apps.projects.models import AllocationRule, TagKeyAlias

from .conftest import focus_line, run_import, write_focus

pytestmark = pytest.mark.django_db(databases=["default", "progress"])
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def bill(acme, tmp_path):
    """Unattributed: two S3 buckets (12.50 and 0.000000000000001) and one instance (3.00)."""
    s3 = "Amazon Simple Storage Service"
    lines = [
        focus_line(ResourceId="arn:aws:s3:::vision-data", ServiceName=s3, EffectiveCost="12.50"),
        focus_line(
            ResourceId="arn:aws:s3:::vision-logs", ServiceName=s3, EffectiveCost="0.000000000000001"
        ),
        focus_line(ResourceId="i-0abc", EffectiveCost="3.00"),
    ]
    assert run_import(write_focus(tmp_path / "bill.csv", lines)).status == "succeeded"
    return acme


RULE = {
    "name": "Vision buckets",
    "field": "resource_id",
    "pattern": "ARN:aws:s3:::vision-*",
    "priority": "50",
    "workload": "storage",
}


@pytest.mark.parametrize("who", ["lead_client", "member_client", "outsider_client"])
def test_anyone_but_staff_gets_404_on_every_allocation_url(request, who, bill):
    client = request.getfixturevalue(who)
    alias = TagKeyAlias.objects.first()
    rule = AllocationRule.objects.create(
        name="r", field="resource_id", pattern="x", project=bill.vision
    )
    run = AttributionRun.objects.create()
    gets = [
        reverse("allocation"),
        reverse("allocation_alias_edit", args=[alias.pk]),
        reverse("allocation_rule_edit", args=[rule.pk]),
        reverse("allocation_run_status", args=[run.pk]),
    ]
    posts = [
        reverse("allocation_alias_create"),
        reverse("allocation_rule_create"),
        reverse("allocation_alias_delete", args=[alias.pk]),
        reverse("allocation_rule_delete", args=[rule.pk]),
    ]
    for url in gets:
        assert client.get(url).status_code == 404, url
    for url in posts:
        assert client.post(url, {"action": "save", **RULE}).status_code == 404, url
    assert TagKeyAlias.objects.filter(pk=alias.pk).exists()
    assert AllocationRule.objects.filter(pk=rule.pk).exists()
    assert AttributionRun.objects.count() == 1


def test_staff_see_the_aliases_and_rules(staff_client, bill):
    AllocationRule.objects.create(
        name="Shared NAT", field="resource_id", pattern="nat-*", project=bill.nlp, priority=5
    )

    page = staff_client.get(reverse("allocation")).content.decode()

    assert "<code>ml-project</code>" in page
    assert "<code>nat-*</code>" in page
    assert "No re-attribution has run yet" in page


def test_the_rule_preview_shows_the_exact_claim_in_place(staff_client, bill):
    response = staff_client.post(
        reverse("allocation_rule_create"),
        {"action": "preview", "target": f"project:{bill.search.pk}", **RULE},
        **HTMX,
    )

    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<div class="change-form" id="rule-form-box">')
    assert "Saving moves <strong>$12.50</strong> of spend (2 lines, all history loaded)" in html
    assert '<td class="num">2</td><td class="num">$12.50</td>' in html
    assert not AllocationRule.objects.filter(name="Vision buckets").exists()


def test_a_rule_that_matches_nothing_says_so(staff_client, bill):
    response = staff_client.post(
        reverse("allocation_rule_create"),
        {"action": "preview", "target": f"project:{bill.search.pk}", **RULE, "pattern": "gs://*"},
        **HTMX,
    )

    assert (
        "Nothing would move: “gs://*” matches no spend this rule would take"
        in response.content.decode()
    )


def test_errors_show_in_place(staff_client, bill):
    response = staff_client.post(
        reverse("allocation_rule_create"),
        {"action": "preview", **RULE, "pattern": "  ", "target": "project:999999"},
        **HTMX,
    )

    html = response.content.decode()
    assert "Give a pattern, e.g. arn:aws:s3:::vision-*" in html
    assert "Choose a project, experiment or deployment." in html
    assert "Preview</h3>" not in html


def test_a_duplicate_alias_is_refused_with_the_key_it_repeats(staff_client, bill):
    response = staff_client.post(
        reverse("allocation_alias_create"),
        {"action": "save", "dimension": "project", "key": " ML-Project "},
        **HTMX,
    )

    assert (
        "The project is already read from the tag key “ml-project” (keys are compared without "
        "case or spaces)." in response.content.decode()
    )
    assert AttributionRun.objects.count() == 0


def test_saving_a_rule_starts_a_tracked_re_attribution_and_the_page_follows_it(
    staff_client, staff, bill, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        response = staff_client.post(
            reverse("allocation_rule_create"),
            {"action": "save", "target": f"experiment:{bill.resnet.pk}", **RULE},
            **HTMX,
        )

    run = AttributionRun.objects.get()
    assert response["HX-Redirect"] == f"{reverse('allocation')}?run={run.pk}#reattribution"
    rule = AllocationRule.objects.get(name="Vision buckets")
    assert (rule.project, rule.experiment, rule.created_by) == (bill.vision, bill.resnet, staff)
    assert (run.status, run.reason, run.created_by) == (
        "queued",
        "Allocation rule “Vision buckets” added",
        staff,
    )

    status_url = reverse("allocation_run_status", args=[run.pk])
    polling = staff_client.get(status_url, **HTMX)
    assert polling.status_code == 200
    assert f'hx-get="{status_url}"' in polling.content.decode()

    attribution_run_execute(attribution_run=run)
    done = staff_client.get(status_url, **HTMX)

    html = done.content.decode()
    assert done.status_code == 286  # htmx stops polling
    assert "hx-get" not in html
    assert "Succeeded" in html
    assert "1 of 1 deliveries · 2 lines changed owner" in html
    assert "Moved <strong>$12.50</strong>" in html
    assert "Vision · experiment resnet-baseline" in html
    page = staff_client.get(reverse("allocation"), {"run": run.pk}).content.decode()
    assert "Moved <strong>$12.50</strong>" in page


def test_plain_post_works_without_javascript(
    staff_client, bill, django_capture_on_commit_callbacks
):
    preview = staff_client.post(
        reverse("allocation_alias_create"),
        {"action": "preview", "dimension": "experiment", "key": "job"},
    )
    assert preview.status_code == 200
    assert "<title>Allocation" in preview.content.decode()
    assert "Nothing would move: no spend tagged “job” would change owner." in (
        preview.content.decode()
    )

    with django_capture_on_commit_callbacks(execute=False):
        saved = staff_client.post(
            reverse("allocation_alias_create"),
            {"action": "save", "dimension": "experiment", "key": "job"},
        )
    assert saved.status_code == 302
    assert TagKeyAlias.objects.filter(key="job", dimension="experiment").exists()
    page = staff_client.get(saved["Location"]).content.decode()
    assert "Tag key alias “job” added. Re-attributing the history now." in page
    assert "Tag key alias “job” for the experiment added" in page


def test_editing_and_deleting_a_rule_re_attribute(
    staff_client, bill, django_capture_on_commit_callbacks
):
    rule = AllocationRule.objects.create(
        name="Buckets", field="resource_id", pattern="arn:aws:s3:::*", project=bill.nlp
    )
    url = reverse("allocation_rule_edit", args=[rule.pk])
    form = staff_client.get(url).content.decode()
    assert f'<option value="project:{bill.nlp.pk}" selected>' in form

    preview = staff_client.post(
        url,
        {"action": "preview", **RULE, "target": f"project:{bill.nlp.pk}", "pattern": "*"},
        **HTMX,
    ).content.decode()
    # Not saved yet: the rule's buckets are still unattributed, like the instance.
    assert "Saving moves <strong>$15.50</strong>" in preview

    with django_capture_on_commit_callbacks(execute=False):
        staff_client.post(url, {"action": "save", **RULE, "target": f"project:{bill.nlp.pk}"})
        staff_client.post(reverse("allocation_rule_delete", args=[rule.pk]))
    assert not AllocationRule.objects.filter(pk=rule.pk).exists()
    assert list(AttributionRun.objects.order_by("pk").values_list("reason", flat=True)) == [
        "Allocation rule “Vision buckets” changed",
        "Allocation rule “Vision buckets” deleted",
    ]
