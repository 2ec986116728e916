"""The pages' findings figures are cached per findings version and never stale: a status change
and a recompute each make the next request read the finding-hours afresh."""

import re
from datetime import UTC, datetime
from decimal import Decimal

import pytest
import time_machine
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from apps.insights.days import day_rollup_rebuild
from apps.insights.models import Finding, Kind
from apps.insights.selectors import wasted_counted_once
from apps.insights.services import finding_snooze, findings_recompute
from tests.factories import MembershipFactory, UserFactory

from .conftest import line

pytestmark = pytest.mark.django_db
NOW = datetime(2025, 3, 11, 9, tzinfo=UTC)
PAGE = "/waste/?start=2025-03-10&end=2025-03-10"


def total(client: Client, figure: str = "total-wasted") -> tuple[str, list[str]]:
    """A total of the waste page (the counted-once wasted), and the SQL of the request."""
    with CaptureQueriesContext(connection) as queries:
        body = client.get(PAGE).content.decode()
    start = body.index(f'id="{figure}"><strong>') + len(f'id="{figure}"><strong>')
    return body[start : body.index("</strong>", start)], [q["sql"] for q in queries]


# The finding-hours and, on PostgreSQL, their day rollup (apps/insights/days.py): what pages read.
HOURS_TABLES = ("insights_findinghour", "insights_findingday", "insights_findingshare")


def reads_hours(sql: list[str]) -> int:
    return sum(any(table in statement for table in HOURS_TABLES) for statement in sql)


@pytest.fixture
def client(bill, lead) -> Client:
    with time_machine.travel(NOW, tick=False):
        findings_recompute()
    client = Client()
    client.force_login(lead)
    return client


def test_the_same_page_again_reads_no_finding_hour(client):
    with time_machine.travel(NOW, tick=False):
        first, first_sql = total(client)
        again, again_sql = total(client)
    assert first == again == "$18.25"
    # Counted once (the days' wasted alone, the share groups' days, the groups split by the set),
    # per finding, unattributed, failed runs.
    assert reads_hours(first_sql) == 6
    assert reads_hours(again_sql) == 0


def test_a_snoozed_finding_leaves_the_total_at_the_next_request(
    client, lead, django_capture_on_commit_callbacks
):
    with time_machine.travel(NOW, tick=False):
        assert total(client)[0] == "$18.25"
        idle_a = Finding.objects.get(kind=Kind.IDLE_GPU, subject_key="i-a")
        with django_capture_on_commit_callbacks(execute=True):
            finding_snooze(finding=idle_a, by=lead, until=datetime(2025, 3, 20).date())
        after, sql = total(client)
    # The active findings without i-a's idle 5.00.
    assert after == "$13.25"
    assert reads_hours(sql) == 6


def test_a_recompute_after_new_spend_shows_the_new_waste(
    client, delivery, django_capture_on_commit_callbacks
):
    with time_machine.travel(NOW, tick=False):
        assert total(client, "total-unattributed")[0] == "$35.00"
        # 70.00 of a stray box that nobody claims: unattributed spend the page now holds.
        line(delivery, "2025-03-10 14:00", "2025-03-10 15:00", "70.00", resource="i-zz")
        with django_capture_on_commit_callbacks(execute=True):
            findings_recompute()
        after, sql = total(client, "total-unattributed")
    assert after == "$105.00"
    assert reads_hours(sql) == 6


def test_counted_once_in_sql_equals_the_precedence_walk(bill):
    """PostgreSQL's least(sum, spend) per line-hour is what taking the findings in precedence
    order adds up to: a failed run's 4.00 on i-a's hour leaves its idle 3.00 nothing to add."""
    findings_recompute()
    idle_a = Finding.objects.get(kind=Kind.IDLE_GPU, subject_key="i-a")
    failed = Finding.objects.create(kind=Kind.FAILED_RUN, subject_key="run:x", resource_id="i-a")
    hour = idle_a.hours.filter(wasted__gt=0).order_by("hour").first()
    failed.hours.create(
        line_key=hour.line_key,
        hour=hour.hour,
        currency="USD",
        wasted=Decimal("4.00"),
        spend=Decimal("4.00"),
    )
    day_rollup_rebuild(start=None, end=None)  # as the recompute does after writing hours
    both = Finding.objects.filter(pk__in=[idle_a.pk, failed.pk])
    alone = wasted_counted_once(findings=Finding.objects.filter(pk=idle_a.pk), start=None, end=None)
    # i-a's idle alone is 5.00; with the failed run its first wasted hour is the run's 4.00.
    assert alone == {"USD": Decimal("5.00")}
    assert wasted_counted_once(findings=both, start=None, end=None) == {
        "USD": Decimal("5.00") - hour.wasted + Decimal("4.00")
    }


