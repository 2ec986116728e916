"""The overview (home): every figure of the bill in conftest.py, worked out by hand."""

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from django.urls import reverse

from tests.factories import ExperimentFactory, ModelFactory

from .conftest import BUCKET, rollup

pytestmark = pytest.mark.django_db
D = Decimal


def overview(client, **params):
    response = client.get(reverse("home"), params)
    assert response.status_code == 200
    return response


def test_spend_over_the_last_30_days_is_stacked_by_workload(staff_client, bill):
    context = overview(staff_client).context
    series = context["series"]
    assert series.bucket == "day"
    assert series.buckets[0] == date(2025, 2, 19) and series.buckets[-1] == date(2025, 3, 20)
    assert len(series.buckets) == 30
    assert series.totals == {
        "training": D("200.00"),
        "fine_tuning": D("280.00"),
        "inference": D("30.00"),
        "storage": D("5.00"),
        "unattributed": D("20.00"),
    }
    assert series.total == D("535.00")
    assert series.other_currencies == {"EUR": D("7.00")}
    assert series.attributed_share == D("515") / D("535")
    # The chart: one trace per workload in the workloads' order, a bar per day.
    data = context["spend_chart"].figure["data"]
    assert [trace["name"] for trace in data] == [
        "Training",
        "Fine-tuning",
        "Inference",
        "Storage",
        "Unattributed",
    ]
    training = data[0]
    by_day = dict(zip(training["x"], training["y"], strict=True))
    assert by_day["2025-02-20"] == 50.0
    assert by_day["2025-03-10"] == 100.0
    assert by_day["2025-03-11"] == 10.0
    assert by_day["2025-03-12"] == 40.0
    assert sum(training["y"]) == 200.0
    assert data[0]["marker"]["color"] == "#1f77b4"  # the training colour, everywhere


def test_other_currencies_are_shown_apart_and_never_added(staff_client, bill):
    page = overview(staff_client).content.decode()
    assert "Also billed in other currencies, not added to the figures above" in page
    assert "<strong>€7.00</strong>" in page
    assert '<p class="figure" id="period-total">$535.00</p>' in page


def test_month_to_date_compares_with_the_same_days_of_last_month_and_forecasts_the_end(
    staff_client, bill
):
    summary = overview(staff_client).context["summary"]
    # Billed up to 19 March 00:00: 18 days of March.
    assert summary.elapsed_days == 18
    assert summary.month_to_date == D("405.00")  # rows 1-7
    assert summary.last_month_same_days == D("84.00")  # rows 11, 12, 13: 1-18 February
    assert summary.last_month_total == D("214.00")  # and rows 9, 10
    assert summary.forecast == D("697.50")  # 405 / 18 * 31
    assert summary.change == (D("405") - D("84")) / D("84")


def test_until_seven_days_are_loaded_the_forecast_is_last_months_total_and_says_so(
    staff_client, bill
):
    import time_machine

    from apps.billing.models import Delivery

    # The 3rd of March, the bill loaded up to 2 March 00:00: one day of March.
    Delivery.objects.update(max_usage_period_end=datetime(2025, 3, 2, tzinfo=UTC))
    with time_machine.travel(datetime(2025, 3, 3, 8, tzinfo=UTC), tick=False):
        response = overview(staff_client)
    summary = response.context["summary"]
    assert summary.elapsed_days == 1
    assert summary.forecast_is_last_month is True
    assert summary.forecast == summary.last_month_total == D("214.00")  # not one day x 31
    page = response.content.decode()
    assert '<p class="figure" id="forecast">$214.00</p>' in page
    assert "last month's total: fewer than 7 days of this month are loaded" in page
    # Budgets compare last month's spend too: nothing reads as on track on one day's data.
    assert [(b.project.name, b.forecast, b.status) for b in response.context["budgets"]] == [
        ("Translation", D("100.00"), "on track"),  # February's 100 against a budget of 300
        ("Image ranking", D("110.00"), "on track"),
    ]


def test_budgets_list_the_projects_heading_over_them_first(staff_client, bill):
    budgets = overview(staff_client).context["budgets"]
    assert [
        (line.project.name, line.month_to_date, line.forecast, line.status) for line in budgets
    ] == [
        ("Translation", D("200.00"), D("344.44"), "heading over"),  # 200 / 18 * 31, budget 300
        ("Image ranking", D("185.00"), D("318.61"), "on track"),  # budget 10,000
    ]


