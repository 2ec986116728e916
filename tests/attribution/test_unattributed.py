"""Unattributed spend: the page (staff and leads only) and assigning a resource, or a pattern of
them, to a project, experiment or deployment, which moves the resource's whole history."""

from datetime import date
from decimal import Decimal

import pytest
from django.urls import reverse

from apps.billing.models import DailyCost
from apps.billing.services import import_run_create, import_run_execute
from apps.billing.services_attribution import unattributed_claim
from apps.projects.models import AllocationRule
from apps.spend.selectors import spend_totals
from tests.factories import ExperimentFactory

from .conftest import BUCKET, resource_rollup, rollup, write_bill

pytestmark = pytest.mark.django_db
D = Decimal


def test_staff_see_unattributed_resources_by_spend_and_the_attributed_share(staff_client, bill):
    response = staff_client.get(reverse("unattributed"))
    assert response.status_code == 200
    context = response.context
    summary = context["summary"]
    assert (summary.amount, summary.resources, summary.total) == (D("20.00"), 2, D("535.00"))
    assert summary.without_resource_id == D("0")  # i-orphan 15 and the bucket 5 are all of it
    assert summary.attributed_share == 1 - D("20") / D("535")
    assert [(r.resource_id, r.resource_name, r.amount, r.days) for r in context["resources"]] == [
        ("i-orphan", "orphan box", D("15.00"), 2),
        (BUCKET, "", D("5.00"), 1),
    ]
    page = response.content.decode()
    assert '<p class="figure" id="attributed-share">96.3%</p>' in page


def test_a_lead_sees_the_page_without_the_organisations_share(lead_client, bill):
    response = lead_client.get(reverse("unattributed"))
    assert response.status_code == 200
    assert len(response.context["resources"]) == 2
    assert 'id="attributed-share"' not in response.content.decode()


def test_a_lead_of_another_team_sees_unattributed_spend_too(outsider_client, bill):
    # Nobody claimed it yet: it belongs to no team, and every lead may claim it.
    assert outsider_client.get(reverse("unattributed")).status_code == 200


def test_a_member_gets_404_on_the_page_its_export_and_the_claim(member_client, bill):
    for url in (
        reverse("unattributed"),
        reverse("unattributed_export"),
        reverse("unattributed_claim"),
    ):
        assert member_client.get(url).status_code == 404, url
    response = member_client.post(
        reverse("unattributed_claim"),
        {"resource_id": "i-orphan", "target": f"project:{bill.vision_project.pk}"},
    )
    assert response.status_code == 404
    assert not AllocationRule.objects.exists()


def test_the_range_and_provider_filter_the_resources(staff_client, bill):
    context = staff_client.get(reverse("unattributed"), {"preset": "last-month"}).context
    assert [(r.resource_id, r.amount) for r in context["resources"]] == [("i-old", D("4.00"))]
    context = staff_client.get(reverse("unattributed"), {"provider": "Google Cloud"}).context
    assert context["resources"] == [] and context["summary"].amount == D("0")


def test_resources_come_a_page_at_a_time(staff_client, bill):
    for n in range(30):
        resource_rollup(bill.march, date(2025, 3, 1), f"vol-{n:02d}", f"{n + 1}.00")
    first = staff_client.get(reverse("unattributed")).context
    assert first["page"].paginator.count == 32
    assert [r.resource_id for r in first["resources"][:2]] == ["vol-29", "vol-28"]
    second = staff_client.get(reverse("unattributed"), {"page": 2}).context
    # 6.00, then the two at 5.00 by id ("=" sorts before "v"), then 4.00 to 1.00.
    assert [r.resource_id for r in second["resources"]] == [
        "vol-05",
        BUCKET,
        "vol-04",
        "vol-03",
        "vol-02",
        "vol-01",
        "vol-00",
    ]


