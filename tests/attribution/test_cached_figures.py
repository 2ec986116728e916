"""The spend figures are cached per data version and never stale: each kind of change that moves
spend (an import, a replacement, a re-attribution, a claim, a registration with resources, an
allocation rule) shows on the next page load after a load that cached the figures before it."""

from datetime import date
from decimal import Decimal as D

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.billing.models import DailyCost
from apps.billing.services import attribution_refresh, import_run_create, import_run_execute
from apps.experiments.services import experiment_register
from apps.projects.models import AllocationRule
from apps.projects.services import ResourceWindow, allocation_rule_create
from apps.spend.figures import version_read

from .conftest import at, write_bill

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


@pytest.fixture
def imported(organization, frozen, project, tmp_path, django_capture_on_commit_callbacks):
    """Image ranking's 12.50 tagged line, 10.00 on i-stray and 1.00 on i-other unattributed."""
    with django_capture_on_commit_callbacks(execute=True):
        load(write_bill(tmp_path / "march.csv", MARCH))
    return project


def spend(client) -> dict[str, D]:
    """The overview's projects by spend in the last 30 days, and what nobody claims."""
    context = client.get(reverse("home")).context
    projects = {item.name: item.amount for item in context["projects"].items}
    return {**projects, "unattributed": context["series"].unattributed}


BEFORE = {"Image ranking": D("12.50"), "unattributed": D("11.00")}


def test_a_second_load_reads_the_figures_from_the_cache(staff_client, imported):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert staff_client.get(reverse("home")).status_code == 200
        return len(captured)

    cold, warm = queries(), queries()
    # The overview's grouped queries over the rollups (the series, the month, the changes, the
    # unattributed list) and its findings section's figures (counted once, the top findings and
    # how many are active) are answered from the cache, the changes' names with them; the
    # session, the data version, the menus' names, budgets, how fresh the bill is and the hosted
    # model APIs' table are still read. Cold, the unattributed list is two queries: ranked, then
    # its resources named; counted once is three: the findings' days wasted alone, their share
    # groups' days, and the groups only some of the findings hold (none here: no fourth).
    assert (cold, warm) == (24, 12)


def test_an_import_shows_on_the_next_load(
    staff_client, imported, tmp_path, django_capture_on_commit_callbacks
):
    assert spend(staff_client) == BEFORE
    february = tmp_path / "february.csv"
    write_bill(february, [line("25", "i-train", "3.00", TRAIN, month="02")])
    text = february.read_text().replace("2025-03-01T00:00:00Z", "2025-02-01T00:00:00Z")
    february.write_text(text.replace("2025-04-01T00:00:00Z", "2025-03-01T00:00:00Z"))
    with django_capture_on_commit_callbacks(execute=True):
        load(february)
    assert spend(staff_client) == {"Image ranking": D("15.50"), "unattributed": D("11.00")}


def test_a_replaced_delivery_shows_on_the_next_load(
    staff_client, imported, tmp_path, django_capture_on_commit_callbacks
):
    assert spend(staff_client) == BEFORE
    march = [line("10", "i-train", "20.00", TRAIN), *MARCH[1:]]
    with django_capture_on_commit_callbacks(execute=True):
        load(write_bill(tmp_path / "march-again.csv", march))
    assert spend(staff_client) == {"Image ranking": D("20.00"), "unattributed": D("11.00")}


def test_a_reattribution_shows_on_the_next_load(
    staff_client, imported, django_capture_on_commit_callbacks
):
    assert spend(staff_client) == BEFORE
    # A rule written behind the services' back moves nothing until the history is re-attributed.
    AllocationRule.objects.create(
        name="other", field=AllocationRule.Field.RESOURCE, pattern="i-other", project=imported
    )
    assert spend(staff_client) == BEFORE
    with django_capture_on_commit_callbacks(execute=True):
        assert attribution_refresh() == 1
    assert spend(staff_client) == {"Image ranking": D("13.50"), "unattributed": D("10.00")}


def test_a_claim_shows_on_the_next_load(
    lead_client, staff_client, imported, eager_celery, django_capture_on_commit_callbacks
):
    assert spend(staff_client) == BEFORE
    with django_capture_on_commit_callbacks(execute=True):
        response = lead_client.post(
            reverse("unattributed_claim"),
            {"resource_id": "i-stray", "target": f"project:{imported.pk}"},
        )
    assert response.status_code == 302
    assert spend(staff_client) == {"Image ranking": D("22.50"), "unattributed": D("1.00")}


def test_a_registration_with_resources_shows_on_the_next_load(
    staff_client, imported, eager_celery, django_capture_on_commit_callbacks
):
    assert spend(staff_client) == BEFORE
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


def test_an_allocation_rule_shows_on_the_next_load(
    staff_client, imported, eager_celery, django_capture_on_commit_callbacks
):
    assert spend(staff_client) == BEFORE
    with django_capture_on_commit_callbacks(execute=True):
        allocation_rule_create(
            name="other",
            field=AllocationRule.Field.RESOURCE,
            pattern="i-other",
            priority=100,
            project=imported,
        )
    assert spend(staff_client) == {"Image ranking": D("13.50"), "unattributed": D("10.00")}


def test_a_renamed_project_shows_on_the_next_load(
    staff_client, imported, django_capture_on_commit_callbacks
):
    assert spend(staff_client) == BEFORE
    with django_capture_on_commit_callbacks(execute=True):
        imported.name = "Image ranking v2"
        imported.save()
    assert spend(staff_client) == {"Image ranking v2": D("12.50"), "unattributed": D("11.00")}


def test_an_announced_change_moves_the_version_in_its_transaction(imported):
    before = version_read()
    imported.save()
    after = version_read()
    assert after != before
    cache.clear()  # the version lives in the database: emptying the cache does not move it
    assert version_read() == after


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
    before = version_read()
    DailyCost.objects.filter(project=None).update(project=imported)
    assert version_read() != before


def test_a_rollup_written_behind_the_ports_back_shows_on_the_next_load(staff_client, imported):
    assert spend(staff_client) == BEFORE
    DailyCost.objects.filter(project=None).update(project=imported)
    # The rows keep their workload, so the chart still calls 11.00 unattributed.
    assert spend(staff_client) == {"Image ranking": D("23.50"), "unattributed": D("11.00")}


def test_a_figure_is_cached_per_period(staff_client, imported):
    assert spend(staff_client) == BEFORE
    context = staff_client.get(reverse("home") + "?start=2025-03-11&end=2025-03-11").context
    assert context["series"].unattributed == D("7.25")
    assert date(2025, 3, 11) == context["filters"].period.start
