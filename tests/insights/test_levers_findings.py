"""The inference levers as findings, recomputed from a small bill worked out by hand (USD; the
bill's data as of 11 March 2025 00:00 UTC, so the levers read 9 February - 11 March).

Deployment "chat" (1 replica, a 60 s cold start, no latency objective) on i-serve: 10 March
00:00-10:00 at 3.00 an hour = 30.00. Traffic: 00:00-06:00 100 requests an hour with 10 repeats
(500 tokens in and 100 out each), 06:00-10:00 reported with none.
- cache_repeats   60 repeats × (30.00 ÷ 600 requests) = 3.00
- scale_to_zero   4 hours without traffic × 3.00 = 12.00
- smaller_model   300,000 tokens in, 60,000 out: hosted/large 3.00 + 1.80 = 4.80 against
                  hosted/small 0.60 + 0.36 = 0.96 -> 3.84
- no batch lever (one replica, no objective allowing batch), no right-size (no GPU metrics).
The savings total counts the largest lever of the subject i-serve: 12.00, not 18.84.
"""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from itertools import count

import pytest
from django.urls import reverse

from apps.accounts.models import Organization
from apps.billing.models import CostKind, CostLineItem, Delivery
from apps.deployments.models import TrafficHour
from apps.insights.models import BuildOrCallInputs, Finding, Kind, ModelApiPrice, Status
from apps.insights.selectors import waste_totals
from apps.insights.services import findings_recompute
from tests.factories import DeploymentFactory, ModelFactory

pytestmark = pytest.mark.django_db

_rows = count(2)
DAY = datetime(2025, 3, 10, tzinfo=UTC)


@pytest.fixture
def chat(project):
    org = Organization.get()
    org.currency = "USD"
    org.save()
    delivery = Delivery.objects.create(
        status=Delivery.Status.CURRENT,
        format="focus",
        billing_account_id="111",
        billing_period_start=datetime(2025, 3, 1, tzinfo=UTC),
        billing_period_end=datetime(2025, 4, 1, tzinfo=UTC),
        fingerprint="f" * 64,
        max_charge_period_end=datetime(2025, 3, 11, tzinfo=UTC),
        max_usage_period_end=datetime(2025, 3, 11, tzinfo=UTC),
    )
    deployment = DeploymentFactory(
        project=project,
        model=ModelFactory(project=project, name="chat-model"),
        name="chat",
        replicas=1,
        cold_start_seconds=60,
        latency_objective_ms=None,
    )
    for number in range(10):
        moment = DAY + timedelta(hours=number)
        CostLineItem.objects.create(
            delivery=delivery,
            source_row=next(_rows),
            billing_account_id="111",
            billing_period_start=delivery.billing_period_start,
            billing_period_end=delivery.billing_period_end,
            charge_period_start=moment,
            charge_period_end=moment + timedelta(hours=1),
            charge_category="Usage",
            billing_currency="USD",
            billed_cost=Decimal("3.00"),
            effective_cost=Decimal("3.00"),
            service_name="Amazon Elastic Compute Cloud",
            provider_name="AWS",
            resource_id="i-serve",
            project=project,
            deployment=deployment,
            workload="inference",
            cost_kind=CostKind.GPU_COMPUTE,
        )
        busy = number < 6
        TrafficHour.objects.create(
            deployment=deployment,
            hour=moment,
            requests=100 if busy else 0,
            duplicate_requests=10 if busy else 0,
            tokens_in=50_000 if busy else 0,
            tokens_out=10_000 if busy else 0,
            updated_at=moment,
        )
    for name, inp, out in (
        ("hosted/large", "0.00001", "0.00003"),
        ("hosted/small", "0.000002", "0.000006"),
    ):
        ModelApiPrice.objects.create(
            name=name,
            provider="hosted",
            mode="chat",
            currency="USD",
            input_per_token=Decimal(inp),
            output_per_token=Decimal(out),
            source="test",
            as_of=DAY.date(),
        )
    BuildOrCallInputs.objects.create(deployment=deployment, api_model="hosted/large")
    return deployment


def levers() -> dict[str, Finding]:
    return {
        finding.kind: finding
        for finding in Finding.objects.filter(
            kind__in=[
                Kind.CACHE_REPEATS,
                Kind.SCALE_TO_ZERO,
                Kind.BATCH_REQUESTS,
                Kind.BATCH_NOT_REALTIME,
                Kind.RIGHT_SIZE_SERVING,
                Kind.SMALLER_MODEL,
            ]
        )
    }


