"""Writes of the digests app: subscriptions, sending digests (each delivery claimed before it is
sent, so a retried task or a second worker never mails twice) and alerts (opened once, mailed
once, cleared when the condition ends)."""

import json
import logging
import smtplib
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from email.utils import formatdate, make_msgid
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import get_connection
from django.db import IntegrityError, transaction
from django.db import connection as db_connection
from django.db.models import Sum
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from apps.accounts.models import Membership, Organization
from apps.projects.models import Project
from apps.spend.filters import Period
from apps.spend.selectors import SpendScope, data_as_of, last_day_with_data, month_summary
from costsite.celery import task_enqueue_on_commit
from costsite.polling import STALE_AFTER

from . import selectors
from .emails import (
    MESSAGE_ID_MARK,
    MessageTemplate,
    absolute,
    address_for_header,
    email_build,
    email_message,
    email_render,
    unsubscribe_url,
)
from .models import Alert, Delivery, DigestSettings, Frequency, Subscription

logger = logging.getLogger(__name__)
ZERO = Decimal("0")


def _decimal_text(value: Decimal) -> str:
    """An exact decimal string without trailing zeros (18.2500 -> "18.25")."""
    text = format(value.normalize(), "f")
    return text if text != "-0" else "0"


# -- Subscriptions ---------------------------------------------------------------------------


def _leads_unsubscribed():
    """Active team leads with no subscription row at all (an opted-out lead has one, inactive)."""
    return (
        get_user_model()
        .objects.filter(
            is_active=True,
            memberships__role=Membership.Role.LEAD,
            digest_subscription__isnull=True,
        )
        .distinct()
    )


def subscriptions_ensure() -> int:
    """Subscribe every team lead who has no subscription yet, weekly, to all their projects.
    A lead who opted out keeps the row (inactive), so is never subscribed again."""
    created = 0
    for user in _leads_unsubscribed():
        _, made = Subscription.objects.get_or_create(user=user)
        created += made
    return created


def subscription_for(*, user) -> Subscription:
    """The person's subscription; a row (inactive for anyone but a lead) if there is none yet."""
    subscription = Subscription.objects.filter(user=user).first()
    if subscription is not None:
        return subscription
    is_lead = user.memberships.filter(role=Membership.Role.LEAD).exists()
    subscription, _ = Subscription.objects.get_or_create(user=user, defaults={"active": is_lead})
    return subscription


@transaction.atomic
def subscription_update(
    *,
    subscription: Subscription,
    active: bool,
    frequency: str,
    projects: list[Project],
    minimum_amount: Decimal,
) -> Subscription:
    subscription.active = active
    subscription.frequency = frequency
    subscription.minimum_amount = minimum_amount
    subscription.save()
    subscription.projects.set(projects)
    return subscription


def subscription_unsubscribe(*, user_id: int) -> bool:
    """Turn the person's digests off (the unsubscribe link); False if there is no such person."""
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None:
        return False
    subscription = subscription_for(user=user)
    Subscription.objects.filter(pk=subscription.pk).update(active=False, updated_at=timezone.now())
    return True


# -- Sending digests ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DeliveryResult:
    recipient: str
    period_start: date
    period_end: date
    status: str  # sent, skipped_already_sent, nothing_to_report, failed, unknown (would_send)
    findings: int
    wasted: dict[str, str]
    retry: bool = False  # failed, certainly not sent, and another try may work

    def as_json(self) -> dict:
        return {
            "recipient": self.recipient,
            "period_start": self.period_start.isoformat(),
            "period_end": self.period_end.isoformat(),
            "status": self.status,
            "findings": self.findings,
            "wasted": self.wasted,
        }


def frequencies_due(*, now: datetime) -> list[str]:
    """Daily digests every day; weekly ones on Mondays in the organisation's time zone."""
    local = now.astimezone(ZoneInfo(Organization.get().time_zone))
    return [Frequency.WEEKLY, Frequency.DAILY] if local.weekday() == 0 else [Frequency.DAILY]