def test_counted_once_over_no_finding_is_nothing(bill):
    """An empty set of findings (`pk__in=[]` compiles to no SQL) counts nothing, as the
    precedence walk did; it raised EmptyResultSet once summed in SQL."""
    findings_recompute()
    assert wasted_counted_once(findings=Finding.objects.none(), start=None, end=None) == {}
    none = Finding.objects.filter(pk__in=[])
    assert wasted_counted_once(findings=none, start=None, end=None) == {}


def test_a_team_shares_its_figures_and_another_team_does_not(client, team, other_team):
    """The figures are filtered by the ids of the projects a person sees, not by who they are:
    a second lead of the team reads none of them afresh; a lead of another team (who sees other
    projects) does, and sees only the findings without a project (i-u's 10.00)."""
    second, third = Client(), Client()
    second.force_login(
        MembershipFactory(team=team, user=UserFactory(username="lou-lead"), role="lead").user
    )
    third.force_login(
        MembershipFactory(team=other_team, user=UserFactory(username="oz-lead"), role="lead").user
    )
    with time_machine.travel(NOW, tick=False):
        first, first_sql = total(client)
        again, again_sql = total(second)
        other, other_sql = total(third)
    assert (first, again, other) == ("$18.25", "$18.25", "$10.00")
    assert (reads_hours(first_sql), reads_hours(again_sql)) == (6, 0)
    assert reads_hours(other_sql) > 0


def test_the_cached_findings_section_is_shared_by_who_sees_the_same_findings(
    client, team, other_team
):
    """The overview's findings section, cached whole and kept through a change of spend, is
    keyed by what the person asking sees: a second lead of the team reads no finding, a lead of
    another team gets the findings without a project alone (i-u's 10.00), and staff all."""
    from django.contrib.auth import get_user_model

    from apps.spend.figures import version_bump

    def section(who: Client) -> tuple[str, str, list[str]]:
        with CaptureQueriesContext(connection) as queries:
            body = who.get("/?start=2025-03-10&end=2025-03-10").content.decode()
        wasted = re.search(r'id="findings-wasted">([^<]*)</strong>', body).group(1)
        active = re.search(r"· (\d+) open findings?</span>", body).group(1)
        return wasted, active, [q["sql"] for q in queries]

    second, third, staff = Client(), Client(), Client()
    second.force_login(
        MembershipFactory(team=team, user=UserFactory(username="lou-lead"), role="lead").user
    )
    third.force_login(
        MembershipFactory(team=other_team, user=UserFactory(username="oz-lead"), role="lead").user
    )
    staff.force_login(get_user_model().objects.create_user("sam-staff", is_staff=True))
    with time_machine.travel(NOW, tick=False):
        assert section(client)[:2] == ("$18.25", "5")
        version_bump()  # as an import's commit does: the page is built again, the section kept
        wasted, active, sql = section(second)
        assert (wasted, active) == ("$18.25", "5")
        assert [statement for statement in sql if '"insights_finding"' in statement] == []
        assert section(third)[:2] == ("$10.00", "3")
        assert section(staff)[:2] == ("$18.25", "5")


