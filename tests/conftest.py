"""Fixtures every test can use: the three standing users of STYLE.md (a lead and a member of the
project's team, an outsider who leads another team) plus staff, and clients logged in as each."""

import pytest
from django.test import Client

from apps.accounts.models import Membership

from .factories import MembershipFactory, ProjectFactory, StaffFactory, TeamFactory, UserFactory


@pytest.fixture(autouse=True)
def _fast_and_self_contained(settings):
    # Hashing with the production hasher costs a third of a second per user; tests need no strength.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Pages are rendered without a collectstatic manifest; the manifest storage is for production.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture
def team(db):
    return TeamFactory(name="Vision", slug="vision")


@pytest.fixture
def other_team(db):
    return TeamFactory(name="Language", slug="language")


@pytest.fixture
def project(team):
    return ProjectFactory(team=team, name="Image ranking", slug="image-ranking")


@pytest.fixture
def lead(team):
    return MembershipFactory(
        team=team, user=UserFactory(username="lena-lead"), role=Membership.Role.LEAD
    ).user


@pytest.fixture
def member(team):
    return MembershipFactory(
        team=team, user=UserFactory(username="max-member"), role=Membership.Role.MEMBER
    ).user


@pytest.fixture
def outsider(other_team):
    """Leads another team: being a lead elsewhere must grant nothing here."""
    return MembershipFactory(
        team=other_team, user=UserFactory(username="olga-outsider"), role=Membership.Role.LEAD
    ).user


@pytest.fixture
def staff(db):
    return StaffFactory(username="sam-staff")


def _client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def lead_client(lead):
    return _client_for(lead)


@pytest.fixture
def member_client(member):
    return _client_for(member)


@pytest.fixture
def outsider_client(outsider):
    return _client_for(outsider)


@pytest.fixture
def staff_client(staff):
    return _client_for(staff)
