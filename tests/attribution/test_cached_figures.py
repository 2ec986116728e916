"""The spend figures are cached per data version and never stale: each kind of change that moves
spend (an import, a replacement, a re-attribution, a claim, a registration with resources, an
allocation rule) shows on the next page load after a load that cached the figures before it. So
does each on the project page, whose spend section and list of runs are cached whole, as HTML."""

import json
import re
from datetime import date, timedelta
from decimal import Decimal as D

import pytest
from django.core.cache import cache
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from time_machine import travel

from apps.billing.models import DailyCost, MonthlyCost, MonthlyResourceCost
from apps.billing.services import attribution_refresh, import_run_create, import_run_execute
from apps.experiments.services import experiment_register
from apps.projects.models import AllocationRule
from apps.projects.services import (
    ResourceWindow,
    allocation_rule_create,
    resource_windows_replace,
)
from apps.spend.figures import versions_read

from .conftest import NOW, at, write_bill

pytestmark = pytest.mark.django_db(transaction=False, databases=["default", "progress"])


def line(day: str, resource: str, amount: str, tags: str = "", month: str = "03") -> dict:
    return {
        "ChargePeriodStart": f"2025-{month}-{day}T10:00:00Z",
        "ChargePeriodEnd": f"2025-{month}-{day}T11:00:00Z",
        "BilledCost": amount,
        "EffectiveCost": amount,
        "ResourceId": resource,
        "Tags": tags,
    }


TRAIN = '{"project": "image-ranking"}'
MARCH = [
    line("10", "i-train", "12.50", TRAIN),
    line("11", "i-stray", "7.25"),
    line("12", "i-stray", "2.75"),
    line("12", "i-other", "1.00"),
]


def load(path) -> None:
    run = import_run_execute(import_run=import_run_create(paths=[str(path)]))
    assert run.status == "succeeded", run.error


def load_february(tmp_path) -> None:
    """A February delivery of 3.00 tagged to Image ranking (on the 25th)."""
    february = tmp_path / "february.csv"
    write_bill(february, [line("25", "i-train", "3.00", TRAIN, month="02")])
    text = february.read_text().replace("2025-03-01T00:00:00Z", "2025-02-01T00:00:00Z")
    february.write_text(text.replace("2025-04-01T00:00:00Z", "2025-03-01T00:00:00Z"))
    load(february)


@pytest.fixture
def imported(organization, frozen, project, tmp_path, django_capture_on_commit_callbacks):
    """Image ranking's 12.50 tagged line, 10.00 on i-stray and 1.00 on i-other unattributed."""
    with django_capture_on_commit_callbacks(execute=True):
        load(write_bill(tmp_path / "march.csv", MARCH))
    return project


def spend(client) -> dict[str, D]:
    """The overview's projects by spend in the last 30 days, and what nobody claims, as the page
    shows them (its figures are cached as HTML: a load served from the cache has no context)."""
    page = client.get(reverse("home")).content.decode()
    script = re.search(r'<script id="project-pareto" [^>]*>(.*?)</script>', page).group(1)
    chart = json.loads(script)
    bars = chart["data"][0]
    # The chart's amounts are the cents as numbers: their shortest text is the exact amount.
    projects = {name: D(str(amount)) for name, amount in zip(bars["x"], bars["y"], strict=True)}
    unattributed = re.search(r"· \$([\d,.]+) unattributed</p>", page).group(1)
    return {**projects, "unattributed": D(unattributed.replace(",", ""))}


BEFORE = {"Image ranking": D("12.50"), "unattributed": D("11.00")}


def project_page(client, query: str = "") -> str:
    response = client.get(reverse("project_detail", args=["image-ranking"]) + query)
    assert response.status_code == 200
    return response.content.decode()


def project_total(client) -> str:
    """The project page's "spend in this period", as shown."""
    return re.search(r'id="period-total">([^<]*)<', project_page(client)).group(1)


