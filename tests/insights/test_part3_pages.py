"""Part 3's findings on the pages: the waste page's failed total and GPU coverage, the finding
pages' evidence (loss curve with the plateau, price comparison, commitment use), the experiment
page's findings and the project page's failed share (the bill of test_part3.py)."""

import json
import re
from datetime import date
from decimal import Decimal

import pytest
from django.test import Client

from apps.billing.models import CostKind, DailyCost
from apps.insights.models import Finding, Kind

from .test_part3 import delivery, part3  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def finding(kind, **where):
    return Finding.objects.get(kind=kind, **where)


def chart_of(body: str, chart_id: str) -> dict:
    match = re.search(rf'<script id="{chart_id}" type="application/json">(.*?)</script>', body)
    assert match, f"no {chart_id} in the page"
    return json.loads(match.group(1))


def test_the_waste_page_totals_failed_runs_and_draws_gpu_coverage(part3, lead, delivery, project):
    for pricing, cost in (("Committed", "30"), ("Standard", "50"), ("Dynamic", "20")):
        DailyCost.objects.create(
            delivery=delivery,
            project=project,
            day=date(2025, 3, 10),
            workload="training",
            cost_kind=CostKind.GPU_COMPUTE,
            pricing_category=pricing,
            billing_currency="USD",
            effective_cost=Decimal(cost),
            billed_cost=Decimal(cost),
            list_cost=Decimal(cost),
            line_items=1,
        )
    body = client_for(lead).get("/waste/?start=2025-03-01&end=2025-03-11").content.decode()
    # crashed 10.50 + big 40.00
    assert '<p class="figure" id="total-failed"><strong>$50.50</strong>' in body
    figure = chart_of(body, "coverage-chart")
    assert [(trace["name"], trace["y"]) for trace in figure["data"]] == [
        ("Committed", [30.0]),
        ("On-demand", [50.0]),
        ("Spot", [20.0]),
    ]


def test_a_stalled_runs_page_draws_the_loss_with_the_plateau(part3, lead):
    stalled = finding(Kind.STALLED_RUN)
    body = client_for(lead).get(f"/waste/{stalled.pk}/").content.decode()
    figure = chart_of(body, "evidence-chart")
    assert figure["data"][0]["x"][:3] == [0, 100, 200]
    assert figure["layout"]["shapes"][0]["x0"] == 1500
    assert "The plateau starts at step 1500" in body


def test_the_levers_pages_show_the_price_comparison_and_the_data_warning(part3, lead):
    spot = finding(Kind.SPOT_CANDIDATE, resource_id="i-r")
    body = client_for(lead).get(f"/waste/{spot.pk}/").content.decode()
    assert 'id="price-comparison"' in body
    assert "$197.00" in body and "$120.00" in body and "$3.00" in body
    region = finding(Kind.CHEAPER_REGION, resource_id="i-r")
    body = client_for(lead).get(f"/waste/{region.pk}/").content.decode()
    assert "The project&#x27;s data sits in us-east-1" in body
    assert "us-west-2 $30.00" in body


def test_a_commitments_page_draws_its_use(part3, lead):
    unused = finding(Kind.UNUSED_COMMITMENT)
    body = client_for(lead).get(f"/waste/{unused.pk}/").content.decode()
    figure = chart_of(body, "evidence-chart")
    assert [(trace["name"], trace["y"]) for trace in figure["data"]] == [
        ("Used (USD)", [3.0]),
        ("Unused (USD)", [5.0]),
    ]


def test_the_experiment_page_shows_its_stalled_and_spot_findings(part3, lead):
    body = client_for(lead).get(f"/experiments/{part3['pretrain'].pk}/").content.decode()
    assert "Run that stopped converging" in body
    body = client_for(lead).get(f"/experiments/{part3['tune'].pk}/").content.decode()
    assert "Spot candidate" in body and "$197.00" in body
    body = client_for(lead).get(f"/experiments/{part3['crashed'].pk}/").content.decode()
    assert "Run crashed failed: USD 10.50 over 3 billed hours" in body


def test_the_project_page_shows_the_failed_share(part3, lead, delivery, project):
    DailyCost.objects.create(
        delivery=delivery,
        project=project,
        day=date(2025, 3, 5),
        workload="training",
        cost_kind=CostKind.GPU_COMPUTE,
        pricing_category="Standard",
        billing_currency="USD",
        effective_cost=Decimal("200"),
        billed_cost=Decimal("200"),
        list_cost=Decimal("200"),
        line_items=1,
    )
    body = (
        client_for(lead)
        .get(f"/projects/{project.slug}/?start=2025-03-05&end=2025-03-05")
        .content.decode()
    )
    # crashed 10.50 of 200.00 training spend on 5 March
    assert re.search(
        r'id="failed-share">Failed runs:\s*<strong>\$10.50</strong> of \$200.00 training spend '
        r"\(<strong>5.3%</strong>\)",
        body,
    ), body[body.find("failed-share") - 50 : body.find("failed-share") + 300]
