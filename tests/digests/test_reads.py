"""One set of reads per period for every reader (selectors.DigestReads): each digest built from a
run's reads is the one its reader's own reads give, and its figures are the insights and spend
selectors' for the same findings and projects."""

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from apps.digests import selectors
from apps.digests.models import Frequency, Subscription
from apps.insights.days import day_rollup_rebuild
from apps.insights.models import Finding, FindingHour, Kind, Status
from apps.insights.selectors import waste_totals, wasted_counted_once
from apps.projects.models import Project
from apps.spend.filters import Period
from apps.spend.selectors import SpendScope, spend_changes
from tests.factories import ProjectFactory, StaffFactory

pytestmark = pytest.mark.django_db

START, END = date(2025, 3, 10), date(2025, 3, 17)


@pytest.fixture
def subscriptions(world, lead, member, project):
    ProjectFactory(team=project.team, name="Search", slug="search")
    chosen = Subscription.objects.create(user=member)
    chosen.projects.set([project])
    Subscription.objects.create(user=lead, minimum_amount=Decimal("5.01"))
    Subscription.objects.create(user=StaffFactory())
    return list(selectors.subscriptions_due(frequency=Frequency.WEEKLY))


def run_digests(due):
    shared: dict = {}
    readers = selectors.readers_of(due)
    return [
        selectors.digest_build(
            subscription=s, period_start=START, period_end=END, shared=shared, readers=readers
        )
        for s in due
    ]


def test_a_runs_reads_give_every_reader_the_digest_of_their_own_reads(subscriptions):
    own = [
        selectors.digest_build(subscription=s, period_start=START, period_end=END)
        for s in subscriptions
    ]

    assert run_digests(subscriptions) == own
    assert [(d.wasted, d.findings_count, d.unattributed is not None) for d in own] == [
        ({"USD": Decimal("8.25")}, 2, False),  # the member chose image-ranking
        ({"USD": Decimal("10.00")}, 3, True),  # the lead, at least 5.01
        ({"USD": Decimal("18.25")}, 5, True),  # staff: every finding
    ]


def test_each_digests_figures_are_the_insights_and_spend_selectors(subscriptions):
    for subscription, digest in zip(subscriptions, run_digests(subscriptions), strict=True):
        findings = Finding.objects.filter(
            pk__in=selectors.digest_findings(subscription=subscription).values("pk")
        )
        totals = waste_totals(findings=findings, start=START, end=END, today=END)
        projects = selectors.subscription_projects(subscription=subscription)
        changes = spend_changes(
            scope=SpendScope(currency="USD", project_ids=tuple(sorted(p.pk for p in projects))),
            period=Period(START, digest.covered_end),
            names_for=selectors.TOP_MOVERS,
            models=False,
        )
        movers = [*changes.experiment_movers(5), *changes.deployment_movers(5)]
        movers.sort(key=lambda change: (-abs(change.change), change.name))

        assert (digest.wasted, digest.savings_per_month) == (
            totals.wasted,
            totals.savings_per_month,
        )
        assert (digest.projects, digest.movers) == (changes.projects, movers[:5])
    assert [len(d.projects) for d in run_digests(subscriptions)] == [1, 1, 1]


def test_a_line_hour_two_findings_share_is_counted_once_among_a_digests_own_findings(
    world, lead, member, project
):
    hour = datetime(2025, 3, 12, 9, tzinfo=UTC)
    for kind, wasted, owner in (
        (Kind.IDLE_GPU, "6.00", project),
        (Kind.DATA_STARVED, "5.00", None),
    ):
        finding = Finding.objects.create(
            kind=kind,
            subject_key=f"shared-{kind}",
            project=owner,
            resource_id="i-shared",
            reason="a shared line-hour",
            rank_amount=Decimal(wasted),
            status=Status.OPEN,
        )
        FindingHour.objects.create(
            finding=finding,
            line_key="line-shared",
            hour=hour,
            currency="USD",
            wasted=Decimal(wasted),
            spend=Decimal("8.00"),
        )
    day_rollup_rebuild(start=None, end=None)  # as the recompute does after writing hours
    for user in (lead, member):
        Subscription.objects.create(user=user)
    lead_digest, member_digest = run_digests(list(selectors.subscriptions_due(frequency="weekly")))

    def expected(user):
        visible = Finding.objects.filter(
            pk__in=selectors.digest_findings(subscription=Subscription.objects.get(user=user))
        )
        return wasted_counted_once(findings=visible, start=START, end=END)

    # The lead sees both (one has no project): 8.00 of the line-hour, not 11.00.
    assert lead_digest.wasted == expected(lead) == {"USD": Decimal("18.25") + Decimal("8.00")}
    # The member sees the project's one only: all of its 6.00.
    assert member_digest.wasted == expected(member) == {"USD": Decimal("8.25") + Decimal("6.00")}


def test_a_run_reads_once_whatever_the_number_of_digests(subscriptions, django_assert_num_queries):
    readers = selectors.readers_of(subscriptions)
    shared: dict = {}
    first, *others = subscriptions
    selectors.digest_build(
        subscription=first, period_start=START, period_end=END, shared=shared, readers=readers
    )

    # Only the unattributed spend (4 queries: its resources ranked, then named), which the
    # member who chose a project does not see; the budgets and the findings listed were read
    # with the first digest.
    with django_assert_num_queries(4):
        for subscription in others:
            selectors.digest_build(
                subscription=subscription,
                period_start=START,
                period_end=END,
                shared=shared,
                readers=readers,
            )
    assert Project.objects.count() == 2