def test_a_snoozed_finding_leaves_the_project_pages_cached_section(
    client, project, lead, django_capture_on_commit_callbacks
):
    """The project page's spend section is cached whole (HTML) under the findings version too."""

    def open_findings() -> str:
        page = client.get(f"/projects/{project.slug}/?start=2025-03-10&end=2025-03-10")
        found = re.search(r"· (\d+) open findings?</span>", page.content.decode())
        return found.group(1)

    with time_machine.travel(NOW, tick=False):
        assert open_findings() == "2"
        idle_a = Finding.objects.get(kind=Kind.IDLE_GPU, subject_key="i-a")
        with django_capture_on_commit_callbacks(execute=True):
            finding_snooze(finding=idle_a, by=lead, until=datetime(2025, 3, 20).date())
        assert open_findings() == "1"


def test_a_status_change_moves_the_findings_version_every_process_reads(client, lead):
    """Another web process has a cache of its own: the findings' version lives in the database
    (read with the data version in one query), and a status change moves it in its transaction."""
    from django.core.cache import cache

    from apps.spend.figures import versions_read

    before = versions_read()
    with time_machine.travel(NOW, tick=False):
        finding = Finding.objects.get(kind=Kind.IDLE_GPU, subject_key="i-a")
        finding_snooze(finding=finding, by=lead, until=datetime(2025, 3, 20).date())
    cache.clear()  # nothing of the versions lives in the cache
    after = versions_read()
    assert after.findings == before.findings + 1
    assert (after.data, after.joined) == (before.data, before.joined)


SPEND_TABLES = ("billing_dailycost", "billing_dailyprojectcost", "billing_monthlycost")


def reads_spend(sql: list[str]) -> int:
    return sum(any(table in statement for table in SPEND_TABLES) for statement in sql)


def test_a_change_of_spend_leaves_the_findings_figures_cached_and_of_findings_the_spend(client):
    """The first page after an import computes its spend figures only, the first after the
    recompute it starts its findings figures only; a rename (what both join) computes both."""
    from apps.projects.models import Project
    from apps.spend.figures import findings_version_bump, version_bump

    def overview() -> tuple[str, list[str]]:
        with CaptureQueriesContext(connection) as queries:
            body = client.get("/?start=2025-03-10&end=2025-03-10").content.decode()
        # Without the CSRF token, masked afresh for every response.
        return re.sub(r"[A-Za-z0-9]{64}", "", body), [q["sql"] for q in queries]

    with time_machine.travel(NOW, tick=False):
        first, sql = overview()
        assert reads_spend(sql) > 0 and reads_hours(sql) > 0
        again = overview()[1]
        assert reads_spend(again) == reads_hours(again) == 0
        version_bump()  # as an import's commit does
        after_spend, sql = overview()
        assert reads_spend(sql) > 0 and reads_hours(sql) == 0
        # Not even the findings themselves: the section is cached whole, keyed by what it is
        # asked and who asks, so none of its queries is built or run.
        assert [statement for statement in sql if '"insights_finding"' in statement] == []
        findings_version_bump()  # as a recompute's does
        after_findings, sql = overview()
        assert reads_spend(sql) == 0 and reads_hours(sql) > 0
        project = Project.objects.first()
        project.name = "Renamed"
        project.save()
        _, sql = overview()
        assert reads_spend(sql) > 0 and reads_hours(sql) > 0
    # Nothing changed but the versions: the same page each time.
    assert first == after_spend == after_findings
    assert "$18.25" in first