def test_the_claim_form_offers_only_what_the_lead_may_claim_for(lead_client, bill):
    response = lead_client.get(reverse("unattributed_claim"), {"resource": "i-orphan"})
    assert response.status_code == 200
    form = response.context["form"]
    assert form["resource_id"].value() == "i-orphan"
    offered = {value for _, options in form.fields["target"].choices[1:] for value, _ in options}
    assert offered == {
        f"project:{bill.vision_project.pk}",
        f"experiment:{bill.resnet.pk}",
        f"experiment:{bill.vit.pk}",
        f"deployment:{bill.ranker_prod.pk}",
    }


def test_a_lead_assigns_a_resource_to_a_project_of_the_team(
    lead, lead_client, bill, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        response = lead_client.post(
            reverse("unattributed_claim"),
            {"resource_id": "i-orphan", "target": f"project:{bill.vision_project.pk}"},
            follow=True,
        )
    rule = AllocationRule.objects.get()
    assert (rule.field, rule.pattern, rule.project, rule.experiment, rule.created_by) == (
        "resource_id",
        "i-orphan",
        bill.vision_project,
        None,
        lead,
    )
    assert len(callbacks) == 1  # the re-attribution, once the claim is committed
    page = response.content.decode()
    assert (
        "Assigned i-orphan to the project “Image ranking”: $15.00 of unattributed spend moves "
        "there, all history included."
    ) in page
    assert '<td class="mono wrap">i-orphan</td>' in page  # under "Assigned here lately"


def test_a_lead_assigns_a_pattern_to_an_experiment(lead_client, bill):
    response = lead_client.post(
        reverse("unattributed_claim"),
        {"pattern": "I-*", "target": f"experiment:{bill.vit.pk}"},
        follow=True,
    )
    rule = AllocationRule.objects.get()
    assert (rule.pattern, rule.project, rule.experiment) == ("I-*", bill.vision_project, bill.vit)
    # i-orphan (15) and, before the period, i-old (4); i-resnet is attributed already.
    assert (
        "Assigned 2 resources matching “I-*” to the experiment “vit”: $19.00 of unattributed "
        "spend moves there"
    ) in response.content.decode()


def test_a_lead_cannot_assign_to_another_teams_project(outsider_client, bill):
    response = outsider_client.post(
        reverse("unattributed_claim"),
        {"resource_id": "i-orphan", "target": f"project:{bill.vision_project.pk}"},
    )
    assert response.status_code == 200
    assert (
        "Choose a project, experiment or deployment of a team you lead."
        in response.content.decode()
    )
    assert not AllocationRule.objects.exists()


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"pattern": "**"}, "A pattern that matches every resource id would claim all"),
        ({}, "Give either one resource id or a pattern of resource ids."),
        ({"resource_id": "i-orphan", "pattern": "i-*"}, "Give either one resource id or a pattern"),
    ],
)
def test_a_claim_without_one_resource_or_a_sensible_pattern_is_refused(
    staff_client, bill, data, error
):
    response = staff_client.post(
        reverse("unattributed_claim"), {**data, "target": f"project:{bill.translation.pk}"}
    )
    assert error in response.content.decode()
    assert not AllocationRule.objects.exists()


def test_the_claim_form_comes_in_place_for_htmx(staff_client, bill):
    response = staff_client.get(
        reverse("unattributed_claim"), {"resource": BUCKET}, headers={"HX-Request": "true"}
    )
    page = response.content.decode()
    assert page.lstrip().startswith('<article class="claim-card">')
    assert "<html" not in page


# -- The whole way: a bill imported, a resource claimed, its history moved -------------------------


@pytest.fixture
def imported(organization, frozen, project, tmp_path):
    def line(day: str, resource: str, amount: str, tags: str = "") -> dict:
        return {
            "ChargePeriodStart": f"2025-03-{day}T10:00:00Z",
            "ChargePeriodEnd": f"2025-03-{day}T11:00:00Z",
            "BilledCost": amount,
            "EffectiveCost": amount,
            "ResourceId": resource,
            "Tags": tags,
        }

    path = write_bill(
        tmp_path / "march.csv",
        [
            line("10", "i-train", "12.50", '{"project": "image-ranking"}'),
            line("11", "i-stray", "7.25"),
            line("12", "i-stray", "2.75"),
            line("12", "i-other", "1.00"),
        ],
    )
    run = import_run_execute(import_run=import_run_create(paths=[str(path)]))
    assert run.status == "succeeded", run.error
    return project


