"""The overview, project, model and deployment pages show model API spend as inference, by
provider and model, with tokens, cost per million tokens and the cached-input share."""

import re
from datetime import date
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from apps.deployments.models import DeploymentResource
from apps.insights.models import ModelApiPrice
from apps.spend.filters import Period
from apps.spend.model_api import model_api_spend
from apps.spend.selectors import overview_scope

from .conftest import run_import
from .formats import api_pages as pages

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

JANUARY = "start=2025-01-01&end=2025-01-31"


@pytest.fixture
def root_client(client, django_user_model):
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw-123456")
    client.force_login(root)
    return client


@pytest.fixture
def gateway(acme, tmp_path):
    """The ranker deployment calls gpt-4o through the gateway with its own key."""
    DeploymentResource.objects.create(deployment=acme.ranker, resource_id=pages.KEY)
    rows = pages.litellm_rows()
    for row in rows:
        row["request_tags"] = "[]"
    assert run_import(pages.write_litellm_csv(tmp_path / "spend.csv", rows)).status == "succeeded"
    return acme


def table_rows(html: str) -> list[list[str]]:
    body = html.split('id="model-api"', 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)
    return [
        [
            re.sub(r"<[^>]+>", "", cell).strip()
            for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)
        ]
        for row in rows
    ]


def test_the_selector_adds_cached_share_and_cost_per_million(acme, tmp_path):
    ModelApiPrice.objects.create(
        name="gpt-4o-mini",
        provider="openai",
        input_per_token=Decimal("0.00000015"),
        output_per_token=Decimal("0.0000006"),
        cached_input_per_token=Decimal("0.000000075"),
        source="test",
        as_of="2025-01-01",
    )
    run_import(pages.write_json(tmp_path / "usage.json", pages.openai_usage_page()))
    staff = get_user_model().objects.create_superuser("staff", "s@example.com", "pw-123456")
    scope = overview_scope(user=staff, currency="USD")
    spend = model_api_spend(scope=scope, period=Period(date(2025, 1, 1), date(2025, 2, 1)))
    first = spend.rows[0]
    assert (first.provider, first.model, first.cost, first.tokens) == (
        "OpenAI",
        "gpt-4o-mini-2024-07-18",
        Decimal("0.00039"),
        Decimal(1500),
    )
    # 800 of 1,000 input tokens came from the cache; $0.00039 for 1,500 tokens is $0.26/M.
    assert first.cached_share == Decimal("0.8")
    assert first.per_million == Decimal("0.26")
    assert [(r.model, r.cost, r.tokens, r.requests) for r in spend.rows[1:]] == [
        ("ft:my-own-model", Decimal(0), Decimal(300), Decimal(2))
    ]


def test_the_overview_lists_hosted_model_spend_by_provider_and_model(gateway, root_client):
    html = root_client.get(f"{reverse('home')}?{JANUARY}").content.decode()
    assert "Hosted model APIs (inference)" in html
    assert table_rows(html) == [
        ["openai", "gpt-4o-2024-08-06", "1,900", "2", "$0.02", "$8.55", "–"],
    ]


def test_the_deployment_project_and_model_pages_show_the_deployments_api_spend(
    gateway, root_client
):
    for url in (
        reverse("deployment_detail", args=[gateway.ranker.pk]),
        reverse("project_detail", args=[gateway.vision.slug]),
        reverse("model_detail", args=[gateway.ranker.model_id]),
    ):
        html = root_client.get(f"{url}?{JANUARY}").content.decode()
        assert table_rows(html) == [
            ["openai", "gpt-4o-2024-08-06", "1,900", "2", "$0.02", "$8.55", "–"]
        ], url
    other = root_client.get(
        f"{reverse('project_detail', args=[gateway.nlp.slug])}?{JANUARY}"
    ).content.decode()
    assert 'id="model-api"' not in other
