"""The API tokens settings page: create (shown once), list, revoke."""

import pytest
from django.urls import reverse

from apps.accounts.models import ApiToken
from apps.accounts.services import api_token_create

from .conftest import Api

pytestmark = pytest.mark.django_db
URL = "/settings/tokens/"


def test_creating_a_token_shows_its_secret_once_and_stores_only_its_hash(member_client, member):
    response = member_client.post(URL, {"name": "training cluster"})
    page = response.content.decode()
    token = ApiToken.objects.get()
    assert (token.user, token.name) == (member, "training cluster")
    secret = page.split('<code id="new-token">')[1].split("</code>")[0]
    assert token.key_hash == ApiToken.hash_secret(secret)
    assert "Copy the token “training cluster” now" in page
    again = member_client.get(URL).content.decode()
    assert secret not in again
    assert f"<code>{token.prefix}…</code>" in again
    assert Api(secret).get("/projects").status == 200


def test_an_htmx_create_answers_only_the_token_panel(member_client):
    response = member_client.post(URL, {"name": "ci"}, headers={"HX-Request": "true"})
    page = response.content.decode()
    assert page.lstrip().startswith('<div id="tokens">')
    assert "<html" not in page
    assert '<code id="new-token">cs_' in page


def test_a_token_needs_a_name(member_client):
    page = member_client.post(URL, {"name": ""}).content.decode()
    assert "This field is required." in page
    assert not ApiToken.objects.exists()


def test_the_page_lists_only_the_users_own_tokens_with_last_use(member_client, member, lead):
    api_token_create(user=member, name="mine")
    api_token_create(user=lead, name="the lead's")
    page = member_client.get(URL).content.decode()
    assert "mine" in page
    assert "the lead&#x27;s" not in page and "the lead's" not in page
    assert "never" in page


def test_an_empty_list_says_what_to_do(member_client):
    assert (
        "No tokens yet: name one after what will use it" in member_client.get(URL).content.decode()
    )


def test_revoking_a_token_stops_it_at_once(member_client, member, project):
    issued = api_token_create(user=member, name="old laptop")
    response = member_client.post(reverse("token_revoke", args=[issued.token.pk]))
    assert response.status_code == 302
    issued.token.refresh_from_db()
    assert issued.token.is_revoked
    assert Api(issued.secret).get("/projects").status == 401
    page = member_client.get(URL).content.decode()
    assert "Token “old laptop” (" in page and "revoked" in page


def test_an_htmx_revoke_answers_the_panel_with_the_message(member_client, member):
    issued = api_token_create(user=member, name="ci")
    response = member_client.post(
        reverse("token_revoke", args=[issued.token.pk]), headers={"HX-Request": "true"}
    )
    page = response.content.decode()
    assert page.lstrip().startswith('<div id="tokens">')
    assert f"Token “ci” ({issued.token.prefix}…) revoked." in page


def test_nobody_revokes_another_users_token_but_staff(member_client, staff_client, lead):
    issued = api_token_create(user=lead, name="lead's")
    url = reverse("token_revoke", args=[issued.token.pk])
    assert member_client.post(url).status_code == 404
    assert member_client.get(url).status_code == 405
    issued.token.refresh_from_db()
    assert not issued.token.is_revoked
    assert staff_client.post(url).status_code == 302
    issued.token.refresh_from_db()
    assert issued.token.is_revoked


def test_the_navigation_links_to_the_token_page(member_client):
    assert f'href="{URL}"' in member_client.get(reverse("project_list")).content.decode()