def _wait_for(predicate, worker, timeout: float = 90):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    pytest.fail(f"gave up after {timeout}s; worker log:\n{worker.log()}")


@pytest.mark.django_db(transaction=True, databases=["default", "progress"])
def test_assigning_a_resource_moves_its_imported_history_to_the_run(
    lead_client, imported, celery_worker_process
):
    """The whole way, through the real worker: the claim commits, the re-attribution is queued
    after the commit and a Celery worker (another process) moves the history."""
    from apps.billing.models import AttributionRun

    run = ExperimentFactory(project=imported, name="stray-run")
    assert lead_client.get(reverse("unattributed")).context["summary"].amount == D("11.00")

    response = lead_client.post(
        reverse("unattributed_claim"),
        {"resource_id": "i-stray", "target": f"experiment:{run.pk}"},
        follow=True,
    )
    assert "$10.00 of unattributed spend moves there" in response.content.decode()
    attribution = AttributionRun.objects.get()

    def done() -> bool:
        attribution.refresh_from_db()
        return attribution.status in ("succeeded", "failed")

    _wait_for(done, celery_worker_process)
    assert attribution.status == "succeeded", celery_worker_process.log()
    totals = {t.key: t.effective_cost for t in spend_totals(by=("experiment_id", "workload"))}
    assert totals == {
        (None, "other"): D("12.50"),
        (run.pk, "training"): D("10.00"),
        (None, "unattributed"): D("1.00"),
    }
    after = lead_client.get(reverse("unattributed")).context
    assert [r.resource_id for r in after["resources"]] == ["i-other"]
    project_page = lead_client.get(reverse("project_detail", args=[imported.slug])).context
    assert [(r.name, r.amount) for r in project_page["experiment_costs"].rows] == [
        ("stray-run", D("10.00"))
    ]
    assert DailyCost.objects.filter(experiment=run).count() == 2  # 11 and 12 March


def test_unattributed_lines_without_a_resource_id_are_counted_and_pointed_at_rules(
    staff_client, bill
):
    rollup(bill.march, date(2025, 3, 2), "3.00", workload="unattributed", cost_kind="network")
    response = staff_client.get(reverse("unattributed"))
    summary = response.context["summary"]
    assert (summary.amount, summary.without_resource_id) == (D("23.00"), D("3.00"))
    assert "$3.00 on lines without a resource id (transfer, fees)" in response.content.decode()


@pytest.mark.parametrize("pattern", ["*?*", "?*", "*[!x]*", "***"])
def test_a_pattern_that_matches_every_resource_is_refused_however_it_is_spelled(
    staff_client, bill, pattern
):
    response = staff_client.post(
        reverse("unattributed_claim"),
        {"pattern": pattern, "target": f"project:{bill.translation.pk}"},
    )
    assert (
        "A pattern that matches every resource id would claim all unattributed spend: name part "
        "of the resource id, e.g. arn:aws:s3:::vision-*" in response.content.decode()
    )
    assert not AllocationRule.objects.exists()


def test_a_pattern_with_an_unreadable_class_is_refused(staff_client, bill):
    response = staff_client.post(
        reverse("unattributed_claim"),
        {"pattern": "i-[z-a]*", "target": f"project:{bill.translation.pk}"},
    )
    assert "This pattern cannot be read: check its [ ] classes" in response.content.decode()
    assert not AllocationRule.objects.exists()


def test_the_claim_service_refuses_a_pattern_that_matches_everything(lead, bill):
    with pytest.raises(ValueError, match="A pattern that matches every resource id"):
        unattributed_claim(project=bill.vision_project, pattern="*[!x]*", created_by=lead)
    assert not AllocationRule.objects.exists()