# How many deliveries one statement claims, and one marks. A run that dies between claiming a
# batch and sending it leaves at most this many `sending` (never sent again by themselves); the
# claims and marks were two commits per delivery, a third of the sending's extra time.
CLAIM_BATCH = 25
MARK_BATCH = 25


def deliveries_claim(
    *, subscriptions: list[Subscription], period_start: date, period_end: date
) -> dict[int, Delivery]:
    """Claim the deliveries of `subscriptions` for the period, in two statements: insert their
    rows (`ON CONFLICT DO NOTHING`: the unique row per recipient and period stays the guarantee),
    then take over the rows whose earlier try certainly did not send (failed, not for good).
    Returns the claimed deliveries by user id; a subscription missing from it is someone else's,
    or done (sent, nothing to report, unknown)."""
    if not subscriptions:
        return {}
    table = Delivery._meta.db_table
    now = timezone.now()
    sending = Delivery.Status.SENDING
    columns = (
        "user_id, email, frequency, period_start, period_end, status, attempts, permanent, "
        "findings, wasted, message_id, error, claimed_at"
    )
    rows = ", ".join(
        ["(%s, %s, %s, %s, %s, %s, 1, false, 0, '{}'::jsonb, '', '', %s)"] * len(subscriptions)
    )
    params: list = []
    for subscription in subscriptions:
        user = subscription.user
        params += [
            user.pk,
            user.email,
            subscription.frequency,
            period_start,
            period_end,
            sending,
            now,
        ]
    emails = {subscription.user.pk: subscription.user.email for subscription in subscriptions}
    returning = "id, user_id, attempts"
    with transaction.atomic(), db_connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({columns}) VALUES {rows} "  # noqa: S608 (no input in the SQL)
            f"ON CONFLICT (user_id, period_start, period_end) DO NOTHING RETURNING {returning}",
            params,
        )
        claimed = {user_id: (pk, attempts) for pk, user_id, attempts in cursor.fetchall()}
        others = [user_id for user_id in emails if user_id not in claimed]
        if others:
            cursor.execute(
                f"UPDATE {table} SET status = %s, attempts = attempts + 1, "  # noqa: S608
                "claimed_at = %s, error = '', "
                "email = (CASE user_id " + " ".join(["WHEN %s THEN %s"] * len(others)) + " END) "
                "WHERE user_id = ANY(%s) AND period_start = %s AND period_end = %s "
                f"AND status = %s AND NOT permanent RETURNING {returning}",
                [
                    sending,
                    now,
                    *[value for user_id in others for value in (user_id, emails[user_id])],
                    others,
                    period_start,
                    period_end,
                    Delivery.Status.FAILED,
                ],
            )
            claimed.update({user_id: (pk, attempts) for pk, user_id, attempts in cursor.fetchall()})
    by_user = {subscription.user.pk: subscription for subscription in subscriptions}
    return {
        user_id: Delivery(
            pk=pk,
            user_id=user_id,
            email=emails[user_id],
            frequency=by_user[user_id].frequency,
            period_start=period_start,
            period_end=period_end,
            status=sending,
            attempts=attempts,
            claimed_at=now,
        )
        for user_id, (pk, attempts) in claimed.items()
    }


def _outcome(message, connection) -> tuple[str, str, bool]:
    """Send one message: (status, error, permanent). Only an answer from the server that refuses
    it, or a connection that never opened, is certain not to have sent it; a connection lost
    while sending may have delivered it, so it is `unknown`."""
    try:
        connection.open()
    except (smtplib.SMTPException, OSError) as error:
        return Delivery.Status.FAILED, f"Could not connect to the mail server: {error}", False
    try:
        connection.send_messages([message])
    except smtplib.SMTPRecipientsRefused as error:
        codes = [code for code, _text in error.recipients.values()]
        permanent = bool(codes) and all(code >= 500 for code in codes)
        return Delivery.Status.FAILED, f"Recipient refused: {error.recipients}", permanent
    except smtplib.SMTPResponseException as error:
        text = (
            error.smtp_error.decode(errors="replace")
            if isinstance(error.smtp_error, bytes)
            else error.smtp_error
        )
        return (
            Delivery.Status.FAILED,
            f"The mail server refused it: {error.smtp_code} {text}",
            error.smtp_code >= 500,
        )
    except (smtplib.SMTPException, OSError) as error:
        connection.close()  # the next message opens a fresh connection
        return Delivery.Status.UNKNOWN, f"Connection lost while sending: {error!r}", False
    return Delivery.Status.SENT, "", False


