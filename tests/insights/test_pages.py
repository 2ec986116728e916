"""The waste page, a finding's page, their actions, the CSV export and who may see what."""

import csv
import io
import re
from datetime import UTC, datetime

import pytest
import time_machine
from django.test import Client

from apps.insights.models import Finding, FindingEvent, Kind, Status
from apps.insights.services import findings_recompute

pytestmark = pytest.mark.django_db
NOW = datetime(2025, 3, 11, 9, tzinfo=UTC)


@pytest.fixture
def found(bill):
    with time_machine.travel(NOW, tick=False):
        findings_recompute()
        yield {f.subject_key + ":" + f.kind: f for f in Finding.objects.all()}


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_waste_page_ranks_findings_and_counts_the_period_once(found, lead):
    with time_machine.travel(NOW, tick=False):
        response = client_for(lead).get("/waste/?start=2025-03-10&end=2025-03-10")
    body = response.content.decode()
    assert response.status_code == 200
    assert '<p class="figure" id="total-wasted"><strong>$18.25</strong>' in body
    assert '<p class="figure" id="total-unattributed"><strong>$35.00</strong>' in body
    order = [
        body.index(f'id="finding-{found[key].pk}"')
        for key in (
            "i-u:unattributed",
            "111/Amazon S3:unattributed",
            "i-u:idle_gpu",
            "i-a:idle_gpu",
            "i-b:idle_gpu",
        )
    ]
    assert order == sorted(order)
    assert "GPU idle 62% of 3 billed hours (1 unmeasured)" in body


def test_filters_swap_the_body_with_htmx(found, lead):
    with time_machine.travel(NOW, tick=False):
        response = client_for(lead).get(
            "/waste/?kind=idle_gpu&start=2025-03-10&end=2025-03-10", headers={"HX-Request": "true"}
        )
    body = response.content.decode()
    assert body.startswith('\n<div id="waste-body">') or body.lstrip().startswith(
        '<div id="waste-body">'
    )
    assert "<html" not in body
    assert body.count('<tr id="finding-') == 3
    assert "<strong>$18.25</strong>" in body


def test_a_member_sees_the_teams_findings_but_not_unattributed_and_cannot_act(found, member):
    with time_machine.travel(NOW, tick=False):
        body = client_for(member).get("/waste/").content.decode()
        # i-a and i-b: i-u's idle GPU has no project, like its unattributed spend.
        assert body.count('<tr id="finding-') == 2
        assert 'name="ids"' not in body
        finding = found["i-a:idle_gpu"]
        assert client_for(member).get(f"/waste/{finding.pk}/").status_code == 200
        response = client_for(member).post(
            f"/waste/{finding.pk}/action/", {"action": "acknowledge"}
        )
    assert response.status_code == 404
    finding.refresh_from_db()
    assert finding.status == Status.OPEN


def test_an_outsider_gets_404_for_another_teams_finding(found, outsider):
    finding = found["i-a:idle_gpu"]
    client = client_for(outsider)
    assert client.get(f"/waste/{finding.pk}/").status_code == 404
    assert client.post(f"/waste/{finding.pk}/action/", {"action": "acknowledge"}).status_code == 404


def test_a_lead_snoozes_a_finding_on_its_page_and_the_history_says_so(found, lead):
    finding = found["i-a:idle_gpu"]
    client = client_for(lead)
    with time_machine.travel(NOW, tick=False):
        response = client.post(
            f"/waste/{finding.pk}/action/", {"action": "snooze", "until": "2025-03-20"}, follow=True
        )
    body = response.content.decode()
    assert "Finding snoozed." in body
    assert "Snoozed</strong> until 20 Mar 2025" in body
    assert "Open → Snoozed until 20 Mar 2025 by lena-lead" in body
    assert 'id="evidence-chart"' in body


def test_a_snooze_without_a_date_is_refused_with_a_message(found, lead):
    finding = found["i-a:idle_gpu"]
    response = client_for(lead).post(
        f"/waste/{finding.pk}/action/", {"action": "snooze"}, follow=True
    )
    assert "Say until when." in response.content.decode()
    finding.refresh_from_db()
    assert finding.status == Status.OPEN