def test_the_pareto_of_projects_and_of_models_says_who_drives_the_spend(staff_client, bill):
    context = overview(staff_client).context
    projects = context["projects"]
    assert [(item.name, item.amount) for item in projects.items] == [
        ("Translation", D("280.00")),
        ("Image ranking", D("235.00")),
    ]
    assert projects.items[0].cumulative_share == D("280") / D("515")
    # Both projects are needed to reach 80%: the headline says what the largest is instead.
    assert projects.headline == "Translation is the largest, 54% of the spend"  # 280 / 515
    chart = context["projects_chart"].figure["data"]
    assert chart[0]["x"] == ["Translation", "Image ranking"]
    assert chart[0]["y"] == [280.0, 235.0]
    assert chart[1]["y"] == [54.4, 100.0]  # the cumulative share, in percent
    models = context["models"]
    # ranker: resnet 160 and ranker-prod 30; mt: mt-big 280.
    assert [(item.name, item.amount) for item in models.items] == [
        ("mt", D("280.00")),
        ("ranker", D("190.00")),
    ]
    assert models.headline == "mt is the largest, 59% of the spend"  # 280 / 470


def test_a_pareto_headline_names_a_few_only_when_a_few_drive_the_spend():
    from apps.spend.changes import pareto

    def headline(*amounts):
        items = [(n, f"p{n}", D(a), "") for n, a in enumerate(amounts)]
        return pareto(noun="projects", amounts=items).headline

    assert headline("90", "5", "3", "2") == "1 of 4 projects are 90% of the spend"
    assert headline("50", "40", "10") == "2 of 3 projects are 90% of the spend"
    assert headline("34", "33", "33") == "p0 is the largest, 34% of the spend"  # not "3 of 3"
    assert headline("12.50") == "p0 is all of the spend"


def test_top_movers_compare_with_the_period_before(staff_client, bill):
    context = overview(staff_client).context
    assert [(c.name, c.previous, c.current) for c in context["project_movers"]] == [
        ("Translation", D("20.00"), D("280.00")),
        ("Image ranking", D("60.00"), D("235.00")),
    ]
    assert [(c.name, c.previous, c.current, c.change) for c in context["experiment_movers"]] == [
        ("mt-big", D("20.00"), D("280.00"), D("260.00")),
        ("resnet", D("0"), D("160.00"), D("160.00")),
        ("vit", D("60.00"), D("40.00"), D("-20.00")),
    ]
    assert [(c.name, c.change) for c in context["deployment_movers"]] == [
        ("ranker-prod", D("30.00"))
    ]


def test_the_movers_are_the_largest_changes_and_a_tie_keeps_the_older_runs(staff_client, bill):
    # Seven more runs of a new model, each 300.00 up from nothing: more than mt-big's 260.00. The
    # page shows five runs; of seven equal changes the five oldest, then in the order of names.
    big = ModelFactory(project=bill.vision_project, name="big")
    for letter in "gfedcba":  # created last to first by name
        run = ExperimentFactory(project=bill.vision_project, name=f"run-{letter}", model=big)
        rollup(bill.march, date(2025, 3, 10), "300.00", project=bill.vision_project, experiment=run)

    context = overview(staff_client).context

    assert [(c.name, c.change) for c in context["experiment_movers"]] == [
        (f"run-{letter}", D("300.00")) for letter in "cdefg"
    ]
    assert [(item.name, item.amount) for item in context["models"].items] == [
        ("big", D("2100.00")),
        ("mt", D("280.00")),
        ("ranker", D("190.00")),
    ]


def test_the_biggest_unattributed_resources_and_the_attributed_share(staff_client, bill):
    response = overview(staff_client)
    assert [(r.resource_id, r.amount) for r in response.context["unattributed"]] == [
        ("i-orphan", D("15.00")),
        (BUCKET, D("5.00")),
    ]
    page = response.content.decode()
    assert '<span id="attributed-share">96.3%</span> attributed' in page  # 515 / 535


def test_the_bill_reads_as_loaded_up_to_its_oldest_accounts_data(staff_client, bill):
    response = overview(staff_client)
    page = response.content.decode()
    # AWS is loaded up to 19 March, Google Cloud to 16 March: the figures are whole up to the 16th.
    assert 'bill loaded up to <span class="data-as-of">16 Mar 2025 00:00</span>' in page
    assert "(account <code>gcp-1</code>, the furthest behind of 2" in page
    assert response.context["data_as_of"] == datetime(2025, 3, 19, tzinfo=UTC)  # the run rate's