def test_the_count_says_what_the_list_shows_and_lines_without_a_resource_id_are_said_apart(
    staff_client, lead_client, bill
):
    # A resource whose charge and credit net to nothing, and a transfer line with no resource id.
    resource_rollup(bill.march, date(2025, 3, 14), "i-netted", "4.00")
    resource_rollup(bill.march, date(2025, 3, 15), "i-netted", "-4.00")
    rollup(
        bill.march, date(2025, 3, 14), "3.50", workload="unattributed", service="AWS Data Transfer"
    )
    response = staff_client.get(reverse("unattributed"))
    summary = response.context["summary"]
    listed = [r.resource_id for r in response.context["resources"]]
    assert listed == ["i-orphan", BUCKET]
    assert summary.resources == len(listed) == 2  # not 3: i-netted is not listed
    assert (summary.amount, summary.without_resource_id) == (D("23.50"), D("3.50"))
    # (The fixture's row 6 books the bucket's 5.00 under EC2 in the daily rollup and under S3 in
    # the resource rollup, so those two services show +5 and -5 here; the transfer is exact.)
    without = {(w.service_name, w.amount) for w in response.context["without_resource_id"]}
    assert ("AWS Data Transfer", D("3.50")) in without
    page = response.content.decode()
    assert (
        '<p class="muted" id="unattributed-count">2 resources to assign, and $3.50 on lines '
        "without a resource id (transfer, fees): a rule on the service or account claims those</p>"
    ) in page
    assert '<table class="striped" id="without-resource-id">' in page

    # Every resource claimed: the page does not say "nothing unattributed" while $3.50 still is.
    AllocationRule.objects.create(
        name="all", field=AllocationRule.Field.RESOURCE, pattern="i-*", project=bill.vision_project
    )
    from apps.billing.models import DailyResourceCost

    DailyResourceCost.objects.update(project=bill.vision_project)
    DailyCost.objects.filter(project=None).exclude(service_name="AWS Data Transfer").update(
        project=bill.vision_project
    )
    # What is summed from the daily rows follows them, as after a re-attribution.
    from apps.billing.loader import monthly_rebuild
    from apps.billing.models import Delivery

    for delivery in Delivery.objects.all():
        monthly_rebuild(delivery_id=delivery.pk)
    page = lead_client.get(reverse("unattributed")).content.decode()
    assert "Nothing unattributed in this period" not in page
    assert "No resource left to assign in this period, but $3.50 is still unattributed" in page
    # A lead assigns it here, by service or billing account.
    assert "/unattributed/claim/?service=AWS%20Data%20Transfer" in page
    assert "/unattributed/claim/?account=111111111111" in page


@pytest.mark.django_db(transaction=False, databases=["default", "progress"])
def test_a_claim_can_set_the_workload_of_what_it_moves(
    lead_client, imported, eager_celery, django_capture_on_commit_callbacks
):
    # A GPU box claimed for the project alone reads as "Other" unless the claim says training.
    with django_capture_on_commit_callbacks(execute=True):
        lead_client.post(
            reverse("unattributed_claim"),
            {"resource_id": "i-stray", "target": f"project:{imported.pk}", "workload": "training"},
            follow=True,
        )
    rule = AllocationRule.objects.get(pattern__icontains="i-stray")
    assert rule.workload == "training"
    totals = {t.key: t.effective_cost for t in spend_totals(by=("project_id", "workload"))}
    assert totals == {
        (imported.pk, "other"): D("12.50"),  # the tagged line: no claim touched it
        (imported.pk, "training"): D("10.00"),
        (None, "unattributed"): D("1.00"),
    }