def test_bulk_acknowledge_changes_only_what_the_lead_may_act_on(found, lead, outsider):
    mine = [found["i-a:idle_gpu"].pk, found["i-b:idle_gpu"].pk]
    response = client_for(outsider).post("/waste/bulk/", {"action": "acknowledge", "ids": mine})
    assert response.status_code == 302
    assert Finding.objects.filter(status=Status.ACKNOWLEDGED).count() == 0
    client_for(lead).post("/waste/bulk/", {"action": "acknowledge", "ids": mine})
    assert sorted(
        Finding.objects.filter(status=Status.ACKNOWLEDGED).values_list("pk", flat=True)
    ) == sorted(mine)
    assert FindingEvent.objects.filter(to_status=Status.ACKNOWLEDGED, by=lead).count() == 2


def test_the_csv_export_has_one_row_per_finding_and_currency(found, lead):
    with time_machine.travel(NOW, tick=False):
        response = client_for(lead).get("/waste.csv?kind=idle_gpu&start=2025-03-10&end=2025-03-10")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0][:8] == [
        "id",
        "kind",
        "project",
        "resource_id",
        "status",
        "currency",
        "wasted_in_period",
        "wasted_since_first_seen",
    ]
    assert [(row[3], row[6], row[7]) for row in rows[1:]] == [
        ("i-u", "10.000000000000000", "10"),
        ("i-a", "5.000000000000000", "5"),
        ("i-b", "3.250000000000000", "3.25"),
    ]
    assert rows[1][1] == Kind.IDLE_GPU


@pytest.mark.parametrize(
    "query",
    ["start=0001-01-01&end=9999-12-31", "start=1999-12-31&end=2025-03-11", "start=x&end=y"],
)
def test_dates_outside_the_spend_pages_window_fall_back_to_the_default_period(found, lead, query):
    with time_machine.travel(NOW, tick=False):
        page = client_for(lead).get(f"/waste/?{query}")
        export = client_for(lead).get(f"/waste.csv?{query}")
    assert page.status_code == 200
    assert export.status_code == 200
    # The 30 days ending at the bill's "data as of".
    assert export["Content-Disposition"] == 'attachment; filename="waste-2025-02-09-2025-03-11.csv"'


def test_the_csv_export_neutralises_formulas_in_reasons_and_resource_ids(found, lead):
    finding = found["i-a:idle_gpu"]
    Finding.objects.filter(pk=finding.pk).update(reason="=HYPERLINK(1)", resource_id=" @SUM(1)")
    with time_machine.travel(NOW, tick=False):
        response = client_for(lead).get("/waste.csv?kind=idle_gpu")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    (row,) = [row for row in rows[1:] if row[0] == str(finding.pk)]
    assert (row[3], row[9]) == ("' @SUM(1)", "'=HYPERLINK(1)")


def test_the_waste_page_takes_the_spend_pages_period_presets_in_its_url(found, lead):
    with time_machine.travel(NOW, tick=False):
        body = client_for(lead).get("/waste/?preset=7d&kind=idle_gpu").content.decode()
        export = client_for(lead).get("/waste.csv?preset=7d&kind=idle_gpu")
        custom = client_for(lead).get("/waste/?start=2025-03-11&end=2025-03-11").content.decode()
    # The presets count back from the last day the bill covers (10 March): 4-10 March.
    assert "<strong>Last 7 days</strong> · 4 Mar 2025 – 10 Mar 2025 (UTC days)" in body
    assert 'data-preset="7d" aria-current="true" class="active"' in body
    # A preset's link keeps the waste page's own filters.
    assert 'href="/waste/?preset=90d&amp;kind=idle_gpu&amp;status=active"' in body
    assert export["Content-Disposition"] == 'attachment; filename="waste-2025-03-04-2025-03-11.csv"'
    # 11 March alone: nothing wasted in it.
    assert '<p class="figure" id="total-wasted"><strong>$0.00</strong>' in custom


def test_a_refused_range_says_why_and_shows_the_default(found, lead):
    with time_machine.travel(NOW, tick=False):
        body = client_for(lead).get("/waste/?start=2025-03-10").content.decode()
    assert "Give both a start and an end date for a custom range, or choose a preset." in body
    assert "Showing last 30 days instead." in body


def test_unattributed_money_is_not_labelled_waste(found, lead):
    finding = found["i-u:unattributed"]
    with time_machine.travel(NOW, tick=False):
        body = client_for(lead).get("/waste/").content.decode()
        detail = client_for(lead).get(f"/waste/{finding.pk}/").content.decode()
    assert '<th scope="col" class="num">Wasted or unattributed in period</th>' in body
    row = body[body.index(f'id="finding-{finding.pk}"') :]
    assert "unattributed, not waste" in row[: row.index("</tr>")]
    assert "Unattributed (not waste) since first seen" in detail