def test_a_member_sees_the_teams_projects_and_no_unattributed_spend(member_client, bill):
    response = overview(member_client)
    context = response.context
    assert context["series"].totals == {
        "training": D("200.00"),
        "inference": D("30.00"),
        "storage": D("5.00"),
    }
    assert [item.name for item in context["projects"].items] == ["Image ranking"]
    assert [item.name for item in context["models"].items] == ["ranker"]
    assert [c.name for c in context["experiment_movers"]] == ["resnet", "vit"]
    assert context["unattributed"] == []
    page = response.content.decode()
    assert "Translation" not in page and "mt-big" not in page
    assert "Biggest unattributed resources" not in page
    assert reverse("unattributed") not in page


def test_a_leads_headline_is_the_teams_spend_with_unattributed_spend_apart(
    lead_client, member_client, bill
):
    response = overview(lead_client)
    context = response.context
    # The same headline as the team's member: Image ranking's 235, not the organisation's 20
    # unattributed on top.
    assert context["series"].total == D("235.00")
    assert context["series"].total == overview(member_client).context["series"].total
    assert context["series"].unattributed == D("0")
    assert context["summary"].month_to_date == D("185.00")
    # Unattributed spend is shown apart, as what the lead may claim.
    assert context["claimable"].amount == D("20.00")
    assert [r.resource_id for r in context["unattributed"]] == ["i-orphan", BUCKET]
    page = response.content.decode()
    assert '<p class="figure" id="period-total">$235.00</p>' in page
    assert (
        f'<a href="{reverse("unattributed")}">$20.00 unattributed</a>, not in this figure, '
        "is yours to claim"
    ) in page
    assert 'id="attributed-share"' not in page


def test_an_outsider_sees_only_the_other_teams_projects(outsider_client, bill):
    context = overview(outsider_client).context
    # The outsider leads Language: Translation, and unattributed spend.
    assert context["series"].totals == {"fine_tuning": D("280.00")}
    assert context["claimable"].amount == D("20.00")
    assert [b.project.name for b in context["budgets"]] == ["Translation"]
    page = overview(outsider_client).content.decode()
    assert "Image ranking" not in page and "resnet" not in page


def test_a_team_filter_narrows_every_figure_and_leaves_unattributed_out(staff_client, bill):
    context = overview(staff_client, team="vision").context
    assert context["series"].total == D("235.00")
    assert context["summary"].month_to_date == D("185.00")
    assert [b.project.name for b in context["budgets"]] == ["Image ranking"]
    assert context["unattributed"] == []


def test_a_workload_and_a_provider_filter_narrow_the_figures(staff_client, bill):
    assert overview(staff_client, workload="inference").context["series"].total == D("30.00")
    context = overview(staff_client, provider="Google Cloud").context
    assert context["series"].totals == {"fine_tuning": D("280.00")}
    assert [item.name for item in context["projects"].items] == ["Translation"]


def test_a_filter_on_another_teams_project_is_refused_with_a_message(member_client, bill):
    response = overview(member_client, project="translation")
    page = response.content.decode()
    assert "Project: Choose one of the projects you can see." in page
    assert response.context["series"].total == D("235.00")


def test_the_date_range_presets_change_the_figures(staff_client, bill):
    week = overview(staff_client, preset="7d").context
    # 14-20 March: rows 5, 6, 7.
    assert week["series"].total == D("225.00")
    assert len(week["series"].buckets) == 7
    last_month = overview(staff_client, preset="last-month").context
    assert last_month["series"].total == D("214.00")
    year = overview(staff_client, preset="12m").context["series"]
    assert year.bucket == "month"
    assert year.buckets[0] == date(2024, 4, 1) and year.buckets[-1] == date(2025, 3, 1)
    assert year.values["training"][-2:] == [D("110.00"), D("150.00")]  # 50+60; 100+10+40


def test_with_no_bill_every_chart_and_table_says_so(member_client, project, organization, frozen):
    page = overview(member_client).content.decode()
    assert "No spend in this period: pick a longer range, clear a filter, or import a bill" in page
    assert 'id="project-pareto-empty">No projects with spend in this period.' in page
    assert 'id="model-pareto-empty">No models with spend in this period.' in page
    assert "no bill loaded yet" in page
    assert "Nothing changed against the period before" in page
