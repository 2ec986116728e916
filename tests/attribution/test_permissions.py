"""Who sees which spend: every page, its htmx partial and its export, for the lead and the member
of Image ranking's team, the outsider (who leads another team) and staff."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true", "HX-Target": "spend"}
ALLOWED = {"lead": 200, "member": 200, "outsider": 404, "staff": 200}
# Unattributed spend is for staff and leads; the outsider leads a team, so may see it too.
UNATTRIBUTED = {"lead": 200, "member": 404, "outsider": 200, "staff": 200}


def pages(bill) -> list[tuple[str, str, str, dict]]:
    """(name, page url, export url, who gets what)."""
    return [
        ("overview", reverse("home"), reverse("overview_export"), dict.fromkeys(ALLOWED, 200)),
        (
            "project",
            reverse("project_detail", args=["image-ranking"]),
            reverse("project_spend_export", args=["image-ranking"]),
            ALLOWED,
        ),
        (
            "model",
            reverse("model_detail", args=[bill.ranker.pk]),
            reverse("model_spend_export", args=[bill.ranker.pk]),
            ALLOWED,
        ),
        (
            "experiment",
            reverse("experiment_detail", args=[bill.resnet.pk]),
            reverse("experiment_spend_export", args=[bill.resnet.pk]),
            ALLOWED,
        ),
        (
            "deployment",
            reverse("deployment_detail", args=[bill.ranker_prod.pk]),
            reverse("deployment_spend_export", args=[bill.ranker_prod.pk]),
            ALLOWED,
        ),
        ("unattributed", reverse("unattributed"), reverse("unattributed_export"), UNATTRIBUTED),
    ]


@pytest.fixture
def clients(lead_client, member_client, outsider_client, staff_client):
    return {
        "lead": lead_client,
        "member": member_client,
        "outsider": outsider_client,
        "staff": staff_client,
    }


@pytest.mark.parametrize("who", ["lead", "member", "outsider", "staff"])
def test_each_page_partial_and_export_answers_by_role(clients, bill, who):
    client = clients[who]
    for name, url, export, rule in pages(bill):
        expected = rule[who]
        page = client.get(url)
        assert page.status_code == expected, (who, name, "page")
        partial = client.get(url, headers=HTMX)
        assert partial.status_code == expected, (who, name, "partial")
        csv = client.get(export, {"table": "spend"} if name != "unattributed" else {})
        assert csv.status_code == expected, (who, name, "export")
        if expected == 200:
            body = partial.content.decode()
            assert body.lstrip().startswith('<div id="spend" class="spend">'), (who, name)
            assert "<html" not in body, (who, name)
            assert 'id="spend"' in page.content.decode()


def test_the_partial_keeps_the_filter_state_and_links(staff_client, bill):
    body = staff_client.get(
        reverse("home"), {"preset": "7d", "team": "vision"}, headers=HTMX
    ).content.decode()
    # The preset links keep the team, and say which range is on.
    assert 'href="/?preset=90d&amp;team=vision"' in body
    assert 'hx-get="/?preset=90d&amp;team=vision"' in body
    assert 'data-preset="7d" aria-current="true"' in body
    # Exports carry the same state.
    assert 'href="/spend.csv?table=projects&amp;preset=7d&amp;team=vision"' in body
    assert '<option value="vision" selected>Vision</option>' in body


def test_an_outsider_reads_nothing_of_another_team_in_the_overview_export(outsider_client, bill):
    body = b"".join(
        outsider_client.get(reverse("overview_export"), {"table": "projects"}).streaming_content
    ).decode()
    assert "Translation" in body and "Image ranking" not in body


@pytest.mark.parametrize(
    "url",
    [
        "/",
        "/?preset=all",
        "/spend.csv?table=projects",
        "/spend.csv?table=models",
        "/spend.csv?table=movers",
        "/waste/",
        "/storage/",
        "/gpus/",
    ],
)
def test_someone_who_sees_no_project_gets_empty_pages_not_errors(bill, url):
    """The pages filter by the ids of the projects a person sees; with none, a filter that
    matches nothing compiles to no SQL, and every page answers with nothing to show."""
    from django.test import Client

    from tests.factories import UserFactory

    client = Client()
    client.force_login(UserFactory(username="nobody-yet"))
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    body = (
        b"".join(response.streaming_content) if response.streaming else response.content
    ).decode()
    assert "Image ranking" not in body