# What differs between two readers of the same digest: rendered once per digest with these marks
# in their place, then filled in per recipient (rendering was half a run's time on the benchmark).
RECIPIENT_NAME = "@@recipient-name@@"
UNSUBSCRIBE_URL = "@@unsubscribe-url@@"


def digest_context(*, digest: selectors.Digest) -> dict:
    return {
        "digest": digest,
        "recipient_name": RECIPIENT_NAME,
        "base_url": absolute(""),
        "unsubscribe_url": UNSUBSCRIBE_URL,
        "settings_url": absolute(reverse("digest_settings")),
        "waste_url": absolute(
            reverse("waste") + f"?start={digest.period_start}&end={digest.period_end}&status=active"
        ),
        "unattributed_url": absolute(reverse("unattributed")),
    }


def digest_render(
    *, subscription: Subscription, digest: selectors.Digest, rendered: dict | None = None
) -> tuple[str, str, str, str]:
    """(subject, text, HTML, unsubscribe URL) of `digest` for the subscription's person.
    `rendered` keeps each digest's templates rendered once for all its readers."""
    rendered = {} if rendered is None else rendered
    if id(digest) not in rendered:
        rendered[id(digest)] = (digest, email_render("digest", digest_context(digest=digest)))
    subject, text, html = rendered[id(digest)][1]
    user = subscription.user
    name = user.get_full_name() or user.username
    url = unsubscribe_url(user=user)
    text = text.replace(RECIPIENT_NAME, name).replace(UNSUBSCRIBE_URL, url)
    html = html.replace(RECIPIENT_NAME, escape(name)).replace(UNSUBSCRIBE_URL, escape(url))
    return subject, text, html, url


# The HTML part's and the List-Unsubscribe header's own marks: their values are written apart
# (escaped, in angle brackets) in a message generated once per digest (emails.MessageTemplate).
HTML_RECIPIENT_NAME = "@@recipient-name-html@@"
HTML_UNSUBSCRIBE_URL = "@@unsubscribe-url-html@@"
HEADER_UNSUBSCRIBE_URL = "@@unsubscribe-url-header@@"


def _headers(*, message_id: str, url: str) -> dict[str, str]:
    return {
        "Message-ID": message_id,
        # RFC 8058: one click (a POST from the mail client) unsubscribes, no login needed.
        "List-Unsubscribe": f"<{url}>",
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    }


def _message_template(*, digest: selectors.Digest, rendered: dict) -> MessageTemplate:
    """The digest's MIME message with marks for its reader, generated once for all of them."""
    key = ("mime", id(digest))
    if key not in rendered:
        subject, text, html = rendered[id(digest)][1]
        headers = _headers(message_id=MESSAGE_ID_MARK, url=HEADER_UNSUBSCRIBE_URL)
        del headers["Message-ID"]  # the template's own mark
        rendered[key] = MessageTemplate(
            subject=subject,
            text=text,
            html=html.replace(RECIPIENT_NAME, HTML_RECIPIENT_NAME).replace(
                UNSUBSCRIBE_URL, HTML_UNSUBSCRIBE_URL
            ),
            headers=headers,
            marks=(
                RECIPIENT_NAME,
                UNSUBSCRIBE_URL,
                HTML_RECIPIENT_NAME,
                HTML_UNSUBSCRIBE_URL,
                HEADER_UNSUBSCRIBE_URL,
            ),
        )
    return rendered[key]


