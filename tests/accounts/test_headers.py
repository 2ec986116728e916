"""Logged-in answers are never cached; every answer carries the Permissions-Policy."""

import pytest
from django.test import Client
from django.urls import reverse

from apps.accounts.services import api_token_create

pytestmark = pytest.mark.django_db

POLICY = (
    "accelerometer=(), camera=(), geolocation=(), gyroscope=(), magnetometer=(), microphone=(), "
    "payment=(), usb=()"
)


def _directives(response) -> set[str]:
    return {part.strip() for part in response["Cache-Control"].split(",")}


def test_logged_in_pages_partials_and_exports_are_no_store(member_client, project):
    for url, headers in [
        (reverse("home"), {}),
        (reverse("project_detail", args=[project.slug]), {"HX-Request": "true"}),
        (reverse("token_list"), {}),
    ]:
        response = member_client.get(url, headers=headers)
        assert response.status_code == 200, url
        assert "no-store" in _directives(response), url
        assert "private" in _directives(response), url
        assert response["Permissions-Policy"] == POLICY


def test_api_answers_to_a_token_are_no_store(member):
    secret = api_token_create(user=member, name="script").secret
    response = Client().get("/api/v1/host-mappings", headers={"Authorization": f"Bearer {secret}"})
    assert "no-store" in _directives(response)


def test_anonymous_answers_carry_the_policy_and_only_logged_in_ones_are_no_store(client):
    assert client.get(reverse("login"))["Permissions-Policy"] == POLICY
    health = client.get(reverse("health"))
    assert health["Permissions-Policy"] == POLICY
    assert "Cache-Control" not in health
