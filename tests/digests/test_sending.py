"""Sending digests: what a lead's digest says, one email per recipient and period whatever runs
twice, failures that certainly did not send retried, unknown outcomes left for a person."""

import json
import threading
from datetime import date
from decimal import Decimal
from io import StringIO

import pytest
from django.core import mail
from django.core.management import call_command

from apps.accounts.models import Membership
from apps.digests.models import Delivery, Frequency, Subscription
from apps.digests.services import digests_dry_run, digests_send
from apps.digests.tasks import digests_send_task
from apps.insights.models import Finding
from tests.factories import MembershipFactory

from .conftest import SEND_AT, RefusingBackend

pytestmark = pytest.mark.django_db


def found(subject: str, kind: str) -> int:
    return Finding.objects.get(subject_key=subject, kind=kind).pk


def weekly(**kwargs):
    return digests_send(now=SEND_AT, frequency=Frequency.WEEKLY, **kwargs)


def test_a_leads_weekly_digest_says_what_the_week_spent_and_wasted(world, subscribed_lead):
    (result,) = weekly()

    assert result.as_json() == {
        "recipient": "lena-lead@example.com",
        "period_start": "2025-03-10",
        "period_end": "2025-03-17",
        "status": "sent",
        "findings": 5,
        "wasted": {"USD": "18.25"},
    }
    (message,) = mail.outbox
    assert message.subject == (
        "Weekly costs digest, 10 Mar–16 Mar 2025: $18.25 was wasted last week; "
        "55% of it is one finding, Idle GPU on i-u."
    )
    text = message.body
    assert "Data as of 10 Mar 2025 16:00 UTC." in text
    assert "spend is compared over the 1 day it covers, not read as a drop" in text
    assert "$126.00 in the period, nothing the period before." in text
    assert "- Image ranking (Vision): $126.00, was $0.00" in text
    assert (
        "- Image ranking: $126.00 of $10,000.00, forecast $390.60 at month end (on track)" in text
    )
    assert "$18.25 wasted in the period, counted once, in 5 findings." in text
    assert "1. Unattributed spend: i-u — $20.00 unattributed\n" in text
    assert (
        "3. Idle GPU: i-u — $10.00 wasted, saves about $10.00 a month\n"
        "   GPU idle 50% of 1 billed hours\n"
        "   Owner: nobody (unattributed)\n"
        f"   http://127.0.0.1:8000/waste/{found('i-u', 'idle_gpu')}/\n"
    ) in text
    assert "- resnet (Image ranking): +$112.00 to $112.00" in text
    # Counted as the unattributed page counts it: $18.00 of it names no resource.
    assert (
        "$38.00 nobody claimed (23% of all spend); 1 resource to assign, and $18.00 on lines "
        "without a resource id (transfer, fees): a rule on the service or account claims those."
    ) in text
    html = message.alternatives[0][0]
    assert '<strong id="wasted">$18.25</strong>' in html
    assert "<script" not in html


def test_a_member_sees_the_teams_projects_but_no_unattributed_spend(world, member):
    Subscription.objects.create(user=member)

    (result,) = weekly()

    assert (result.status, result.wasted) == ("sent", {"USD": "8.25"})
    assert "nobody claimed" not in mail.outbox[0].body


def test_the_same_period_twice_sends_one_email(world, subscribed_lead):
    first = weekly()
    second = weekly()

    assert [r.status for r in first + second] == ["sent", "skipped_already_sent"]
    assert len(mail.outbox) == 1
    assert Delivery.objects.get().attempts == 1


def test_a_retried_task_sends_one_email(world, subscribed_lead):
    digests_send_task.apply(kwargs={"frequency": "weekly", "now": SEND_AT.isoformat()})
    digests_send_task.apply(kwargs={"frequency": "weekly", "now": SEND_AT.isoformat()})

    assert len(mail.outbox) == 1


@pytest.mark.django_db(transaction=True)
def test_two_workers_at_once_send_one_email_each(world, subscribed_lead, settings):
    others = [
        MembershipFactory(team=subscribed_lead.memberships.get().team, role=role).user
        for role in (Membership.Role.LEAD, Membership.Role.MEMBER, Membership.Role.MEMBER)
    ]
    for user in others[1:]:
        Subscription.objects.create(user=user)
    start = threading.Barrier(2)
    results, errors = [], []

    def worker():
        from django.db import connection

        try:
            start.wait()
            results.extend(weekly())
        except Exception as error:  # reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    recipients = sorted(message.to[0] for message in mail.outbox)
    # The other lead is subscribed by the first run (weekly, unless they opted out).
    assert recipients == sorted(u.email for u in [subscribed_lead, *others])
    assert sorted(r.status for r in results).count("sent") == 4
    assert Delivery.objects.filter(status="sent").count() == 4