def digest_message(
    *,
    subscription: Subscription,
    digest: selectors.Digest,
    connection=None,
    rendered: dict | None = None,
):
    """The recipient's email. Its MIME message is the digest's, generated once for all its
    readers and filled in (`emails.MessageTemplate`), or generated for this one recipient where
    it cannot be filled in exactly."""
    rendered = {} if rendered is None else rendered
    subject, text, html, url = digest_render(
        subscription=subscription, digest=digest, rendered=rendered
    )
    user = subscription.user
    domain = user.email.rpartition("@")[2] or "localhost"
    message_id = make_msgid("digest", domain=domain)
    name = user.get_full_name() or user.username
    filled = _message_template(digest=digest, rendered=rendered).fill(
        to=address_for_header(user.email),
        date=formatdate(localtime=settings.EMAIL_USE_LOCALTIME),
        message_id=message_id,
        values={
            RECIPIENT_NAME: name,
            UNSUBSCRIBE_URL: url,
            HTML_RECIPIENT_NAME: escape(name),
            HTML_UNSUBSCRIBE_URL: escape(url),
            HEADER_UNSUBSCRIBE_URL: url,
        },
    )
    return email_build(
        subject=subject,
        text=text,
        html=html,
        to=[user.email],
        connection=connection,
        headers=_headers(message_id=message_id, url=url),
        filled=filled,
    )


def _result(delivery: Delivery, status: str | None = None) -> DeliveryResult:
    return DeliveryResult(
        recipient=delivery.email,
        period_start=delivery.period_start,
        period_end=delivery.period_end,
        status=status or delivery.status,
        findings=delivery.findings,
        wasted=delivery.wasted,
        retry=delivery.status == Delivery.Status.FAILED and not delivery.permanent,
    )


@dataclass
class _Prepared:
    """A claimed delivery with its digest and message, waiting for the SMTP answer."""

    delivery: Delivery
    digest: selectors.Digest | None
    message: object | None
    outcome: tuple[str, str, bool] | None = None  # set when nothing is to be sent


def _delivery_prepare(
    *,
    subscription: Subscription,
    delivery: Delivery,
    period_start: date,
    period_end: date,
    built: dict,
    readers: selectors.Readers | None = None,
) -> _Prepared:
    """Build the message of a claimed delivery; an outcome already set when there is nothing to
    send."""
    try:
        key = selectors.digest_view_key(
            subscription=subscription,
            period_start=period_start,
            period_end=period_end,
            readers=readers,
        )
        digest = built.get(key)
        if digest is None:
            digest = built[key] = selectors.digest_build(
                subscription=subscription,
                period_start=period_start,
                period_end=period_end,
                shared=built,
                readers=readers,
            )
        if digest.is_empty:
            return _Prepared(delivery, digest, None, (Delivery.Status.NOTHING_TO_REPORT, "", False))
        message = digest_message(
            subscription=subscription, digest=digest, rendered=built.setdefault("rendered", {})
        )
        return _Prepared(delivery, digest, message)
    except Exception as error:  # nothing went out: safe to try again
        logger.exception("Building the digest of %s failed", subscription.user)
        return _Prepared(delivery, None, None, (Delivery.Status.FAILED, repr(error), False))


def _not_claimed(
    *, subscriptions: list[Subscription], period_start: date, period_end: date
) -> dict[int, DeliveryResult]:
    """What became of the deliveries someone else holds or that are done, by user id."""
    if not subscriptions:
        return {}
    return {
        existing.user_id: _held_result(existing)
        for existing in Delivery.objects.filter(
            user__in=[subscription.user_id for subscription in subscriptions],
            period_start=period_start,
            period_end=period_end,
        )
    }


def _held_result(existing: Delivery) -> DeliveryResult:
    """The result of a delivery this run did not claim: an outcome to look at (unknown, failed
    for good) as it is, anything else sent or being sent by someone else."""
    done = {Delivery.Status.UNKNOWN, Delivery.Status.FAILED}
    return _result(existing, None if existing.status in done else "skipped_already_sent")


