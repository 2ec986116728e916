"""The digest's figures are the waste page's for the same period, projects and minimum amount."""

import re
from datetime import date
from decimal import Decimal

import pytest
from django.test import Client

from apps.digests.models import Subscription
from apps.digests.selectors import digest_build

pytestmark = pytest.mark.django_db


def page_figures(user, query: str) -> tuple[str, int]:
    client = Client()
    client.force_login(user)
    body = client.get(f"/waste/?start=2025-03-10&end=2025-03-17&status=active{query}").content
    body = body.decode()
    wasted = re.search(r'id="total-wasted"><strong>([^<]+)</strong>', body).group(1)
    return wasted, len(set(re.findall(r'id="finding-(\d+)"', body)))


def digest_figures(subscription) -> tuple[str, int]:
    digest = digest_build(
        subscription=subscription,
        period_start=date(2025, 3, 10),
        period_end=date(2025, 3, 17),
    )
    return f"${digest.wasted_amount:,.2f}", digest.findings_count


@pytest.mark.parametrize(
    ("minimum", "expected"),
    [
        (Decimal("0"), ("$18.25", 5)),
        (Decimal("5.01"), ("$10.00", 3)),
        (Decimal("50"), ("$0.00", 0)),
    ],
)
def test_all_projects_and_a_minimum_give_the_waste_pages_figures(world, lead, minimum, expected):
    subscription = Subscription.objects.create(user=lead, minimum_amount=minimum)
    query = f"&minimum={minimum}" if minimum else ""

    assert digest_figures(subscription) == page_figures(lead, query) == expected


def test_one_chosen_project_gives_the_waste_pages_figures_for_that_project(world, lead, project):
    subscription = Subscription.objects.create(user=lead)
    subscription.projects.set([project])

    # Idle i-a 5.00 and i-b 3.25: i-u and the unattributed findings belong to no project.
    assert (
        digest_figures(subscription)
        == page_figures(lead, f"&project={project.slug}")
        == (
            "$8.25",
            2,
        )
    )
