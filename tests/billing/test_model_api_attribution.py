"""Model API spend is attributed like any other: a key registered as a deployment's resource
claims its requests (and, registered later, re-attributes the history, rollups included); a
team or workspace goes through the allocation rules; an unmapped key is unattributed spend,
listed by its resource id so that it can be claimed."""

from decimal import Decimal

import pytest

from apps.billing.models import CostLineItem, DailyModelApiCost, DailyResourceCost
from apps.billing.services import attribution_refresh
from apps.deployments.models import DeploymentResource
from apps.projects.models import AllocationRule

from .conftest import run_import
from .formats import api_pages as pages

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

KEY = pages.litellm_rows()[0]["api_key"]


def untagged_rows():
    rows = pages.litellm_rows()
    for row in rows:
        row["request_tags"] = "[]"
    return rows


def test_an_unmapped_key_is_unattributed_spend_listed_by_its_key(acme, tmp_path):
    run_import(pages.write_litellm_csv(tmp_path / "spend.csv", untagged_rows()))
    assert list(
        DailyResourceCost.objects.filter(project=None)
        .order_by("day")
        .values_list("resource_id", "cost_kind", "workload", "effective_cost")
    ) == [
        (KEY, "model_api", "unattributed", Decimal("0.0125")),
        (KEY, "model_api", "unattributed", Decimal("0.00375")),
    ]


def test_registering_the_key_to_a_deployment_re_attributes_its_history(acme, tmp_path):
    run_import(pages.write_litellm_csv(tmp_path / "spend.csv", untagged_rows()))
    DeploymentResource.objects.create(deployment=acme.ranker, resource_id=KEY)

    assert attribution_refresh(resource_ids=[KEY]) == 2

    assert set(CostLineItem.objects.values_list("deployment_id", "project_id", "workload")) == {
        (acme.ranker.pk, acme.vision.pk, "inference")
    }
    assert list(
        DailyModelApiCost.objects.order_by("day").values_list(
            "deployment_id", "model", "tokens", "requests", "effective_cost"
        )
    ) == [
        (acme.ranker.pk, "gpt-4o-2024-08-06", Decimal(1500), Decimal(1), Decimal("0.0125")),
        (acme.ranker.pk, "gpt-4o-2024-08-06", Decimal(400), Decimal(1), Decimal("0.00375")),
    ]


def test_a_rule_on_the_team_claims_its_requests_as_inference(acme, tmp_path):
    AllocationRule.objects.create(
        name="Search team's gateway spend",
        field=AllocationRule.Field.SUB_ACCOUNT,
        pattern="team-search",
        project=acme.search,
    )
    run_import(pages.write_litellm_csv(tmp_path / "spend.csv", untagged_rows()))
    assert set(CostLineItem.objects.values_list("project_id", "workload", "attributed_by")) == {
        (acme.search.pk, "inference", "rule")
    }