def _delivery_finish(prepared: _Prepared, outcome: tuple[str, str, bool]) -> DeliveryResult:
    """Set on the delivery what happened to it (written by `deliveries_mark`)."""
    status, text, permanent = outcome
    delivery, digest, message = prepared.delivery, prepared.digest, prepared.message
    delivery.status, delivery.error, delivery.permanent = status, text, permanent
    delivery.sent_at = timezone.now() if status == Delivery.Status.SENT else None
    if digest is not None:
        delivery.findings = digest.findings_count
        delivery.wasted = {
            currency: _decimal_text(amount) for currency, amount in digest.wasted.items()
        }
    if message is not None:
        delivery.message_id = message.extra_headers["Message-ID"]
    return _result(delivery)


def deliveries_mark(deliveries: list[Delivery]) -> None:
    """Write what happened to claimed deliveries, in one UPDATE: only rows still `sending` (the
    claim is this run's) change. Called after the SMTP server answered for each of them; a run
    that dies before it leaves them `sending`, which nobody resends by itself."""
    if not deliveries:
        return
    table = Delivery._meta.db_table
    row = "(%s::bigint, %s, %s, %s::boolean, %s::timestamptz, %s::integer, %s::jsonb, %s)"
    params: list = []
    for delivery in deliveries:
        params += [
            delivery.pk,
            delivery.status,
            delivery.error,
            delivery.permanent,
            delivery.sent_at,
            delivery.findings,
            json.dumps(delivery.wasted),
            delivery.message_id,
        ]
    with db_connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS delivery SET status = mark.status, error = mark.error, "  # noqa: S608
            "permanent = mark.permanent, sent_at = mark.sent_at, findings = mark.findings, "
            "wasted = mark.wasted, message_id = mark.message_id "
            f"FROM (VALUES {', '.join([row] * len(deliveries))}) "
            "AS mark (id, status, error, permanent, sent_at, findings, wasted, message_id) "
            "WHERE delivery.id = mark.id AND delivery.status = %s",
            [*params, Delivery.Status.SENDING],
        )


# How many SMTP connections a run sends over at once, each in a thread of its own with its own
# Django email connection. One connection was what the run waited for: a message is four round
# trips to the server, and each time the sending thread woke up it waited for the thread building
# the next digests to hand over the interpreter (up to its switch interval, 5 ms), about 26 ms a
# message; several threads wait at once.
SMTP_CONNECTIONS = 4
# How many messages may wait for the SMTP threads while the next ones are built.
SEND_AHEAD = 20


class _Connections:
    """One email connection per sending thread (`get_connection()` each, as Django's backends
    are made to be used), or the one connection the caller passed for all of them; all closed
    together at the end of the run."""

    def __init__(self, given=None) -> None:
        self.given = given
        self.local = threading.local()
        self.opened: list = []
        self.lock = threading.Lock()

    @property
    def threads(self) -> int:
        return 1 if self.given is not None else SMTP_CONNECTIONS

    def current(self):
        if self.given is not None:
            return self.given
        connection = getattr(self.local, "connection", None)
        if connection is None:
            connection = self.local.connection = get_connection()
            with self.lock:
                self.opened.append(connection)
        return connection

    def send(self, message) -> tuple[str, str, bool]:
        return _outcome(message, self.current())

    def close(self) -> None:
        for connection in [self.given] if self.given is not None else self.opened:
            try:
                connection.close()
            except (smtplib.SMTPException, OSError):
                logger.warning("Closing a mail server connection failed", exc_info=True)