def test_a_second_load_reads_the_figures_from_the_cache(staff_client, imported):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert staff_client.get(reverse("home")).status_code == 200
        return len(captured)

    cold, warm = queries(), queries()
    # The overview's figures (its grouped queries over the rollups, its findings section) are
    # cached as the HTML they make, keyed by the data version and by how fresh the bill is (read
    # twice: for the key and for the filters' line). Warm, what is read is the organisation, the
    # session, the user, the filter menus (providers, teams, projects), how fresh the bill is and
    # whether it lags (deliveries, imports, sources) and the data version: 11 queries. Cold, the
    # unattributed list is two queries: ranked, then its resources named; counted once is three:
    # the findings' days wasted alone, their share groups' days, and the groups only some of the
    # findings hold (none here: no fourth). The findings section reads in a transaction of its
    # own whose sums are planned without parallel workers: inside the test's transaction a
    # savepoint, the setting, its reset and the release (4; outside one, BEGIN, SET and COMMIT).
    assert (cold, warm) == (29, 11)


def test_an_import_shows_on_the_next_load(
    staff_client, imported, tmp_path, django_capture_on_commit_callbacks
):
    assert spend(staff_client) == BEFORE
    assert project_total(staff_client) == "$12.50"
    with django_capture_on_commit_callbacks(execute=True):
        load_february(tmp_path)
    assert spend(staff_client) == {"Image ranking": D("15.50"), "unattributed": D("11.00")}
    assert project_total(staff_client) == "$15.50"


def test_a_replaced_delivery_shows_on_the_next_load(
    staff_client, imported, tmp_path, django_capture_on_commit_callbacks
):
    assert spend(staff_client) == BEFORE
    assert project_total(staff_client) == "$12.50"
    march = [line("10", "i-train", "20.00", TRAIN), *MARCH[1:]]
    with django_capture_on_commit_callbacks(execute=True):
        load(write_bill(tmp_path / "march-again.csv", march))
    assert spend(staff_client) == {"Image ranking": D("20.00"), "unattributed": D("11.00")}
    assert project_total(staff_client) == "$20.00"


def test_a_reattribution_shows_on_the_next_load(
    staff_client, imported, django_capture_on_commit_callbacks
):
    assert spend(staff_client) == BEFORE
    assert project_total(staff_client) == "$12.50"
    # A rule written behind the services' back moves nothing until the history is re-attributed.
    AllocationRule.objects.create(
        name="other", field=AllocationRule.Field.RESOURCE, pattern="i-other", project=imported
    )
    assert spend(staff_client) == BEFORE
    with django_capture_on_commit_callbacks(execute=True):
        assert attribution_refresh() == 1
    assert spend(staff_client) == {"Image ranking": D("13.50"), "unattributed": D("10.00")}
    assert project_total(staff_client) == "$13.50"


def test_a_claim_shows_on_the_next_load(
    lead_client, staff_client, imported, eager_celery, django_capture_on_commit_callbacks
):
    assert spend(staff_client) == BEFORE
    assert project_total(staff_client) == "$12.50"
    with django_capture_on_commit_callbacks(execute=True):
        response = lead_client.post(
            reverse("unattributed_claim"),
            {"resource_id": "i-stray", "target": f"project:{imported.pk}"},
        )
    assert response.status_code == 302
    assert spend(staff_client) == {"Image ranking": D("22.50"), "unattributed": D("1.00")}
    assert project_total(staff_client) == "$22.50"


def test_a_registration_with_resources_shows_on_the_next_load(
    staff_client, imported, eager_celery, django_capture_on_commit_callbacks
):
    assert spend(staff_client) == BEFORE
    assert project_total(staff_client) == "$12.50"
    with django_capture_on_commit_callbacks(execute=True):
        experiment_register(
            project=imported,
            external_id="stray-run",
            changes={"name": "stray-run", "status": "running"},
            resources=[
                ResourceWindow(
                    "i-stray",
                    started_at=at("2025-03-11T00:00:00"),
                    ended_at=at("2025-03-13T00:00:00"),
                )
            ],
        )
    assert spend(staff_client) == {"Image ranking": D("22.50"), "unattributed": D("1.00")}
    assert project_total(staff_client) == "$22.50"