def test_reading_the_pages_writes_no_settings_row(found, lead):
    from apps.insights.models import InsightsSettings

    InsightsSettings.objects.all().delete()
    with time_machine.travel(NOW, tick=False):
        assert client_for(lead).get("/waste/").status_code == 200
        assert client_for(lead).get("/gpus/").status_code == 200
    assert not InsightsSettings.objects.exists()
    assert InsightsSettings.get().unattributed_threshold == 10


def test_the_list_shows_fifty_findings_a_page_with_a_pager_that_keeps_the_filters(found, lead):
    # 55 more idle findings without hours, ranked below the recomputed ones by their amounts.
    Finding.objects.bulk_create(
        Finding(
            kind=Kind.IDLE_GPU,
            subject_key=f"extra-{n:02}",
            resource_id=f"extra-{n:02}",
            reason="extra",
            rank_amount=n / 100,
        )
        for n in range(55)
    )
    count = Finding.objects.filter(kind=Kind.IDLE_GPU, status=Status.OPEN).count()
    assert count == 58
    query = "/waste/?kind=idle_gpu&start=2025-03-10&end=2025-03-10"
    with time_machine.travel(NOW, tick=False):
        first = client_for(lead).get(query).content.decode()
        second = client_for(lead).get(query + "&page=2").content.decode()
        beyond = client_for(lead).get(query + "&page=9").content.decode()
        garbled = client_for(lead).get(query + "&page=x").content.decode()
    rows = '<tr id="finding-'
    assert (first.count(rows), second.count(rows)) == (50, 8)
    assert "Findings 1–50 of 58 · page 1 of 2" in first
    assert "Findings 51–58 of 58 · page 2 of 2" in second
    assert 'href="/waste/?kind=idle_gpu&amp;start=2025-03-10&amp;end=2025-03-10&amp;page=2"' in (
        first
    )
    assert 'rel="prev"' in second and 'rel="next"' not in second
    # The costliest first across pages: the last extra (0.54) on page 1, the first (0.00) on 2.
    assert f'id="finding-{Finding.objects.get(subject_key="extra-54").pk}"' in first
    assert f'id="finding-{Finding.objects.get(subject_key="extra-00").pk}"' in second
    assert "Findings 51–58 of 58 · page 2 of 2" in beyond
    assert "Findings 1–50 of 58 · page 1 of 2" in garbled


def test_the_cached_body_keeps_the_bulk_actions_to_those_who_may_act(found, lead, member):
    """A lead and a member of the same team see the team's findings, the lead also those nobody
    owns and the bulk actions: the body cached for the lead is not the member's."""
    with time_machine.travel(NOW, tick=False):
        assert client_for(lead).get("/waste/").content.decode().count('name="ids"') == 5
        assert 'name="ids"' not in client_for(member).get("/waste/").content.decode()
        assert client_for(lead).get("/waste/").content.decode().count('name="ids"') == 5


def test_the_bulk_form_posts_with_the_token_beside_the_cached_body(found, lead):
    """The body is cached for everyone who sees the same findings, so the user's CSRF token is
    outside it, joined to the bulk form by its `form` attribute; the post a browser makes of it
    passes Django's CSRF check."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(lead)
    mine = found["i-a:idle_gpu"].pk
    with time_machine.travel(NOW, tick=False):
        client.get("/waste/")  # cached for the lead's team, with another token
        client.cookies.clear()
        client.force_login(lead)
        body = client.get("/waste/").content.decode()
    token = re.search(
        r'<input type="hidden" name="csrfmiddlewaretoken" value="([^"]+)" form="bulk-form">', body
    ).group(1)
    assert '<form method="post" action="/waste/bulk/" id="bulk-form">' in body
    refused = Client(enforce_csrf_checks=True)
    refused.force_login(lead)
    assert refused.post("/waste/bulk/", {"action": "acknowledge", "ids": [mine]}).status_code == 403
    response = client.post(
        "/waste/bulk/", {"csrfmiddlewaretoken": token, "action": "acknowledge", "ids": [mine]}
    )
    assert response.status_code == 302
    assert Finding.objects.get(pk=mine).status == Status.ACKNOWLEDGED
