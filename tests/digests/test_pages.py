"""The digest settings page, the preview of the next digest, the unsubscribe link, and alerts on
the project page."""

from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.core import mail
from django.test import Client

from apps.digests.emails import unsubscribe_token
from apps.digests.models import Subscription
from apps.digests.services import digests_send

from .conftest import SEND_AT

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_member_subscribes_daily_to_one_project_with_a_minimum(member, project):
    response = client_for(member).post(
        "/digests/",
        {"active": "on", "frequency": "daily", "projects": [project.pk], "minimum_amount": "25"},
    )

    assert response.status_code == 302
    subscription = Subscription.objects.get(user=member)
    assert (subscription.active, subscription.frequency, subscription.minimum_amount) == (
        True,
        "daily",
        Decimal("25.00"),
    )
    assert list(subscription.projects.all()) == [project]


def test_nobody_may_subscribe_to_a_project_they_cannot_see(outsider, project):
    response = client_for(outsider).post(
        "/digests/",
        {"active": "on", "frequency": "weekly", "projects": [project.pk], "minimum_amount": "0"},
    )

    assert response.status_code == 200
    assert f"Select a valid choice. {project.pk} is not one of the available choices." in (
        response.content.decode()
    )
    assert not Subscription.objects.get(user=outsider).projects.exists()


def test_the_preview_is_the_next_digest_exactly_as_mailed(world, lead):
    Subscription.objects.create(user=lead)
    with time_machine.travel(SEND_AT, tick=False):
        html = client_for(lead).get("/digests/preview/").content.decode()
        text = client_for(lead).get("/digests/preview/?part=text").content.decode()
        digests_send(now=SEND_AT, frequency="weekly")

    (message,) = mail.outbox
    token = unsubscribe_token(user=lead)

    # The unsubscribe link is signed at each rendering (its timestamp); the rest is identical.
    def same(body):
        import re

        return re.sub(r"/digests/unsubscribe/[^/]+/", "/digests/unsubscribe/T/", body)

    assert token
    assert same(html) == same(message.alternatives[0][0])
    assert same(text) == same(message.body)


def test_the_unsubscribe_link_works_without_logging_in(lead):
    Subscription.objects.create(user=lead)
    url = f"/digests/unsubscribe/{unsubscribe_token(user=lead)}/"

    page = Client().get(url)
    assert page.status_code == 200
    assert Subscription.objects.get(user=lead).active is True  # a GET changes nothing
    done = Client().post(url)

    assert done.status_code == 200
    assert "You will get no more digests." in done.content.decode()
    assert Subscription.objects.get(user=lead).active is False


def test_a_forged_or_expired_unsubscribe_link_is_refused(lead):
    Subscription.objects.create(user=lead)
    token = unsubscribe_token(user=lead)

    forged = Client().post(f"/digests/unsubscribe/{token[:-2]}xx/")
    with time_machine.travel(timedelta(days=91)):
        expired = Client().post(f"/digests/unsubscribe/{token}/")

    assert (forged.status_code, expired.status_code) == (400, 400)
    assert "not valid or has expired" in expired.content.decode()
    assert Subscription.objects.get(user=lead).active is True
