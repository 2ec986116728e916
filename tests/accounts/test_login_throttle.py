"""Login throttling (django-axes): wrong passwords lock a user name, and a client address, out."""

import pytest
from axes.models import AccessAttempt
from django.test import Client
from django.urls import reverse

from apps.accounts.services import api_token_create
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

LOCKED = (
    "Too many failed logins for this user name or from this address: logging in is locked for "
    "15 minutes. Wait, then try again, or ask staff to unlock it."
)


def _login(client: Client, username: str, password: str, address: str = "203.0.113.7"):
    return client.post(
        reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=address
    )


@pytest.fixture
def alice(db):
    user = UserFactory(username="alice")
    user.set_password("the-right-password")
    user.save()
    return user


def test_ten_wrong_passwords_lock_the_user_name_out_even_with_the_right_one(alice):
    client = Client()
    answers = [_login(client, "alice", f"wrong-{n}").status_code for n in range(10)]
    # Wrong passwords are answered as wrong until the tenth, which locks.
    assert answers == [200] * 9 + [429]
    locked = _login(client, "alice", "the-right-password", address="198.51.100.1")
    assert locked.status_code == 429
    assert LOCKED in locked.content.decode()
    assert "_auth_user_id" not in client.session


def test_ten_failures_from_one_address_lock_that_address_out_for_every_user_name(alice):
    client = Client()
    for n in range(10):
        _login(client, f"nobody-{n}", "guess")
    from_there = _login(client, "alice", "the-right-password")
    elsewhere = _login(Client(), "alice", "the-right-password", address="198.51.100.1")
    assert from_there.status_code == 429
    assert LOCKED in from_there.content.decode()
    assert elsewhere.status_code == 302  # the name alice never failed: only the address is locked


def test_a_successful_login_clears_the_user_names_count(alice):
    client = Client()
    for n in range(9):
        _login(client, "alice", f"wrong-{n}")
    assert _login(client, "alice", "the-right-password").status_code == 302
    assert AccessAttempt.objects.filter(username="alice").count() == 0


def test_the_admin_login_is_throttled_too(alice):
    client = Client()
    url = reverse("admin:login")
    for n in range(10):
        client.post(url, {"username": "alice", "password": f"wrong-{n}"}, REMOTE_ADDR="192.0.2.9")
    answer = client.post(url, {"username": "alice", "password": "the-right-password"})
    assert answer.status_code == 429


def test_the_test_clients_logins_and_api_tokens_still_work(alice, client):
    assert client.login(username="alice", password="the-right-password") is True
    assert client.get(reverse("home")).status_code == 200
    other = Client()
    other.force_login(alice)
    assert other.get(reverse("home")).status_code == 200
    # A locked-out user name does not stop its API tokens: they are not logins.
    for n in range(10):
        _login(Client(), "alice", f"wrong-{n}")
    secret = api_token_create(user=alice, name="script").secret
    answer = Client().get("/api/v1/host-mappings", headers={"Authorization": f"Bearer {secret}"})
    assert (answer.status_code, answer.json()) == (
        404,
        {"detail": "Only staff and team leads maintain host mappings."},
    )