def test_the_top_findings_rank_by_wasted_then_rank_amount_then_id(bill):
    """Summed per finding first and joined to the findings after: the same order as the waste
    page's, ties (equal wasted in the period) broken by rank amount, then by the later id."""
    from datetime import date

    from apps.insights.selectors import _top_in_period

    findings_recompute()
    active = Finding.objects.all()
    # By hand (the conftest): idle i-u 10.00, unattributed i-u 20.00 and S3 15.00, idle i-a 5.00,
    # idle i-b 3.25.
    unattributed_u = Finding.objects.get(kind=Kind.UNATTRIBUTED, subject_key__contains="i-u")
    s3 = Finding.objects.get(kind=Kind.UNATTRIBUTED, subject_key__contains="S3")
    idle = {
        key: Finding.objects.get(kind=Kind.IDLE_GPU, subject_key=key)
        for key in ["i-u", "i-a", "i-b"]
    }
    march = {"start": date(2025, 3, 10), "end": date(2025, 3, 11)}
    top = _top_in_period(active, **march, limit=5)
    assert [f.pk for f in top] == [
        unattributed_u.pk,
        s3.pk,
        idle["i-u"].pk,
        idle["i-a"].pk,
        idle["i-b"].pk,
    ]
    # A tie: i-a's and i-b's days made equal. The larger rank amount first, given to the earlier
    # id so that the two tie-breaks disagree; with equal rank amounts, the later id first.
    idle["i-b"].days.update(wasted=Decimal("5.00"))
    earlier, later = sorted([idle["i-a"].pk, idle["i-b"].pk])
    for pk, amount in ((earlier, "2"), (later, "1")):
        Finding.objects.filter(pk=pk).update(rank_amount=Decimal(amount))
    assert [f.pk for f in _top_in_period(active, **march, limit=5)][3:] == [earlier, later]
    Finding.objects.filter(pk__in=[earlier, later]).update(rank_amount=Decimal("1"))
    assert [f.pk for f in _top_in_period(active, **march, limit=5)][3:] == [later, earlier]
    assert _top_in_period(Finding.objects.none(), **march, limit=5) == []


def test_a_recompute_renders_the_findings_sections_alone_and_an_import_the_spend_alone(
    client, project, monkeypatch
):
    """The overview and the project page cache their spend and their findings section apart
    (apps.insights.figures.page_fragment_with_findings): after a recompute only the sections
    are built, after an import only the spend around them, and the pages read the same. A
    model's page, which shows no findings, is left whole by a recompute."""
    from apps.deployments import views as model_views
    from apps.deployments.models import Model
    from apps.projects import views as project_views
    from apps.spend import views as spend_views
    from apps.spend.figures import findings_version_bump, version_bump

    model = Model.objects.create(project=project, name="ranker")

    built: list[str] = []

    def counted(module, name: str) -> None:
        original = getattr(module, name)

        def wrapper(*args, **kwargs):
            built.append(f"{module.__name__.split('.')[1]}.{name}")
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    for module, name in (
        (spend_views, "_overview_figures"),
        (spend_views, "findings_section"),
        (project_views, "_spend"),
        (project_views, "findings_section"),
        (model_views, "model_spend"),
        (model_views, "_model_body"),
    ):
        counted(module, name)

    def pages() -> list[str]:
        built.clear()
        bodies = [
            client.get("/?start=2025-03-10&end=2025-03-10").content.decode(),
            client.get(
                f"/projects/{project.slug}/?start=2025-03-10&end=2025-03-10"
            ).content.decode(),
            client.get(f"/models/{model.pk}/").content.decode(),
        ]
        # Without the CSRF token, masked afresh for every response.
        return [re.sub(r"[A-Za-z0-9]{64}", "", body) for body in bodies]

    with time_machine.travel(NOW, tick=False):
        first = pages()
        assert sorted(built) == [
            "deployments._model_body",
            "deployments.model_spend",
            "projects._spend",
            "projects.findings_section",
            "spend._overview_figures",
            "spend.findings_section",
        ]
        assert pages() == first and built == []
        findings_version_bump()  # as a recompute's commit does
        assert pages() == first
        assert sorted(built) == ["projects.findings_section", "spend.findings_section"]
        version_bump()  # as an import's commit does
        assert pages() == first
        # The model page shows no findings: a recompute leaves it whole.
        assert sorted(built) == [
            "deployments._model_body",
            "deployments.model_spend",
            "projects._spend",
            "spend._overview_figures",
        ]
        # What a filter change fetches (#spend) is the same two parts joined.
        partials = [
            client.get(url, headers={"HX-Request": "true", "HX-Target": "spend"}).content.decode()
            for url in (
                "/?start=2025-03-10&end=2025-03-10",
                f"/projects/{project.slug}/?start=2025-03-10&end=2025-03-10",
            )
        ]
    for body in first[:2] + partials:
        assert body.count('id="findings-section"') == 1
        assert "costsite: the findings section" not in body
    assert 'id="findings-wasted">$18.25<' in first[0]
    assert first[1].count('id="findings-section"') == 1