def test_the_recompute_finds_each_lever_with_its_hand_computed_saving(chat, project):
    findings_recompute()
    found = levers()
    assert {kind: f.savings_per_month for kind, f in found.items()} == {
        Kind.CACHE_REPEATS: {"USD": "3"},
        Kind.SCALE_TO_ZERO: {"USD": "12"},
        Kind.SMALLER_MODEL: {"USD": "3.84"},
    }
    for finding in found.values():
        assert (finding.deployment, finding.project, finding.resource_id) == (
            chat,
            project,
            "i-serve",
        )
        assert finding.wasted == {}  # savings, never waste
        assert not finding.hours.exists()
    assert found[Kind.SCALE_TO_ZERO].evidence["spans"] == [
        {"start": "2025-03-10T06:00:00+00:00", "end": "2025-03-10T10:00:00+00:00", "hours": 4}
    ]
    totals = waste_totals(findings=Finding.objects.all(), start=None, end=None, today=DAY.date())
    assert totals.savings_per_month == {"USD": Decimal("12")}


def test_a_lever_whose_cause_goes_is_gone_at_the_next_recompute(chat):
    findings_recompute()
    TrafficHour.objects.filter(deployment=chat, requests=0).update(requests=100)
    findings_recompute()
    assert levers()[Kind.SCALE_TO_ZERO].status == Status.GONE
    # 60 repeats of 1,000 requests now: 60 × 0.03 = 1.80.
    assert levers()[Kind.CACHE_REPEATS].savings_per_month == {"USD": "1.8"}


def test_the_finding_page_draws_the_evidence_and_the_build_or_call_page_lists_the_levers(
    chat, member_client
):
    findings_recompute()
    found = levers()
    page = member_client.get(reverse("finding_detail", args=[found[Kind.SCALE_TO_ZERO].pk]))
    text = page.content.decode()
    assert page.status_code == 200
    assert 'id="evidence-chart"' in text
    assert "4 of 10 billed hours served no request" in text
    text = member_client.get(
        reverse("finding_detail", args=[found[Kind.SMALLER_MODEL].pk])
    ).content.decode()
    assert 'id="model-comparison"' in text and "hosted/small" in text
    text = member_client.get(reverse("build_or_call_detail", args=[chat.pk])).content.decode()
    assert text.count('data-kind="') == 3
    assert 'id="levers-largest">$12.00<' in text
    assert text.index('data-kind="scale_to_zero"') < text.index('data-kind="smaller_model"')


def test_a_deployments_resource_is_right_sized_by_the_serving_lever_not_by_part_two(
    organization, delivery, project
):
    """Part 2's right-size box (tests/insights/test_part2.py): a g5.12xlarge whose GPUs peak at
    8,000 MiB and 40% busy, its ten hours now a deployment's. The g4dn.12xlarge holds the model:
    (5.672 − 3.912) × 10 instance-hours = 17.60, once, as right_size_serving."""
    from tests.insights.test_part2 import recompute, right_size_box

    right_size_box(delivery, project, [8000, 6000, 5000, 4000], [40.0, 20.0, 10.0, 10.0])
    serving = DeploymentFactory(project=project, name="ranker", replicas=1)
    CostLineItem.objects.filter(resource_id="i-rs").update(
        deployment=serving, workload="inference", pricing_category="Standard"
    )
    recompute(delivery)
    assert not Finding.objects.filter(kind=Kind.RIGHT_SIZE).exists()
    found = Finding.objects.get(kind=Kind.RIGHT_SIZE_SERVING)
    assert (found.subject_key, found.deployment) == ("i-rs", serving)
    assert found.savings_per_month == {"USD": "17.6"}
    assert [row["instance_type"] for row in found.evidence["candidates"]] == [
        "g4dn.12xlarge",
        "g6.12xlarge",
    ]
    assert found.reason == (
        "Peak 8.39 GB and 40% busy fit g4dn.12xlarge (4 × T4) instead of g5.12xlarge "
        "(4 × A10G): USD 17.60 a month less"
    )


def test_the_six_lever_kinds_share_one_read_of_their_period_per_recompute(chat, monkeypatch):
    """One deployment_facts() read per recompute for the six kinds (it was one each), the same
    findings; outside a recompute every call reads again (nothing kept between recomputes)."""
    from apps.insights import compute_levers

    reads = []
    real = compute_levers.deployment_facts

    def counted():
        reads.append(1)
        return real()

    monkeypatch.setattr(compute_levers, "deployment_facts", counted)
    findings_recompute()
    assert len(reads) == 1
    assert sorted(levers()) == sorted([Kind.CACHE_REPEATS, Kind.SCALE_TO_ZERO, Kind.SMALLER_MODEL])
    TrafficHour.objects.filter(deployment=chat, requests=0).update(requests=100)
    findings_recompute()
    assert len(reads) == 2
    assert levers()[Kind.SCALE_TO_ZERO].status == Status.GONE  # the second read saw the change
    for hours_of in compute_levers.KIND_HOURS.values():
        hours_of(start=None, end=None)
    assert len(reads) == 2 + 6
