"""The spend sections of the project, model, experiment and deployment pages, from the bill in
conftest.py (figures worked out by hand)."""

from decimal import Decimal

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db
D = Decimal


def get(client, url, **params):
    response = client.get(url, params)
    assert response.status_code == 200, response.status_code
    return response


# -- The project page ------------------------------------------------------------------------------


def test_the_project_page_shows_its_spend_by_workload_and_its_month(member_client, bill):
    context = get(member_client, reverse("project_detail", args=["image-ranking"])).context
    assert context["series"].totals == {
        "training": D("200.00"),
        "inference": D("30.00"),
        "storage": D("5.00"),
    }
    assert context["series"].other_currencies == {"EUR": D("7.00")}
    assert context["summary"].month_to_date == D("185.00")
    assert context["summary"].forecast == D("318.61")  # 185 / 18 * 31, rounded to the cent
    assert [(b.budget, b.status) for b in context["budget"]] == [(D("10000.00"), "on track")]


def test_the_project_page_lists_experiments_with_cost_gpu_hours_and_failed_runs(
    member_client, bill
):
    response = get(member_client, reverse("project_detail", args=["image-ranking"]))
    costs = response.context["experiment_costs"]
    assert [
        (row.name, row.status, row.amount, row.gpu_hours, row.cumulative_share)
        for row in costs.rows
    ] == [
        ("resnet", "succeeded", D("160.00"), 2.5, D("0.8")),
        ("vit", "failed", D("40.00"), None, D("1")),
    ]
    assert costs.rows[0].cost_per_gpu_hour == D("64")  # 160 / 2.5
    assert (costs.runs, costs.total, costs.per_run) == (2, D("200.00"), D("100"))
    assert (costs.failed_runs, costs.failed_total, costs.failed_share) == (1, D("40.00"), D("0.2"))
    page = response.content.decode()
    assert "2 runs cost $200.00, $100.00 per run" in page
    assert "1 failed run cost $40.00</strong> (20%)" in page
    assert '<tr class="failed-run">' in page


def test_the_project_page_shows_deployments_with_cost_per_thousand_requests(member_client, bill):
    rows = get(member_client, reverse("project_detail", args=["image-ranking"])).context[
        "deployment_costs"
    ]
    assert [(r.name, r.amount, r.requests) for r in rows] == [("ranker-prod", D("30.00"), 6000)]
    assert rows[0].cost_per_thousand_requests == D("5")


def test_the_project_page_breaks_spend_down_by_provider_region_service_and_pricing(
    member_client, bill
):
    breakdown = get(member_client, reverse("project_detail", args=["image-ranking"])).context[
        "breakdown"
    ]

    def amounts(name):
        return [(row.label, row.amount) for row in breakdown[name]]

    assert amounts("provider_name") == [("AWS", D("235.00"))]
    assert amounts("region_id") == [("us-east-1", D("195.00")), ("us-west-2", D("40.00"))]
    assert amounts("service_name") == [
        ("Amazon Elastic Compute Cloud", D("190.00")),
        ("Amazon SageMaker", D("30.00")),
        ("Amazon Simple Storage Service", D("15.00")),
    ]
    assert amounts("pricing_category") == [
        ("On-demand", D("165.00")),
        ("Spot", D("40.00")),
        ("Committed", D("30.00")),
    ]


def test_the_project_page_shows_which_experiments_and_deployments_moved(member_client, bill):
    context = get(member_client, reverse("project_detail", args=["image-ranking"])).context
    assert [(c.name, c.change) for c in context["experiment_movers"]] == [
        ("resnet", D("160.00")),
        ("vit", D("-20.00")),
    ]
    assert [(c.name, c.change) for c in context["deployment_movers"]] == [
        ("ranker-prod", D("30.00"))
    ]


def test_the_project_page_filters_by_workload_and_keeps_its_other_content(member_client, bill):
    response = get(
        member_client, reverse("project_detail", args=["image-ranking"]), workload="inference"
    )
    assert response.context["series"].total == D("30.00")
    assert response.context["experiment_costs"].rows == []
    page = response.content.decode()
    assert "Experiments started per month" in page  # the page's own sections stay
    assert "Register experiment" in page


def test_the_project_page_with_no_spend_says_so(member_client, project, organization, frozen):
    page = get(member_client, reverse("project_detail", args=[project.slug])).content.decode()
    assert "No spend in this period: pick a longer range" in page
    assert "No spend attributed to this project's experiments in this period" in page


# -- The model page --------------------------------------------------------------------------------