def test_an_allocation_rule_shows_on_the_next_load(
    staff_client, imported, eager_celery, django_capture_on_commit_callbacks
):
    assert spend(staff_client) == BEFORE
    assert project_total(staff_client) == "$12.50"
    with django_capture_on_commit_callbacks(execute=True):
        allocation_rule_create(
            name="other",
            field=AllocationRule.Field.RESOURCE,
            pattern="i-other",
            priority=100,
            project=imported,
        )
    assert spend(staff_client) == {"Image ranking": D("13.50"), "unattributed": D("10.00")}
    assert project_total(staff_client) == "$13.50"


def test_a_renamed_project_shows_on_the_next_load(
    staff_client, imported, django_capture_on_commit_callbacks
):
    assert spend(staff_client) == BEFORE
    with django_capture_on_commit_callbacks(execute=True):
        imported.name = "Image ranking v2"
        imported.save()
    assert spend(staff_client) == {"Image ranking v2": D("12.50"), "unattributed": D("11.00")}


def test_an_announced_change_moves_the_version_in_its_transaction(imported):
    before = versions_read().data
    imported.save()
    after = versions_read().data
    assert after != before
    cache.clear()  # the version lives in the database: emptying the cache does not move it
    assert versions_read().data == after


def test_the_version_others_read_moves_only_when_the_change_commits(imported):
    from django.db import connections

    def seen_by_another_connection() -> int:
        with connections["progress"].cursor() as cursor:
            cursor.execute("SELECT value FROM spend_spenddataversion WHERE id = 1")
            row = cursor.fetchone()
        return row[0] if row else 0

    before = seen_by_another_connection()
    imported.save()  # inside the test's transaction, not committed
    assert seen_by_another_connection() == before


def test_a_write_to_the_rollups_no_port_announces_moves_the_version_at_once(imported):
    before = versions_read().data
    DailyCost.objects.filter(project=None).update(project=imported)
    assert versions_read().data != before


def test_a_repair_of_the_resource_months_alone_moves_the_version_at_once(imported):
    before = versions_read().data
    MonthlyResourceCost.objects.filter(project=None).update(project=imported)
    assert versions_read().data != before


def test_a_rollup_written_behind_the_ports_back_shows_on_the_next_load(staff_client, imported):
    assert spend(staff_client) == BEFORE
    # A repair of both rollups by hand (the pages read whole months from the monthly one).
    DailyCost.objects.filter(project=None).update(project=imported)
    MonthlyCost.objects.filter(project=None).update(project=imported)
    # The rows keep their workload, so the chart still calls 11.00 unattributed.
    assert spend(staff_client) == {"Image ranking": D("23.50"), "unattributed": D("11.00")}


def test_a_figure_is_cached_per_period(staff_client, imported):
    assert spend(staff_client) == BEFORE
    context = staff_client.get(reverse("home") + "?start=2025-03-11&end=2025-03-11").context
    assert context["series"].unattributed == D("7.25")
    assert date(2025, 3, 11) == context["filters"].period.start


def test_the_project_page_again_is_its_cached_html(staff_client, imported):
    def load() -> tuple[str, int]:
        with CaptureQueriesContext(connection) as captured:
            page = project_page(staff_client)
        return page, len(captured)

    (cold, cold_queries), (warm, warm_queries) = load(), load()

    # Its spend section and its runs, models and deployments come from the cache as HTML (not
    # escaped); the session, the user, the organisation, the project, how fresh the bill is, the
    # data version, whether the user may edit it and its alerts are still read (eight queries).
    def cached_parts(page: str) -> str:
        return page[page.index('<div id="spend" class="spend">') : page.index("</main>")]

    assert '<section id="experiments" aria-labelledby="experiments-title">' in cached_parts(warm)
    assert cached_parts(warm) == cached_parts(cold)
    # Cold, 4 of them are the findings section's transaction (see the overview's test).
    assert (cold_queries, warm_queries) == (35, 8)


def test_a_run_registered_shows_in_the_project_pages_runs(staff_client, imported):
    assert "first-light" not in project_page(staff_client)
    experiment_register(
        project=imported, external_id="first-light", changes={"name": "first-light"}
    )
    page = project_page(staff_client)
    assert '<a href="/experiments/' in page
    assert "first-light" in page