@pytest.mark.django_db(transaction=False, databases=["default", "progress"])
def test_a_lead_claims_lines_without_a_resource_id_by_service_and_by_account(
    lead_client, organization, frozen, project, tmp_path, eager_celery,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    def line(day: str, amount: str, **values) -> dict:
        return {
            "ChargePeriodStart": f"2025-03-{day}T10:00:00Z",
            "ChargePeriodEnd": f"2025-03-{day}T11:00:00Z",
            "BilledCost": amount,
            "EffectiveCost": amount,
            **values,
        }

    other_account = {"BillingAccountId": "222222222222"}
    path = write_bill(
        tmp_path / "march.csv",
        [
            line("10", "7.25", ResourceId="i-stray"),
            line("11", "1.50", ServiceName="AWS Data Transfer", ServiceCategory="Networking"),
            line("11", "0.40", ServiceName="AWS Support", ServiceCategory="Other", **other_account),
            line("12", "2.00", ResourceId="i-other", **other_account),
        ],
    )
    run = import_run_execute(import_run=import_run_create(paths=[str(path)]))
    assert run.status == "succeeded", run.error
    count = (
        '<p class="muted" id="unattributed-count">2 resources to assign, and $1.90 on lines '
        "without a resource id (transfer, fees): a rule on the service or account claims those</p>"
    )
    assert count in lead_client.get(reverse("unattributed")).content.decode()
    assert count in lead_client.get(reverse("home")).content.decode()  # the lead's overview too
    rows = lead_client.get(reverse("unattributed")).context["without_resource_id"]
    assert [(r.service_name, r.billing_account_id, r.amount) for r in rows] == [
        ("AWS Data Transfer", "111111111111", D("1.50")),
        ("AWS Support", "222222222222", D("0.40")),
    ]
    form = lead_client.get(reverse("unattributed_claim") + "?service=AWS Data Transfer")
    assert form.context["form"].initial["service_name"] == "AWS Data Transfer"

    with django_capture_on_commit_callbacks(execute=True):
        by_service = lead_client.post(
            reverse("unattributed_claim"),
            {"service_name": "AWS Data Transfer", "target": f"project:{project.pk}"},
            follow=True,
        )
    with django_capture_on_commit_callbacks(execute=True):
        by_account = lead_client.post(
            reverse("unattributed_claim"),
            {"billing_account_id": "222222222222", "target": f"project:{project.pk}"},
            follow=True,
        )

    assert (
        "Assigned every unattributed line of the service “AWS Data Transfer” to the project "
        "“Image ranking”: $1.50 ($1.50 of it on lines without a resource id, the rest on 0 "
        "resources) of unattributed spend moves there, all history included."
        in by_service.content.decode()
    )
    assert (
        "Assigned every unattributed line of the billing account “222222222222” to the project "
        "“Image ranking”: $2.40 ($0.40 of it on lines without a resource id, the rest on 1 "
        "resource) of unattributed spend moves there" in by_account.content.decode()
    )
    rules = AllocationRule.objects.order_by("pk").values_list("field", "pattern")
    assert list(rules) == [
        ("service_name", "AWS Data Transfer"),
        ("billing_account_id", "222222222222"),
    ]
    totals = {t.key: t.effective_cost for t in spend_totals(by=("project_id",))}
    assert totals == {(project.pk,): D("3.90"), (None,): D("7.25")}
    page = lead_client.get(reverse("unattributed"))
    assert '<p class="muted" id="unattributed-count">1 resource to assign</p>' in (
        page.content.decode()
    )
    assert page.context["without_resource_id"] == []


@pytest.mark.parametrize(
    "data",
    [
        {"service_name": "AWS Support", "resource_id": "i-stray"},
        {"service_name": "AWS Support", "billing_account_id": "222222222222"},
        {"billing_account_id": "222222222222", "pattern": "i-*"},
    ],
)
def test_a_claim_by_service_or_account_names_that_field_alone(lead_client, bill, data):
    response = lead_client.post(
        reverse("unattributed_claim"), {**data, "target": f"project:{bill.vision_project.pk}"}
    )
    assert "Give a service or a billing account alone: a rule matches one field." in (
        response.content.decode()
    )
    assert not AllocationRule.objects.exists()