def test_one_refused_address_does_not_stop_the_others(world, subscribed_lead, member, settings):
    settings.EMAIL_BACKEND = "tests.digests.conftest.RefusingBackend"
    RefusingBackend.refused = {subscribed_lead.email}
    Subscription.objects.create(user=member)

    results = weekly()

    assert [(r.recipient, r.status) for r in results] == [
        ("lena-lead@example.com", "failed"),
        ("max-member@example.com", "sent"),
    ]
    refused = Delivery.objects.get(user=subscribed_lead)
    assert (refused.permanent, refused.error) == (
        True,
        "Recipient refused: {'lena-lead@example.com': (550, b'No such user')}",
    )
    assert [m.to for m in mail.outbox] == [["max-member@example.com"]]
    # Refused for good: the next run does not try it again.
    assert [r.status for r in weekly()] == ["failed", "skipped_already_sent"]
    RefusingBackend.refused = set()


def test_a_connection_lost_while_sending_is_unknown_and_never_retried(
    world, subscribed_lead, settings
):
    settings.EMAIL_BACKEND = "tests.digests.conftest.RefusingBackend"
    RefusingBackend.dropped = {subscribed_lead.email}

    (first,) = weekly()
    RefusingBackend.dropped = set()
    (second,) = weekly()

    assert (first.status, second.status) == ("unknown", "unknown")
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("unknown", 1)
    assert delivery.error.startswith("Connection lost while sending: SMTPServerDisconnected(")
    assert mail.outbox == []


def test_a_send_that_certainly_failed_is_tried_again_and_sent_once(
    world, subscribed_lead, settings
):
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", 9  # nothing listens: refused
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    (first,) = weekly()
    assert first.status == "failed" and first.retry
    assert Delivery.objects.get().error.startswith("Could not connect to the mail server:")

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    (second,) = weekly()
    (third,) = weekly()

    assert (second.status, third.status) == ("sent", "skipped_already_sent")
    assert Delivery.objects.get().attempts == 2
    assert len(mail.outbox) == 1


def test_a_period_with_nothing_to_report_sends_nothing(world, subscribed_lead):
    (result,) = digests_send(now=SEND_AT.replace(year=2024), frequency=Frequency.WEEKLY)

    assert (result.status, result.findings, result.wasted) == ("nothing_to_report", 0, {})
    assert mail.outbox == []


def test_every_lead_is_subscribed_weekly_unless_they_opted_out(world, lead, outsider):
    Subscription.objects.create(user=outsider, active=False)

    results = weekly()

    assert [r.recipient for r in results] == ["lena-lead@example.com"]
    assert Subscription.objects.get(user=lead).frequency == "weekly"
    assert Subscription.objects.get(user=outsider).active is False


def test_a_weekly_digest_covers_the_seven_days_before_and_a_daily_one_the_day_before(
    world, subscribed_lead, member
):
    Subscription.objects.create(user=member, frequency=Frequency.DAILY)

    results = digests_send(now=SEND_AT)  # a Monday: both are due

    assert [(r.recipient, r.period_start, r.period_end) for r in results] == [
        ("lena-lead@example.com", date(2025, 3, 10), date(2025, 3, 17)),
        ("max-member@example.com", date(2025, 3, 16), date(2025, 3, 17)),
    ]
    tuesday = digests_send(now=SEND_AT.replace(day=18))
    assert [(r.recipient, r.status) for r in tuesday] == [
        ("max-member@example.com", "nothing_to_report")
    ]


def test_findings_under_the_minimum_are_left_out(world, lead):
    Subscription.objects.create(user=lead, minimum_amount=Decimal("5.01"))

    (result,) = weekly()

    # Idle i-a (5.00) and i-b (3.25) are under it; idle i-u (10.00) and the two unattributed
    # findings (20.00, 15.00: listed, never counted as wasted) are not.
    assert (result.findings, result.wasted) == (3, {"USD": "10"})


def test_the_command_prints_one_json_object_per_delivery(world, subscribed_lead):
    out = StringIO()
    call_command(
        "digests_send", "--period", "weekly", "--now", "2025-03-17T08:00:00Z", "--json", stdout=out
    )
    call_command(
        "digests_send", "--period", "weekly", "--now", "2025-03-17T08:00:00", "--json", stdout=out
    )

    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["status"] for line in lines] == ["sent", "skipped_already_sent"]
    assert lines[0]["wasted"] == {"USD": "18.25"}
    assert len(mail.outbox) == 1