def test_an_import_leaves_the_project_pages_runs_cached(
    staff_client, imported, tmp_path, django_capture_on_commit_callbacks
):
    # The runs, models and deployments show no spend: keyed by the joined version alone, they
    # are not read again after an import, while the spend section shows the new bill.
    experiment_register(project=imported, external_id="run-1", changes={"name": "run-1"})
    assert project_total(staff_client) == "$12.50"
    with django_capture_on_commit_callbacks(execute=True):
        load_february(tmp_path)

    with CaptureQueriesContext(connection) as captured:
        page = project_page(staff_client)
    assert re.search(r'id="period-total">([^<]*)<', page).group(1) == "$15.50"
    assert "run-1" in page
    runs_read = [query for query in captured if '"resource_count"' in query["sql"]]
    assert runs_read == []


def test_an_import_leaves_the_names_of_what_spent_cached(
    staff_client, imported, tmp_path, django_capture_on_commit_callbacks
):
    # Names live in the joined tables alone: keyed by the joined version, they are not read
    # again after an import, while the figures around them are computed afresh.
    names_read = re.compile(r'^SELECT "projects_project"."id" AS "pk", "projects_project"."name"')

    def overview() -> tuple[dict, int]:
        with CaptureQueriesContext(connection) as captured:
            shown = spend(staff_client)
        return shown, sum(bool(names_read.match(query["sql"])) for query in captured)

    assert overview() == (BEFORE, 1)
    with django_capture_on_commit_callbacks(execute=True):
        load_february(tmp_path)
    assert overview() == ({"Image ranking": D("15.50"), "unattributed": D("11.00")}, 0)
    with django_capture_on_commit_callbacks(execute=True):
        imported.name = "Image ranking v2"
        imported.save()
    assert overview() == ({"Image ranking v2": D("15.50"), "unattributed": D("11.00")}, 1)


def test_resources_registered_in_bulk_show_in_the_project_pages_runs(staff_client, imported):
    # A script's usage windows are written with bulk_create, which sends no signal: the
    # ownership_changed port they announce moves the joined version the runs are cached by.
    run = experiment_register(
        project=imported, external_id="run-1", changes={"name": "run-1"}
    ).experiment

    def resources_shown() -> str:
        page = project_page(staff_client)
        row = re.search(r"run-1</a></th>.*?</tr>", page, re.S).group(0)
        return re.search(r'<td class="num hide-sm">(\d+)</td>', row).group(1)

    assert resources_shown() == "0"
    windows = [ResourceWindow("i-stray", started_at=at("2025-03-11T00:00:00"))]
    with transaction.atomic():
        resource_windows_replace(uses=run.resources, windows=windows)
    assert resources_shown() == "1"


def test_the_project_page_moves_with_the_day(staff_client, imported):
    """The presets' periods are the UTC day's: a cached section is not shown the next day."""

    def period(page: str) -> str:
        return re.search(r"<strong>Last 7 days</strong> · ([^(]*) \(UTC days\)", page).group(1)

    assert period(project_page(staff_client, "?preset=7d")) == "14 Mar 2025 – 20 Mar 2025"
    with travel(NOW + timedelta(days=1), tick=False):
        assert period(project_page(staff_client, "?preset=7d")) == "15 Mar 2025 – 21 Mar 2025"


def test_the_project_pages_filters_are_cached_apart(staff_client, imported):
    assert project_total(staff_client) == "$12.50"
    page = project_page(staff_client, "?start=2025-03-11&end=2025-03-11")
    assert re.search(r'id="period-total">([^<]*)<', page).group(1) == "$0.00"


def test_traffic_recorded_moves_the_version_at_once(imported):
    """The project and model pages' cached parts show a deployment's requests; traffic is
    recorded without a port (the API, a pull), so its writes move the version as the rollups'."""
    from apps.deployments.models import TrafficHour
    from tests.factories import DeploymentFactory, ModelFactory

    deployment = DeploymentFactory(model=ModelFactory(project=imported))
    before = versions_read().data
    TrafficHour.objects.create(
        deployment=deployment, hour=at("2025-03-12T10:00:00"), requests=1200, updated_at=NOW
    )
    assert versions_read().data != before


