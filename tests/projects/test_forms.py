from decimal import Decimal

import pytest
from django.urls import reverse

from apps.projects.models import Project
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db


def _data(team, **overrides):
    return {
        "team": team.pk,
        "name": "Speech synthesis",
        "slug": "speech-synthesis",
        "description": "TTS for the support line.",
        "monthly_budget": "2500.50",
        **overrides,
    }


def _errors(response, field):
    return response.context["form"].errors.get(field)


def test_a_lead_creates_a_project_for_the_team(lead_client, team):
    response = lead_client.post(reverse("project_create"), _data(team))
    project = Project.objects.get(slug="speech-synthesis")
    assert response.status_code == 302
    assert response["Location"] == reverse("project_detail", args=["speech-synthesis"])
    assert (project.team, project.name, project.monthly_budget) == (
        team,
        "Speech synthesis",
        Decimal("2500.50"),
    )


def test_with_htmx_a_created_project_opens_its_page(lead_client, team):
    response = lead_client.post(reverse("project_create"), _data(team), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse("project_detail", args=["speech-synthesis"])


def test_with_htmx_errors_come_back_in_the_form_alone(lead_client, team):
    response = lead_client.post(
        reverse("project_create"), _data(team, slug="Speech Synthesis"), HTTP_HX_REQUEST="true"
    )
    page = response.content.decode()
    assert response.status_code == 200
    assert page.lstrip().startswith("<form")
    assert "<html" not in page
    assert "Use only lowercase letters, digits and single hyphens, e.g. “image-ranking”." in page
    assert 'aria-invalid="true"' in page
    assert Project.objects.count() == 0


def test_without_javascript_errors_come_back_in_the_whole_page(lead_client, team):
    response = lead_client.post(reverse("project_create"), _data(team, monthly_budget="-1"))
    page = response.content.decode()
    assert "<html" in page
    assert "The budget cannot be negative; leave it empty for no budget." in page
    assert not Project.objects.exists()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "slug",
            "speech_synthesis",
            "Use only lowercase letters, digits and single hyphens, e.g. “image-ranking”.",
        ),
        (
            "slug",
            "speech--synthesis",
            "Use only lowercase letters, digits and single hyphens, e.g. “image-ranking”.",
        ),
        ("slug", "new", "“new” is reserved; choose another slug."),
        ("slug", "image-ranking", "A project with the slug “image-ranking” already exists."),
        ("monthly_budget", "-0.01", "The budget cannot be negative; leave it empty for no budget."),
        ("name", "", "This field is required."),
    ],
)
def test_a_project_form_with_bad_input_says_what_is_wrong_and_saves_nothing(
    lead_client, project, field, value, message
):
    response = lead_client.post(reverse("project_create"), _data(project.team, **{field: value}))
    assert _errors(response, field) == [message]
    assert Project.objects.count() == 1


def test_a_lead_cannot_put_a_project_in_a_team_they_do_not_lead(lead_client, team, other_team):
    response = lead_client.post(reverse("project_create"), _data(other_team))
    assert _errors(response, "team") == ["Choose one of the teams you lead."]
    assert not Project.objects.exists()


def test_an_empty_budget_means_no_budget(lead_client, team):
    lead_client.post(reverse("project_create"), _data(team, monthly_budget=""))
    assert Project.objects.get().monthly_budget is None


def test_staff_create_projects_in_any_team(staff_client, other_team):
    staff_client.post(reverse("project_create"), _data(other_team))
    assert Project.objects.get().team == other_team


def test_a_member_gets_404_on_creating_and_editing_projects(member_client, project):
    assert member_client.get(reverse("project_create")).status_code == 404
    assert member_client.post(reverse("project_create"), _data(project.team)).status_code == 404
    edit = reverse("project_edit", args=[project.slug])
    assert member_client.get(edit).status_code == 404
    response = member_client.post(edit, _data(project.team, name="Renamed"))
    assert response.status_code == 404
    project.refresh_from_db()
    assert project.name == "Image ranking"


def test_a_lead_edits_the_project_and_may_keep_its_slug(lead_client, project):
    response = lead_client.post(
        reverse("project_edit", args=[project.slug]),
        _data(project.team, name="Image ranking v2", slug="image-ranking", monthly_budget="0"),
    )
    assert response.status_code == 302
    project.refresh_from_db()
    assert (project.name, project.slug, project.monthly_budget) == (
        "Image ranking v2",
        "image-ranking",
        Decimal("0.00"),
    )


def test_a_failed_edit_leaves_the_heading_and_the_row_unchanged(lead_client, project):
    ProjectFactory(slug="taken")
    response = lead_client.post(
        reverse("project_edit", args=[project.slug]),
        _data(project.team, name="Something else", slug="taken"),
    )
    assert _errors(response, "slug") == ["A project with the slug “taken” already exists."]
    assert response.context["title"] == "Edit Image ranking"
    project.refresh_from_db()
    assert (project.name, project.slug) == ("Image ranking", "image-ranking")