def test_a_batch_claim_takes_new_and_certainly_unsent_deliveries_and_no_other(db, team):
    from django.utils import timezone

    from apps.digests.services import deliveries_claim
    from tests.factories import UserFactory

    start, end = date(2025, 3, 10), date(2025, 3, 17)
    held = {
        "sent": {"status": "sent"},
        "retryable": {"status": "failed", "error": "Could not connect"},
        "refused": {"status": "failed", "permanent": True},
        "unknown": {"status": "unknown"},
        "sending": {"status": "sending"},
    }
    users = {name: UserFactory(username=name) for name in [*held, "new"]}
    for name, fields in held.items():
        Delivery.objects.create(
            user=users[name],
            email=f"old-{name}@example.com",
            frequency="weekly",
            period_start=start,
            period_end=end,
            claimed_at=timezone.now(),
            **fields,
        )
    subscriptions = [Subscription.objects.create(user=user) for user in users.values()]

    claimed = deliveries_claim(subscriptions=subscriptions, period_start=start, period_end=end)

    assert sorted(claimed) == sorted([users["new"].pk, users["retryable"].pk])
    rows = {
        d.user.username: (d.status, d.attempts, d.email, d.error) for d in Delivery.objects.all()
    }
    assert rows == {
        "sent": ("sent", 1, "old-sent@example.com", ""),
        "retryable": ("sending", 2, "retryable@example.com", ""),
        "refused": ("failed", 1, "old-refused@example.com", ""),
        "unknown": ("unknown", 1, "old-unknown@example.com", ""),
        "sending": ("sending", 1, "old-sending@example.com", ""),
        "new": ("sending", 1, "new@example.com", ""),
    }
    assert claimed[users["new"].pk].pk == Delivery.objects.get(user=users["new"]).pk