def test_a_runs_spend_and_its_failure_show_on_its_page_on_the_next_load(
    staff_client, imported, eager_celery, django_capture_on_commit_callbacks
):
    # The experiment page's spend section is cached as HTML per data version: a registration
    # (its resources' spend) and a change of status (a failed run's spend is waste) move it.
    def run_page() -> str:
        response = staff_client.get(reverse("experiment_detail", args=[run.pk]))
        assert response.status_code == 200
        return response.content.decode()

    def shown(page: str) -> tuple[str, bool]:
        total = re.search(r'id="period-total">([^<]*)<', page).group(1)
        return total, "This run failed: its cost bought no model." in page

    run = experiment_register(
        project=imported, external_id="stray-run", changes={"name": "stray-run"}
    ).experiment
    assert shown(run_page()) == ("$0.00", False)
    with django_capture_on_commit_callbacks(execute=True):
        experiment_register(
            project=imported,
            external_id="stray-run",
            changes={"status": "running"},
            resources=[
                ResourceWindow(
                    "i-stray",
                    started_at=at("2025-03-11T00:00:00"),
                    ended_at=at("2025-03-13T00:00:00"),
                )
            ],
        )
    assert shown(run_page()) == ("$10.00", False)
    with django_capture_on_commit_callbacks(execute=True):
        experiment_register(project=imported, external_id="stray-run", changes={"status": "failed"})
    assert shown(run_page()) == ("$10.00", True)


def test_a_deployments_traffic_shows_on_its_page_on_the_next_load(staff_client, imported):
    # The deployment page's traffic is cached as HTML per data version: traffic written (the
    # API, a pull) moves it, and a load with nothing changed reads no traffic hours.
    from apps.deployments.models import TrafficHour
    from tests.factories import DeploymentFactory

    deployment = DeploymentFactory(project=imported)

    def deployment_page() -> tuple[str, int]:
        with CaptureQueriesContext(connection) as captured:
            response = staff_client.get(reverse("deployment_detail", args=[deployment.pk]))
        assert response.status_code == 200
        hours_read = sum('FROM "deployments_traffichour"' in query["sql"] for query in captured)
        return response.content.decode(), hours_read

    page, hours_read = deployment_page()
    assert "No traffic reported yet" in page
    assert hours_read == 1  # the latest hour: none
    assert deployment_page()[1] == 0
    TrafficHour.objects.create(
        deployment=deployment, hour=at("2025-03-12T10:00:00"), requests=1200, updated_at=NOW
    )
    page, hours_read = deployment_page()
    assert "<dt>Requests</dt><dd>1,200</dd>" in page
    assert hours_read == 2  # the latest hour, then the hours of the two weeks before it
    page, hours_read = deployment_page()
    assert ("<dt>Requests</dt><dd>1,200</dd>" in page, hours_read) == (True, 0)


def test_the_overview_is_cached_apart_for_people_of_other_teams(imported, member, team):
    """Two members who see the same projects, one also in a team with no project yet: that
    team's filter is the one's own, and refused to the other (who sees their team's spend)."""
    from django.test import Client

    from tests.factories import MembershipFactory, TeamFactory

    empty = TeamFactory(name="Research", slug="research")
    MembershipFactory(user=member, team=empty)
    other = MembershipFactory(team=team).user

    def total(user) -> str:
        client = Client()
        client.force_login(user)
        page = client.get(reverse("home") + "?team=research").content.decode()
        return re.search(r'id="period-total">([^<]*)<', page).group(1)

    assert total(member) == "$0.00"
    assert total(other) == "$12.50"
    assert total(member) == "$0.00"


def test_a_bill_running_past_now_is_cached_to_the_minute_shown(staff_client, imported):
    """A bill whose usage runs past now is shown as loaded up to now: the cached parts are keyed
    by the minute shown, so a second load within that minute is a warm one."""
    from apps.billing.models import Delivery

    Delivery.objects.update(max_usage_period_end=NOW + timedelta(days=2))

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            project_page(staff_client)
        return len(captured)

    with travel(NOW + timedelta(seconds=5), tick=False):
        queries()
    with travel(NOW + timedelta(seconds=40), tick=False):
        assert queries() == 8
    with travel(NOW + timedelta(seconds=65), tick=False):
        assert queries() > 8  # the next minute: shown as loaded up to 12:01
