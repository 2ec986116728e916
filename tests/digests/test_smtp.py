"""A digest sent through a real SMTP server on loopback (aiosmtpd, started by the test), read
back as the server received it."""

import email
import email.policy
import re
import socket
from urllib.parse import urlsplit

import pytest
from aiosmtpd.controller import Controller
from django.test import Client

from apps.digests.models import Frequency, Subscription
from apps.digests.services import digests_send

from .conftest import SEND_AT

pytestmark = pytest.mark.django_db


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Inbox:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's name)
        self.messages.append((envelope.rcpt_tos, envelope.content))
        return "250 Message accepted for delivery"


@pytest.fixture
def smtp_server(settings):
    inbox = Inbox()
    port = free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    yield inbox
    controller.stop()


def test_a_digest_arrives_through_smtp_with_both_parts_and_working_links(
    world, subscribed_lead, smtp_server, client
):
    (result,) = digests_send(now=SEND_AT, frequency=Frequency.WEEKLY)

    assert result.status == "sent"
    ((recipients, raw),) = smtp_server.messages
    assert recipients == ["lena-lead@example.com"]
    message = email.message_from_bytes(raw, policy=email.policy.default)
    # A long non-ASCII subject is folded as encoded words; unfolding leaves a leading space.
    assert message["Subject"].strip() == (
        "Weekly costs digest, 10 Mar–16 Mar 2025: $18.25 was wasted last week; "
        "55% of it is one finding, Idle GPU on i-u."
    )
    assert message["To"] == "lena-lead@example.com"
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    unsubscribe = re.fullmatch(
        r"<(http://127\.0\.0\.1:8000/digests/unsubscribe/[^>]+/)>",
        message["List-Unsubscribe"].strip(),
    )
    assert unsubscribe, message["List-Unsubscribe"]
    assert message.get_content_type() == "multipart/alternative"
    text = message.get_body(preferencelist=("plain",)).get_content()
    html = message.get_body(preferencelist=("html",)).get_content()
    assert "$18.25 wasted in the period, counted once, in 5 findings." in text
    assert '<strong id="wasted">$18.25</strong>' in html
    assert "<script" not in html.lower()

    # Every link of both parts opens a page the recipient may see.
    links = set(re.findall(r'href="([^"]+)"', html)) | set(re.findall(r"https?://\S+", text))
    links = {link.replace("&amp;", "&") for link in links}
    assert len(links) >= 8
    recipient = Client()
    recipient.force_login(subscribed_lead)
    for link in sorted(links):
        parts = urlsplit(link)
        assert (parts.scheme, parts.netloc) == ("http", "127.0.0.1:8000"), link
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        who = client if "/unsubscribe/" in path else recipient  # that one needs no login
        assert who.get(path).status_code == 200, link

    # The one-click unsubscribe (RFC 8058): a POST without a session, from the mail client.
    answer = client.post(urlsplit(unsubscribe.group(1)).path, {"List-Unsubscribe": "One-Click"})
    assert answer.status_code == 200
    assert Subscription.objects.get(user=subscribed_lead).active is False