def test_deliveries_are_claimed_and_marked_in_one_statement_per_batch(
    world, subscribed_lead, member
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    Subscription.objects.create(user=member)

    with CaptureQueriesContext(connection) as queries:
        results = weekly()

    table = Delivery._meta.db_table
    statements = [query["sql"] for query in queries]
    assert [r.status for r in results] == ["sent", "sent"]
    assert sum(sql.startswith(f"INSERT INTO {table} ") for sql in statements) == 1
    assert sum(sql.startswith(f"UPDATE {table} ") for sql in statements) == 1
    assert sorted(Delivery.objects.values_list("status", flat=True)) == ["sent", "sent"]
    assert len(mail.outbox) == 2


def test_a_run_that_dies_before_marking_leaves_the_sent_delivery_sending_and_sends_it_never_again(
    world, subscribed_lead, monkeypatch
):
    from apps.digests import services

    def crash(deliveries):
        raise RuntimeError("the worker died")

    with monkeypatch.context() as patched:
        patched.setattr(services, "deliveries_mark", crash)
        with pytest.raises(RuntimeError, match="the worker died"):
            weekly()
    assert (len(mail.outbox), Delivery.objects.get().status) == (1, "sending")

    (again,) = weekly()

    assert again.status == "skipped_already_sent"
    assert len(mail.outbox) == 1
    assert Delivery.objects.get().status == "sending"


def test_the_readers_read_once_give_each_subscription_the_digest_key_of_its_own_queries(
    db, lead, member, outsider, project, django_assert_num_queries
):
    from apps.digests import selectors
    from tests.factories import ProjectFactory, StaffFactory

    ProjectFactory(team=project.team, name="Search", slug="search")
    subscriptions = [
        Subscription.objects.create(user=lead),
        Subscription.objects.create(user=member),
        Subscription.objects.create(user=outsider),
        Subscription.objects.create(user=StaffFactory(), minimum_amount=Decimal("5")),
    ]
    subscriptions[1].projects.set([project])
    due = list(selectors.subscriptions_due(frequency=Frequency.WEEKLY))
    period = {"period_start": date(2025, 3, 10), "period_end": date(2025, 3, 17)}
    own = [selectors.digest_view_key(subscription=s, **period) for s in due]

    with django_assert_num_queries(2):
        readers = selectors.readers_of(due)
        shared = [selectors.digest_view_key(subscription=s, readers=readers, **period) for s in due]

    assert shared == own
    assert [(key[4], len(key[5]), key[6]) for key in own] == [
        (True, 2, False),  # the lead: both team projects, unattributed spend
        (False, 1, True),  # the member chose one
        (True, 0, False),  # the other team's lead sees none of these projects
        (True, 2, False),  # staff: every project (the other team has none)
    ]


def test_a_dry_run_says_who_would_get_a_digest_and_sends_and_keeps_nothing(world, lead, member):
    Subscription.objects.create(user=member)

    dry = digests_dry_run(now=SEND_AT, frequency=Frequency.WEEKLY)

    # The lead has no subscription yet: the send would subscribe them, and so does the dry run,
    # for its own run only.
    assert [r.as_json() for r in dry] == [
        {
            "recipient": "max-member@example.com",
            "period_start": "2025-03-10",
            "period_end": "2025-03-17",
            "status": "would_send",
            "findings": 2,
            "wasted": {"USD": "8.25"},
        },
        {
            "recipient": "lena-lead@example.com",
            "period_start": "2025-03-10",
            "period_end": "2025-03-17",
            "status": "would_send",
            "findings": 5,
            "wasted": {"USD": "18.25"},
        },
    ]
    assert mail.outbox == []
    assert Delivery.objects.count() == 0
    assert not Subscription.objects.filter(user=lead).exists()
    # The send mails exactly those, with the same figures.
    sent = weekly()
    assert [(r.recipient, r.status, r.findings, r.wasted) for r in sent] == [
        (r.recipient, "sent", r.findings, r.wasted) for r in dry
    ]
    assert len(mail.outbox) == 2


def test_a_dry_run_after_a_send_says_what_the_next_send_would_do(
    world, subscribed_lead, member, settings
):
    Subscription.objects.create(user=member)
    settings.EMAIL_BACKEND = "tests.digests.conftest.RefusingBackend"
    RefusingBackend.dropped = {member.email}
    weekly()
    RefusingBackend.dropped = set()

    assert [(r.recipient, r.status) for r in digests_dry_run(now=SEND_AT)] == [
        ("lena-lead@example.com", "skipped_already_sent"),
        ("max-member@example.com", "unknown"),
    ]
    # A failure that certainly sent nothing would be tried again.
    Delivery.objects.filter(user=member).update(status="failed", permanent=False)
    Delivery.objects.filter(user=subscribed_lead).update(status="failed", permanent=True)
    assert [(r.recipient, r.status) for r in digests_dry_run(now=SEND_AT)] == [
        ("lena-lead@example.com", "failed"),
        ("max-member@example.com", "would_send"),
    ]
    assert len(mail.outbox) == 1


def test_the_commands_dry_run_prints_who_would_get_a_digest(world, subscribed_lead):
    out = StringIO()
    call_command(
        "digests_send",
        "--period",
        "weekly",
        "--now",
        "2025-03-17T08:00:00Z",
        "--dry-run",
        stdout=out,
    )
    call_command(
        "digests_send",
        "--period",
        "weekly",
        "--now",
        "2025-03-17T08:00:00Z",
        "--dry-run",
        "--json",
        stdout=out,
    )

    text, line = out.getvalue().splitlines()[:2], out.getvalue().splitlines()[2]
    assert text == [
        "lena-lead@example.com: would_send (2025-03-10 – 2025-03-17, 5 findings)",
        "1 deliveries (a dry run: nothing was sent).",
    ]
    assert json.loads(line) == {
        "recipient": "lena-lead@example.com",
        "period_start": "2025-03-10",
        "period_end": "2025-03-17",
        "status": "would_send",
        "findings": 5,
        "wasted": {"USD": "18.25"},
    }
    assert (mail.outbox, Delivery.objects.count()) == ([], 0)


def test_a_dry_run_on_a_monday_says_what_both_frequencies_would_send(
    world, subscribed_lead, member
):
    Subscription.objects.create(user=member, frequency=Frequency.DAILY)

    dry = digests_dry_run(now=SEND_AT)

    assert [(r.recipient, r.period_start, r.period_end, r.status) for r in dry] == [
        ("lena-lead@example.com", date(2025, 3, 10), date(2025, 3, 17), "would_send"),
        ("max-member@example.com", date(2025, 3, 16), date(2025, 3, 17), "nothing_to_report"),
    ]
    sent = digests_send(now=SEND_AT)
    assert [(r.recipient, r.period_start, r.status) for r in sent] == [
        ("lena-lead@example.com", date(2025, 3, 10), "sent"),
        ("max-member@example.com", date(2025, 3, 16), "nothing_to_report"),
    ]


def test_a_digest_that_fails_to_build_fails_in_the_dry_run_and_no_other(
    world, subscribed_lead, member, monkeypatch
):
    from apps.digests import selectors

    Subscription.objects.create(user=member, minimum_amount=Decimal("1"))
    build = selectors.digest_build

    def failing(*, subscription, **kwargs):
        if subscription.user == member:
            raise ValueError("no digest for max")
        return build(subscription=subscription, **kwargs)

    monkeypatch.setattr(selectors, "digest_build", failing)

    dry = digests_dry_run(now=SEND_AT, frequency=Frequency.WEEKLY)

    assert [(r.recipient, r.status) for r in dry] == [
        ("lena-lead@example.com", "would_send"),
        ("max-member@example.com", "failed"),
    ]
    assert (mail.outbox, Delivery.objects.count()) == ([], 0)