def digests_send(
    *, now: datetime | None = None, frequency: str | None = None, connection=None
) -> list[DeliveryResult]:
    """Send the digests due at `now` (or those of one frequency): one per subscriber and period,
    whatever ran before. One bad address stops no other.

    Deliveries are claimed `CLAIM_BATCH` at a time (one statement), built and marked here
    `MARK_BATCH` at a time (one statement, once the SMTP server answered for each); up to
    `SMTP_CONNECTIONS` threads of their own talk to the SMTP server, each over its own connection
    (one thread when the caller passes a `connection`), so the server's round trips overlap one
    another and the next digests' work rather than adding to it. They touch no database.
    """
    now = now or timezone.now()
    today = now.astimezone(ZoneInfo("UTC")).date()
    subscriptions_ensure()
    connections = _Connections(connection)
    built: dict = {}
    results: list[DeliveryResult | None] = []
    waiting: deque = deque()
    finished: list[Delivery] = []

    def mark(at_least: int) -> None:
        if len(finished) >= at_least:
            deliveries_mark(finished)
            finished.clear()

    def finish(index: int, prepared: _Prepared, outcome: tuple[str, str, bool]) -> None:
        results[index] = _delivery_finish(prepared, outcome)
        finished.append(prepared.delivery)
        mark(MARK_BATCH)

    def finish_oldest() -> None:
        index, prepared, answer = waiting.popleft()
        finish(index, prepared, answer.result())

    try:
        with ThreadPoolExecutor(
            max_workers=connections.threads, thread_name_prefix="digests-smtp"
        ) as smtp:
            for due in [frequency] if frequency else frequencies_due(now=now):
                start, end = selectors.period_of(frequency=due, day=today)
                due_now = list(selectors.subscriptions_due(frequency=due))
                readers = selectors.readers_of(due_now)
                for first in range(0, len(due_now), CLAIM_BATCH):
                    batch = due_now[first : first + CLAIM_BATCH]
                    claimed = deliveries_claim(
                        subscriptions=batch, period_start=start, period_end=end
                    )
                    others = _not_claimed(
                        subscriptions=[s for s in batch if s.user_id not in claimed],
                        period_start=start,
                        period_end=end,
                    )
                    for subscription in batch:
                        results.append(others.get(subscription.user_id))
                        delivery = claimed.get(subscription.user_id)
                        if delivery is None:
                            continue
                        prepared = _delivery_prepare(
                            subscription=subscription,
                            delivery=delivery,
                            period_start=start,
                            period_end=end,
                            built=built,
                            readers=readers,
                        )
                        if prepared.outcome is not None:
                            finish(len(results) - 1, prepared, prepared.outcome)
                        else:
                            answer = smtp.submit(connections.send, prepared.message)
                            waiting.append((len(results) - 1, prepared, answer))
                        while waiting and (waiting[0][2].done() or len(waiting) > SEND_AHEAD):
                            finish_oldest()
            while waiting:
                finish_oldest()
    finally:
        try:
            mark(1)  # whatever the SMTP server answered for, even when the run is failing
        finally:
            connections.close()
    return [result for result in results if result is not None]


WOULD_SEND = "would_send"


def digests_dry_run(
    *, now: datetime | None = None, frequency: str | None = None
) -> list[DeliveryResult]:
    """What `digests_send` would do at `now`, without claiming, sending or keeping anything: each
    due recipient's result, `would_send` where the send would mail them. Every message that would
    go out is built and generated to its MIME bytes as the send generates it, so a digest that
    fails to build fails here as it would there.

    Leads with no subscription yet would be subscribed by the send: their subscriptions are made
    for the dry run in a transaction rolled back at its end (which holds their rows, and on
    SQLite the database, until then; a database error there fails the recipients after it).
    Once every lead has a subscription, the dry run only reads, outside any transaction."""
    if not _leads_unsubscribed().exists():
        return _dry_run(now=now, frequency=frequency)
    with transaction.atomic():
        subscriptions_ensure()
        results = _dry_run(now=now, frequency=frequency)
        transaction.set_rollback(True)
    return results


def _dry_run(*, now: datetime | None, frequency: str | None) -> list[DeliveryResult]:
    now = now or timezone.now()
    today = now.astimezone(ZoneInfo("UTC")).date()
    results: list[DeliveryResult] = []
    built: dict = {}
    for due in [frequency] if frequency else frequencies_due(now=now):
        start, end = selectors.period_of(frequency=due, day=today)
        due_now = list(selectors.subscriptions_due(frequency=due))
        readers = selectors.readers_of(due_now)
        # What an earlier run settled: a failure certainly unsent is tried again.
        held = {
            delivery.user_id: delivery
            for delivery in Delivery.objects.filter(period_start=start, period_end=end).exclude(
                status=Delivery.Status.FAILED, permanent=False
            )
        }
        for subscription in due_now:
            existing = held.get(subscription.user_id)
            if existing is not None:
                results.append(_held_result(existing))
                continue
            user = subscription.user
            delivery = Delivery(
                user_id=user.pk,
                email=user.email,
                frequency=subscription.frequency,
                period_start=start,
                period_end=end,
                status=Delivery.Status.SENDING,
            )
            prepared = _delivery_prepare(
                subscription=subscription,
                delivery=delivery,
                period_start=start,
                period_end=end,
                built=built,
                readers=readers,
            )
            outcome = prepared.outcome
            if outcome is None:
                prepared.message.message().as_bytes(linesep="\r\n")
                outcome = (WOULD_SEND, "", False)
            results.append(_delivery_finish(prepared, outcome))
    return results


