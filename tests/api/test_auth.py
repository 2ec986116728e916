"""Bearer tokens: 401 without a valid one, and a token acts as its user."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.test import Client

from apps.accounts.models import ApiToken
from apps.accounts.services import api_token_create, api_token_revoke

from .conftest import Api

pytestmark = pytest.mark.django_db
RUN = "/projects/image-ranking/experiments/run-1"


def _detail(answer) -> tuple[int, str]:
    return answer.status, answer.body["detail"]


def test_no_token_is_a_401_that_says_how_to_send_one(anonymous_api, project):
    answer = anonymous_api.put(RUN, {})
    assert _detail(answer) == (
        401,
        "Send a token as “Authorization: Bearer <token>”; create one on the API tokens page.",
    )
    assert answer.headers["WWW-Authenticate"] == 'Bearer realm="costsite"'


def test_a_header_that_is_not_bearer_is_a_401(member, project):
    secret = api_token_create(user=member, name="t").secret
    for header in (f"Token {secret}", "Bearer ", f"Basic {secret}"):
        response = Client().get("/api/v1/projects", headers={"Authorization": header})
        assert (response.status_code, response.json()) == (
            401,
            {"detail": "The Authorization header must read “Bearer <token>”."},
        ), header


def test_an_unknown_token_is_a_401(project):
    answer = Api("cs_not-a-real-token").get("/projects")
    assert _detail(answer) == (401, "This token is not valid.")


def test_a_revoked_token_is_a_401_and_writes_nothing(member, project):
    issued = api_token_create(user=member, name="t")
    api_token_revoke(token=issued.token)
    answer = Api(issued.secret).put(RUN, {})
    assert _detail(answer) == (401, "This token has been revoked.")
    assert not project.experiments.exists()


def test_the_token_of_a_deactivated_user_is_a_401(member, project):
    secret = api_token_create(user=member, name="t").secret
    member.is_active = False
    member.save()
    assert _detail(Api(secret).get("/projects")) == (401, "This token's user is deactivated.")


def test_a_logged_in_session_without_a_token_is_a_401(member_client, project):
    # The API answers tokens only, so a page's cookies can never be used for a cross-site write.
    response = member_client.put("/api/v1" + RUN, "{}", content_type="application/json")
    assert response.status_code == 401


def test_a_token_lists_the_projects_its_user_sees(member_api, outsider_api, project, other_team):
    from tests.factories import ProjectFactory

    ProjectFactory(team=other_team, slug="language-models", name="LMs")
    assert member_api.get("/projects").body == [
        {"slug": "image-ranking", "name": "Image ranking", "team": "Vision"}
    ]
    assert [p["slug"] for p in outsider_api.get("/projects").body] == ["language-models"]


def test_a_token_is_stored_as_its_sha256_with_a_recognisable_prefix(member):
    issued = api_token_create(user=member, name="cluster")
    token = ApiToken.objects.get()
    assert issued.secret.startswith("cs_") and len(issued.secret) == 46
    assert token.prefix == issued.secret[:10]
    assert token.key_hash == ApiToken.hash_secret(issued.secret)
    assert issued.secret not in {token.key_hash, token.prefix, token.name}


def test_using_a_token_records_when_at_a_minutes_precision(member, project):
    issued = api_token_create(user=member, name="t")
    start = datetime(2025, 3, 1, 12, tzinfo=UTC)
    api = Api(issued.secret)
    with time_machine.travel(start, tick=False):
        api.get("/projects")
    issued.token.refresh_from_db()
    assert issued.token.last_used_at == start
    with time_machine.travel(start + timedelta(seconds=30), tick=False):
        api.get("/projects")
    issued.token.refresh_from_db()
    assert issued.token.last_used_at == start
    with time_machine.travel(start + timedelta(minutes=2), tick=False):
        api.get("/projects")
    issued.token.refresh_from_db()
    assert issued.token.last_used_at == start + timedelta(minutes=2)


def test_revoking_twice_keeps_the_first_time(member):
    issued = api_token_create(user=member, name="t")
    first = datetime(2025, 3, 1, tzinfo=UTC)
    with time_machine.travel(first, tick=False):
        api_token_revoke(token=issued.token)
    with time_machine.travel(first + timedelta(days=1), tick=False):
        api_token_revoke(token=issued.token)
    assert issued.token.revoked_at == first
