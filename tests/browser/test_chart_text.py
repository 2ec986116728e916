"""A real browser: a project named like a link is drawn as text in the overview's chart, on its
axis and in its hover, and no link exists anywhere in the chart's SVG."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.urls import reverse

from apps.accounts.models import Membership, Organization
from apps.billing.loader import monthly_rebuild
from apps.billing.models import DailyCost, Delivery
from tests.factories import PASSWORD, MembershipFactory, ProjectFactory, TeamFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
# Short enough for the axis to show it whole (longer names are cut there, which broke the tag).
NAME = '<a href="/x">y</a>'


@pytest.fixture
def spend():
    org = Organization.get()
    org.currency, org.time_zone = "USD", "UTC"
    org.save()
    team = TeamFactory(name="Vision", slug="vision")
    MembershipFactory(user=UserFactory(username="lena"), team=team, role=Membership.Role.LEAD)
    project = ProjectFactory(team=team, name=NAME, slug="linked")
    now = datetime.now(tz=UTC)
    day = (now - timedelta(days=1)).date()
    delivery = Delivery.objects.create(
        status=Delivery.Status.CURRENT,
        format="focus",
        provider_name="AWS",
        billing_account_id="111111111111",
        billing_period_start=datetime(day.year, day.month, 1, tzinfo=UTC),
        billing_period_end=datetime(
            day.year + (day.month == 12), day.month % 12 + 1, 1, tzinfo=UTC
        ),
        fingerprint="linked",
        max_charge_period_end=now,
        max_usage_period_end=now,
    )
    DailyCost.objects.create(
        delivery=delivery,
        day=day,
        project=project,
        workload="training",
        cost_kind="gpu_compute",
        provider_name="AWS",
        region_id="us-east-1",
        service_name="Amazon Elastic Compute Cloud",
        pricing_category="Standard",
        billing_currency="USD",
        effective_cost=Decimal("12.00"),
        billed_cost=Decimal("12.00"),
        list_cost=Decimal("12.00"),
        line_items=1,
    )
    monthly_rebuild(delivery_id=delivery.pk)
    return project


def test_a_project_named_like_a_link_is_text_in_the_chart(live_server, spend, browser_page):
    page = browser_page
    page.goto(live_server.url + reverse("home"))
    page.fill("#id_username", "lena")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(live_server.url + reverse("home"))
    chart = page.locator("div.chart[data-figure='project-pareto']")
    page.wait_for_selector("div.chart[data-figure='project-pareto'][data-drawn=true] .main-svg")
    assert chart.locator("svg a").count() == 0
    ticks = chart.locator(".xtick text").all_text_contents()
    assert ticks == [NAME]
    # The hover shows the name as text too.
    # Plotly's drag layer lies over the bars: the mouse moves over the bar's middle instead.
    chart.scroll_into_view_if_needed()
    box = chart.locator(".bars path").first.bounding_box()
    page.mouse.move(box["x"] + 2, box["y"] + box["height"] / 2)
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, steps=5)
    page.wait_for_selector(
        "div.chart[data-figure='project-pareto'] .hoverlayer .hovertext", state="attached"
    )
    hover = chart.locator(".hoverlayer .hovertext").first
    # The whole name, its spend and its share, as text.
    assert hover.text_content() == f"{NAME}: 12.00 USD · 100.0% of the spend"
    assert chart.locator("svg a").count() == 0
    assert page.locator("a[href='/x']").count() == 0
    assert page.problems == []