# A delivery claimed this long ago and still sending was left by a worker that died: sending one
# takes seconds (the one rule of every tracked run, costsite/polling.py).
DELIVERY_STALE_AFTER = STALE_AFTER
UNKNOWN_AFTER_STOP = (
    "The worker sending it stopped (killed, or lost its database) before it recorded the "
    "outcome: it may have been sent. Look for it in the mail server's log before sending it again."
)


def deliveries_reap(*, now: datetime | None = None) -> list[Delivery]:
    """Beat's tick: settle the deliveries a dead worker left `sending`, and finish its run.

    Such a mail may or may not have reached the server (it was claimed, perhaps handed over, and
    never marked), so it becomes `unknown` and is never sent by itself: a digest is never mailed
    twice. The run it belonged to is sent again for its period: every delivery done is skipped,
    and the subscribers it had not reached yet get theirs."""
    now = now or timezone.now()
    stuck = list(
        Delivery.objects.filter(
            status=Delivery.Status.SENDING, claimed_at__lt=now - DELIVERY_STALE_AFTER
        )
    )
    reaped = []
    for delivery in stuck:
        settled = Delivery.objects.filter(
            pk=delivery.pk, status=Delivery.Status.SENDING, claimed_at=delivery.claimed_at
        ).update(status=Delivery.Status.UNKNOWN, error=UNKNOWN_AFTER_STOP)
        if settled:
            logger.warning("Digest delivery %s was left sending: marked unknown", delivery.pk)
            reaped.append(delivery)
    # One run per frequency and period: a digest sent on UTC day D covers the days before D
    # (selectors.period_of), so the run is sent again as of D, whenever the reaper runs.
    for frequency, period_end in sorted({(d.frequency, d.period_end) for d in reaped}):
        sent_at = datetime.combine(period_end, time(), tzinfo=UTC)
        task_enqueue_on_commit(
            "apps.digests.tasks.digests_send_task", frequency, sent_at.isoformat()
        )
    return reaped


def digest_preview(*, user, now: datetime | None = None) -> tuple[str, str, str]:
    """The person's next digest, rendered exactly as it will be mailed: (subject, text, HTML)."""
    now = now or timezone.now()
    subscription = subscription_for(user=user)
    start, end = selectors.period_of(
        frequency=subscription.frequency, day=now.astimezone(ZoneInfo("UTC")).date()
    )
    digest = selectors.digest_build(subscription=subscription, period_start=start, period_end=end)
    subject, text, html, _url = digest_render(subscription=subscription, digest=digest)
    return subject, text, html


# -- Alerts ------------------------------------------------------------------------------------


def _project_leads(project: Project) -> list[str]:
    return sorted(
        set(
            project.team.memberships.filter(role=Membership.Role.LEAD, user__is_active=True)
            .exclude(user__email="")
            .values_list("user__email", flat=True)
        )
    )


def _alert_notify(*, alert: Alert, now: datetime, connection) -> None:
    if not Alert.objects.filter(pk=alert.pk, notified_at__isnull=True).update(notified_at=now):
        return  # someone else mails it
    recipients = _project_leads(alert.project)
    if not recipients:
        return
    context = {
        "alert": alert,
        "project_url": absolute(reverse("project_detail", kwargs={"slug": alert.project.slug})),
        "settings_url": absolute(reverse("digest_settings")),
    }
    error = ""
    try:
        email_message("alert", context, to=recipients, connection=connection).send()
    except (smtplib.SMTPException, OSError) as failure:
        error = repr(failure)
        logger.warning("Alert %s could not be mailed: %s", alert.pk, failure)
    Alert.objects.filter(pk=alert.pk).update(recipients=recipients, error=error)


