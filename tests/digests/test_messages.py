"""A digest's MIME message is generated once for all its readers and filled in per recipient
(emails.MessageTemplate): what each recipient gets is the message Django generates for them, and
where filling in could not be exact the message is generated for that recipient alone."""

import email
import email.policy
from datetime import date

import pytest
from django.core.mail import EmailMultiAlternatives
from django.core.mail.message import sanitize_address
from django.urls import reverse

from apps.digests import selectors, services
from apps.digests.emails import (
    FilledEmail,
    MessageTemplate,
    absolute,
    address_for_header,
    unsubscribe_token,
    unsubscribe_url,
)
from apps.digests.models import Subscription
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

START, END = date(2025, 3, 10), date(2025, 3, 17)


def parsed(message: EmailMultiAlternatives):
    return email.message_from_bytes(
        message.message().as_bytes(linesep="\r\n"), policy=email.policy.default
    )


def generated(message: EmailMultiAlternatives):
    """The message as Django generates it for this recipient, not filled in."""
    plain = EmailMultiAlternatives(
        subject=message.subject,
        body=message.body,
        from_email=message.from_email,
        to=message.to,
        headers=message.extra_headers,
    )
    plain.attach_alternative(*message.alternatives[0])
    data = plain.message().as_bytes(linesep="\r\n")
    return email.message_from_bytes(data, policy=email.policy.default)


def same(filled, plain) -> None:
    names = ["Subject", "From", "To", "Message-ID", "List-Unsubscribe", "List-Unsubscribe-Post"]
    # Django folds a long header onto a line of its own: the same value, unfolded.
    assert [filled[name].strip() for name in names] == [plain[name].strip() for name in names]
    assert filled["Date"] is not None
    assert [
        (part.get_content_type(), part["Content-Transfer-Encoding"], part.get_content())
        for part in filled.iter_parts()
    ] == [
        (part.get_content_type(), part["Content-Transfer-Encoding"], part.get_content())
        for part in plain.iter_parts()
    ]


def test_every_reader_gets_the_message_django_generates_for_them(world, lead, team):
    readers = [
        lead,
        UserFactory(
            username="zoe", first_name="Zoë", last_name="<Ünal> & Co", email="z@example.com"
        ),
    ]
    MembershipFactory(team=team, user=readers[1], role="lead")
    subscriptions = [Subscription.objects.create(user=user) for user in readers]
    rendered: dict = {}
    digest = selectors.digest_build(
        subscription=subscriptions[0], period_start=START, period_end=END
    )

    messages = [
        services.digest_message(subscription=s, digest=digest, rendered=rendered)
        for s in subscriptions
    ]

    assert [type(m) for m in messages] == [FilledEmail, FilledEmail]
    for message in messages:
        same(parsed(message), generated(message))
    text = parsed(messages[1]).get_body(preferencelist=("plain",)).get_content()
    html = parsed(messages[1]).get_body(preferencelist=("html",)).get_content()
    assert "Weekly digest for Zoë <Ünal> & Co, 10 Mar 2025" in text
    assert "digest for Zoë &lt;Ünal&gt; &amp; Co ·" in html
    assert parsed(messages[0])["Message-ID"] != parsed(messages[1])["Message-ID"]


def template(html: str = "<p>Hello @@name@@ · see @@url@@</p>\n") -> MessageTemplate:
    return MessageTemplate(
        subject="A digest – of last week",
        text="Hello @@name@@ — see @@url@@\n",
        html=html,
        headers={"List-Unsubscribe": "<@@url@@>"},
        marks=("@@name@@", "@@url@@"),
    )


def fill(mime: MessageTemplate, name: str, url: str = "http://x/u/"):
    return mime.fill(
        to="a@example.com",
        date="Mon, 17 Mar 2025 08:00:00 -0000",
        message_id="<1@example.com>",
        values={"@@name@@": name, "@@url@@": url},
    )


def test_what_cannot_be_filled_in_exactly_is_left_to_be_generated():
    assert fill(template(), "Zoë").count(b"Zo\xc3\xab") == 2
    # A value with a line break (a header injection), a non-ASCII header value, a line longer
    # than RFC 5322 allows once filled in.
    assert fill(template(), "Zoë\nBcc: x@example.com") is None
    assert fill(template(), "Zoë", url="http://x/ü/") is None
    assert fill(template(), "Z" * 990) is None
    # An HTML line over 998 bytes goes quoted-printable, which the marks do not survive as such.
    assert template("<p>" + "x" * 1000 + " @@name@@</p>").usable is False
    ascii_only = MessageTemplate(
        subject="s", text="Hi @@name@@\n", html="<p>@@name@@</p>\n", headers={}, marks=("@@name@@",)
    )
    assert fill(ascii_only, "Zoe") is not None
    assert fill(ascii_only, "Zoë") is None  # its parts are 7bit


def test_a_message_that_cannot_be_filled_in_is_generated_for_its_recipient(world, lead):
    lead.first_name = "Lena\r\nBcc: evil@example.com"
    lead.save()
    subscription = Subscription.objects.create(user=lead)
    digest = selectors.digest_build(subscription=subscription, period_start=START, period_end=END)

    message = services.digest_message(subscription=subscription, digest=digest)

    assert type(message) is EmailMultiAlternatives
    assert "Lena\r\nBcc: evil@example.com" in message.body
    assert parsed(message)["Bcc"] is None


@pytest.mark.parametrize(
    "address",
    ["lena-lead@example.com", "a.b+c_d@mail.example.co.uk", "Zoë@example.com", "a b@example.com"],
)
def test_an_address_is_written_in_the_to_header_as_django_writes_it(address):
    assert address_for_header(address) == sanitize_address(address, "utf-8")


def test_the_unsubscribe_url_reversed_once_is_the_one_reversed_for_each(lead):
    token = unsubscribe_token(user=lead)

    assert unsubscribe_url(user=lead) == absolute(
        reverse("digest_unsubscribe", kwargs={"token": token})
    )
