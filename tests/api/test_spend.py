"""GET …/spend: a project's, run's, deployment's and model's spend for a period, from the billing
rollup (the figures the pages show)."""

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
import time_machine

from apps.billing.models import CostKind, DailyCost, Delivery
from tests.factories import DeploymentFactory, ExperimentFactory, ModelFactory, ProjectFactory

pytestmark = pytest.mark.django_db
MARCH = {"start": "2025-03-01", "end": "2025-04-01"}


@pytest.fixture
def cost(db):
    delivery = Delivery.objects.create(
        status=Delivery.Status.CURRENT,
        format="focus",
        billing_account_id="111122223333",
        billing_period_start=datetime(2025, 3, 1, tzinfo=UTC),
        billing_period_end=datetime(2025, 4, 1, tzinfo=UTC),
        fingerprint="f" * 64,
    )

    def add(
        day: date, effective: str, billed: str, *, workload="training", currency="USD", **owner
    ):
        project = (
            owner.get("project") or (owner.get("experiment") or owner.get("deployment")).project
        )
        DailyCost.objects.create(
            delivery=delivery,
            day=day,
            project=project,
            experiment=owner.get("experiment"),
            deployment=owner.get("deployment"),
            workload=workload,
            cost_kind=CostKind.GPU_COMPUTE,
            billing_currency=currency,
            effective_cost=Decimal(effective),
            billed_cost=Decimal(billed),
            list_cost=Decimal(billed),
            line_items=1,
        )

    return add


def test_a_projects_spend_sums_its_period_by_currency_and_workload(member_api, project, cost):
    run = ExperimentFactory(project=project, external_id="run-1")
    cost(date(2025, 2, 28), "1000", "1000", experiment=run)  # before the period
    cost(date(2025, 3, 1), "120.125", "100", experiment=run)
    cost(date(2025, 3, 31), "0.0000000001", "0", project=project, workload="storage")
    cost(date(2025, 3, 15), "50", "50", project=project, workload="storage", currency="EUR")
    cost(date(2025, 4, 1), "1000", "1000", experiment=run)  # the first day after it
    cost(date(2025, 3, 2), "999", "999", project=ProjectFactory(team=project.team))
    answer = member_api.get("/projects/image-ranking/spend", **MARCH)
    assert answer.status == 200
    assert answer.body == {
        "start": "2025-03-01",
        "end": "2025-04-01",
        "totals": [
            {"currency": "EUR", "effective_cost": "50", "billed_cost": "50"},
            {"currency": "USD", "effective_cost": "120.1250000001", "billed_cost": "100"},
        ],
        "by_workload": [
            {"workload": "storage", "currency": "EUR", "effective_cost": "50", "billed_cost": "50"},
            {
                "workload": "storage",
                "currency": "USD",
                "effective_cost": "0.0000000001",
                "billed_cost": "0",
            },
            {
                "workload": "training",
                "currency": "USD",
                "effective_cost": "120.125",
                "billed_cost": "100",
            },
        ],
    }


def test_a_runs_and_a_deployments_spend_are_their_own(member_api, project, cost):
    run = ExperimentFactory(project=project, external_id="run-1")
    other_run = ExperimentFactory(project=project, external_id="run-2")
    serving = DeploymentFactory(project=project, external_id="serving")
    cost(date(2025, 3, 3), "10.5", "10", experiment=run)
    cost(date(2025, 3, 4), "7", "7", experiment=other_run)
    cost(date(2025, 3, 5), "3.25", "3", deployment=serving, workload="inference")
    run_spend = member_api.get("/projects/image-ranking/experiments/run-1/spend", **MARCH)
    serving_spend = member_api.get("/projects/image-ranking/deployments/serving/spend", **MARCH)
    assert run_spend.body["totals"] == [
        {"currency": "USD", "effective_cost": "10.5", "billed_cost": "10"}
    ]
    assert serving_spend.body["by_workload"] == [
        {"workload": "inference", "currency": "USD", "effective_cost": "3.25", "billed_cost": "3"}
    ]


def test_a_models_spend_is_its_runs_and_its_deployments(member_api, project, other_team, cost):
    model = ModelFactory(project=project, external_id="ranker")
    cost(date(2025, 3, 3), "100", "100", experiment=ExperimentFactory(project=project, model=model))
    cost(
        date(2025, 3, 4),
        "40",
        "40",
        deployment=DeploymentFactory(project=project, model=model),
        workload="inference",
    )
    cost(date(2025, 3, 4), "5", "5", experiment=ExperimentFactory(project=project))
    # A run of a project the member cannot see produced it too: not the member's to know.
    hidden = ProjectFactory(team=other_team)
    cost(
        date(2025, 3, 5), "1000", "1000", experiment=ExperimentFactory(project=hidden, model=model)
    )
    answer = member_api.get("/projects/image-ranking/models/ranker/spend", **MARCH)
    assert answer.body["totals"] == [
        {"currency": "USD", "effective_cost": "140", "billed_cost": "140"}
    ]
    assert [(w["workload"], w["effective_cost"]) for w in answer.body["by_workload"]] == [
        ("inference", "40"),
        ("training", "100"),
    ]


def test_no_spend_in_the_period_is_empty_not_an_error(member_api, project):
    answer = member_api.get("/projects/image-ranking/spend", **MARCH)
    assert (answer.status, answer.body["totals"], answer.body["by_workload"]) == (200, [], [])


@time_machine.travel(datetime(2025, 3, 20, 23, 30, tzinfo=UTC), tick=False)
def test_without_a_period_it_is_this_month_so_far(member_api, project, cost):
    cost(date(2025, 2, 28), "1", "1", project=project)
    cost(date(2025, 3, 20), "2", "2", project=project)
    answer = member_api.get("/projects/image-ranking/spend")
    assert (answer.body["start"], answer.body["end"]) == ("2025-03-01", "2025-03-21")
    assert answer.body["totals"][0]["effective_cost"] == "2"


def test_a_period_must_not_run_backwards(member_api, project):
    backwards = member_api.get(
        "/projects/image-ranking/spend", start="2025-03-02", end="2025-03-01"
    )
    assert backwards.body["errors"] == {"end": ["The end must be after the start."]}
    bad = member_api.get("/projects/image-ranking/spend", start="March", end="1900-01-01")
    assert bad.status == 400
    assert bad.body["errors"] == {
        "start": ["Input should be a valid date or datetime, input is too short"],
        "end": ["Give a day between the years 2000 and 2100."],
    }


def test_an_outsider_gets_404_for_spend(outsider_api, project, cost):
    ExperimentFactory(project=project, external_id="run-1")
    DeploymentFactory(project=project, external_id="serving")
    ModelFactory(project=project, external_id="ranker")
    paths = [
        "/projects/image-ranking/spend",
        "/projects/image-ranking/experiments/run-1/spend",
        "/projects/image-ranking/deployments/serving/spend",
        "/projects/image-ranking/models/ranker/spend",
    ]
    assert [outsider_api.get(path, **MARCH).status for path in paths] == [404] * 4