def test_the_model_page_shows_its_whole_cost_of_ownership(member_client, bill):
    context = get(member_client, reverse("model_detail", args=[bill.ranker.pk])).context
    series = context["series"]
    # All time by default: resnet 100 + 50 (compute), 10 (storage); ranker-prod 30.
    assert context["filters"].period.preset == "all"
    assert series.totals == {
        "training": D("150.00"),
        "inference": D("30.00"),
        "storage": D("10.00"),
    }
    assert series.total == D("190.00")
    assert series.other_currencies == {"EUR": D("7.00")}
    assert series.buckets[0].isoformat() == "2025-02-20"  # from the first day with spend
    assert [(r.name, r.amount) for r in context["experiment_costs"].rows] == [
        ("resnet", D("160.00"))
    ]
    # All time: the hour reported on 1 January counts too.
    assert [(r.name, r.amount, r.requests) for r in context["deployment_costs"]] == [
        ("ranker-prod", D("30.00"), 6999)
    ]
    chart = context["spend_chart"].figure["data"]
    assert [trace["name"] for trace in chart] == ["Training", "Inference", "Storage"]


def test_the_model_page_leaves_out_runs_of_a_project_the_user_cannot_see(member_client, bill):
    # mt-big, of Translation, also produced ranker; the member of Vision must not see its cost.
    bill.mt.model = bill.ranker
    bill.mt.save()
    context = get(member_client, reverse("model_detail", args=[bill.ranker.pk])).context
    assert context["series"].total == D("190.00")


def test_staff_see_every_run_that_produced_a_model(staff_client, bill):
    bill.mt.model = bill.ranker
    bill.mt.save()
    context = get(staff_client, reverse("model_detail", args=[bill.ranker.pk])).context
    assert context["series"].total == D("490.00")  # and mt-big's 280 + 20


# -- The experiment and deployment pages -----------------------------------------------------------


def test_the_experiment_page_shows_its_spend_by_cost_kind_and_gpu_hours(member_client, bill):
    response = get(member_client, reverse("experiment_detail", args=[bill.resnet.pk]))
    context = response.context
    assert context["series"].totals == {"gpu_compute": D("150.00"), "storage": D("10.00")}
    assert context["gpu_hours"] == 2.5
    assert context["cost_per_gpu_hour"] == D("64")
    assert [(row.label, row.amount) for row in context["services"]] == [
        ("Amazon Elastic Compute Cloud", D("150.00")),
        ("Amazon Simple Storage Service", D("10.00")),
    ]
    assert "Loss and other metrics" in response.content.decode()


def test_a_failed_runs_spend_is_marked_as_waste(member_client, bill):
    page = get(member_client, reverse("experiment_detail", args=[bill.vit.pk])).content.decode()
    assert "This run failed: its cost bought no model." in page
    assert '<p class="figure" id="period-total">$100.00</p>' in page


def test_the_deployment_page_shows_cost_per_thousand_requests(member_client, bill):
    response = get(member_client, reverse("deployment_detail", args=[bill.ranker_prod.pk]))
    assert response.context["series"].total == D("30.00")
    assert response.context["deployment_cost"].cost_per_thousand_requests == D("5")
    page = response.content.decode()
    assert '<p class="figure" id="cost-per-thousand">$5.00</p>' in page
    assert "6,000 requests served" in page


def test_a_detail_page_range_in_the_url_narrows_its_spend(member_client, bill):
    context = get(
        member_client,
        reverse("experiment_detail", args=[bill.resnet.pk]),
        start="2025-03-11",
        end="2025-03-31",
    ).context
    assert context["series"].total == D("10.00")
    assert context["gpu_hours"] == 0.0


def test_the_projects_list_shows_each_projects_spend_in_the_period_and_its_budget_status(
    staff_client, member_client, bill
):
    response = staff_client.get(reverse("project_list"))
    rows = {p.name: (p.spend, p.budget_line.status) for p in response.context["projects"]}
    # The last 30 days (19 Feb - 20 Mar); budgets judged on this month so far and its forecast.
    assert rows == {
        "Image ranking": (D("235.00"), "on track"),
        "Translation": (D("280.00"), "heading over"),
    }
    page = response.content.decode()
    assert '<td class="num">$280.00</td>' in page
    assert '<span class="badge budget-heading-over">heading over</span>' in page
    assert "Spend in <strong>last 30 days</strong> (19 Feb – 20 Mar 2025, UTC days)" in page
    week = staff_client.get(reverse("project_list"), {"preset": "7d"}).context["projects"]
    assert {p.name: p.spend for p in week} == {
        "Image ranking": D("5.00"),
        "Translation": D("200.00"),
    }
    # A member sees the team's project alone.
    mine = member_client.get(reverse("project_list")).context["projects"]
    assert [(p.name, p.spend) for p in mine] == [("Image ranking", D("235.00"))]