def _reconcile(
    *,
    kind: str,
    crossing: dict[int, tuple[Decimal, Decimal, str]],
    day: date,
    now: datetime,
    currency: str,
    connection,
) -> list[Alert]:
    """Open (and mail) an alert for each project newly crossing, clear those that no longer do."""
    opened = []
    projects = Project.objects.in_bulk(list(crossing))
    for pk, (amount, threshold, message) in crossing.items():
        try:
            with transaction.atomic():
                alert = Alert.objects.create(
                    project=projects[pk],
                    kind=kind,
                    currency=currency,
                    amount=amount,
                    threshold=threshold,
                    day=day,
                    message=message,
                    opened_at=now,
                )
        except IntegrityError:  # already open: its figures move, no new mail
            Alert.objects.filter(project_id=pk, kind=kind, cleared_at__isnull=True).update(
                amount=amount, threshold=threshold, day=day, message=message
            )
            continue
        _alert_notify(alert=alert, now=now, connection=connection)
        opened.append(alert)
    Alert.objects.filter(kind=kind, cleared_at__isnull=True).exclude(
        project_id__in=list(crossing)
    ).update(cleared_at=now)
    return opened


def alerts_check(*, now: datetime | None = None, connection=None) -> list[Alert]:
    """Check every project's month-end forecast against its budget and its last billed day
    against the mean of the days before; return the alerts opened (each mailed once)."""
    now = now or timezone.now()
    config = DigestSettings.get()
    currency = Organization.get().currency
    as_of = data_as_of()
    last_day = last_day_with_data(as_of, today=now.date())
    if last_day is None:
        return []
    connection = connection or get_connection()
    scope = SpendScope(currency=currency)
    budget: dict[int, tuple[Decimal, Decimal, str]] = {}
    if config.budget_alerts:
        summary = month_summary(scope=scope, today=last_day, as_of=as_of)
        for project in Project.objects.filter(monthly_budget__isnull=False):
            forecast = summary.project_forecast(project.pk)
            if forecast is not None and forecast > project.monthly_budget:
                budget[project.pk] = (
                    forecast,
                    project.monthly_budget,
                    f"{project.name}'s month-end forecast is {forecast} {currency}, over its "
                    f"budget of {project.monthly_budget} {currency}.",
                )
    spikes: dict[int, tuple[Decimal, Decimal, str]] = {}
    if config.spike_alerts:
        first = last_day - timedelta(days=config.spike_days)
        rows = (
            scope.daily(Period(first, last_day + timedelta(days=1)))
            .filter(billing_currency=currency)
            .values("project_id", "day")
            .annotate(amount=Sum("effective_cost"))
            .order_by()
        )
        day_spend: dict[int, Decimal] = {}
        before: dict[int, Decimal] = {}
        for row in rows:
            target = day_spend if row["day"] == last_day else before
            target[row["project_id"]] = target.get(row["project_id"], ZERO) + row["amount"]
        names = dict(Project.objects.filter(pk__in=list(day_spend)).values_list("pk", "name"))
        for pk, amount in day_spend.items():
            mean = before.get(pk, ZERO) / config.spike_days
            if mean > 0 and amount > config.spike_multiple * mean:
                spikes[pk] = (
                    amount,
                    config.spike_multiple * mean,
                    f"{names[pk]} spent {amount:.2f} {currency} on {last_day}, "
                    f"{amount / mean:.1f}x the mean of the {config.spike_days} days before "
                    f"({mean:.2f} {currency}).",
                )
    opened = []
    try:
        for kind, crossing in (
            (Alert.Kind.FORECAST_OVER_BUDGET, budget),
            (Alert.Kind.DAILY_SPIKE, spikes),
        ):
            opened += _reconcile(
                kind=kind,
                crossing=crossing,
                day=last_day,
                now=now,
                currency=currency,
                connection=connection,
            )
    finally:
        connection.close()
    return opened
