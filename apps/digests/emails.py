"""Every email is three templates, `digests/emails/<name>-subject.txt`, `-body.txt` and
`-body.html`, put together here (STYLE.md, Email)."""

import re
from email.parser import BytesHeaderParser
from email.policy import compat32
from functools import lru_cache

from django.conf import settings
from django.core import signing
from django.core.mail import EmailMultiAlternatives
from django.core.mail.message import sanitize_address
from django.template.loader import render_to_string
from django.urls import get_script_prefix, get_urlconf, reverse

UNSUBSCRIBE_SALT = "digests.unsubscribe"
UNSUBSCRIBE_MAX_AGE = 60 * 60 * 24 * 90  # 90 days: a quarter's digests keep a working link


def absolute(path: str) -> str:
    return settings.COSTSITE_BASE_URL.rstrip("/") + path


def unsubscribe_token(*, user) -> str:
    # Not compressed: zlib makes `{"u": pk}` no shorter (but for ids such as 10**12), so signing
    # kept it as it was, the same token, while setting up the compressor took about 0.26 ms a
    # recipient. Tokens made compressed are read back all the same (`signing.loads`).
    return signing.dumps({"u": user.pk}, salt=UNSUBSCRIBE_SALT)


def unsubscribe_user_id(token: str) -> int | None:
    """The user a token was made for, or None when it is forged or has expired."""
    try:
        data = signing.loads(token, salt=UNSUBSCRIBE_SALT, max_age=UNSUBSCRIBE_MAX_AGE)
    except signing.BadSignature:
        return None
    return data.get("u") if isinstance(data, dict) else None


TOKEN_MARK = "token-mark"  # noqa: S105 (a mark where a token goes, no secret)


@lru_cache(maxsize=8)
def _unsubscribe_url(base_url: str, prefix: str, urlconf) -> str:
    """The unsubscribe URL with a mark for its token: reversed once, not for every recipient (a
    token is letters, digits, "-", "_" and ":", which the URL keeps as they are)."""
    return absolute(reverse("digest_unsubscribe", kwargs={"token": TOKEN_MARK}))


def unsubscribe_url(*, user) -> str:
    url = _unsubscribe_url(settings.COSTSITE_BASE_URL, get_script_prefix(), get_urlconf())
    return url.replace(TOKEN_MARK, unsubscribe_token(user=user))


def email_render(name: str, context: dict) -> tuple[str, str, str]:
    """(subject, text body, HTML body) of email `name`."""
    base = f"digests/emails/{name}"
    subject = " ".join(render_to_string(f"{base}-subject.txt", context).split())
    return (
        subject,
        render_to_string(f"{base}-body.txt", context),
        render_to_string(f"{base}-body.html", context),
    )


def email_message(
    name: str, context: dict, *, to: list[str], headers: dict | None = None, connection=None
) -> EmailMultiAlternatives:
    subject, text, html = email_render(name, context)
    return email_build(
        subject=subject, text=text, html=html, to=to, headers=headers, connection=connection
    )


def email_build(
    *,
    subject: str,
    text: str,
    html: str,
    to: list[str],
    headers: dict | None,
    connection=None,
    filled: bytes | None = None,
) -> EmailMultiAlternatives:
    """The email; with `filled` (`MessageTemplate.fill`), one whose MIME message is that."""
    extra = {} if filled is None else {"filled": filled}
    message = (EmailMultiAlternatives if filled is None else FilledEmail)(
        **extra,
        subject=subject,
        body=text,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=to,
        headers=headers or {},
        connection=connection,
    )
    message.attach_alternative(html, "text/html")
    return message


# -- One MIME message for every reader of the same email ----------------------------------------
#
# Generating a MIME message (Django's `message()`, then the email package's generator) took about
# 5 ms of CPU per recipient, 8 when the HTML went quoted-printable: a third of a digest run's
# rendering. Readers of the same digest get the same message but for a few values, so it is
# generated once with marks in their place, and each recipient's message is those bytes with
# the values put in (`MessageTemplate.fill`). That is exact only where the marks come through the
# generator as they went in: parts sent 7bit or 8bit (not quoted-printable or base64, which Django
# chooses for lines longer than 998 bytes), values without line breaks, ASCII wherever the part
# or header is, lines no longer than 998 bytes once filled. Anything else is generated the usual
# way, recipient by recipient (`fill` returns None).

TO_MARK = "to-mark@fill.invalid"
DATE_MARK = "@@date-mark@@"
MESSAGE_ID_MARK = "<@@message-id-mark@@>"
RFC5322_LINE_LIMIT = 998


# A plain address (a dot-atom at a hostname), which Django's sanitize_address leaves as it is:
# parsing one as a mailbox took about 0.5 ms a recipient.
PLAIN_ADDRESS = re.compile(r"[A-Za-z0-9_+-]+(\.[A-Za-z0-9_+-]+)*@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*")


def address_for_header(address: str) -> str:
    """`address` as Django writes it in a To header (`sanitize_address`)."""
    if PLAIN_ADDRESS.fullmatch(address):
        return address
    return sanitize_address(address, settings.DEFAULT_CHARSET)


class FilledMessage:
    """A recipient's MIME message, as bytes: what Django's backends read of `message()`."""

    def __init__(self, data: bytes):
        self._data = data  # lines end in \n

    def as_bytes(self, unixfrom: bool = False, linesep: str = "\n") -> bytes:
        return self._data if linesep == "\n" else self._data.replace(b"\n", linesep.encode())

    def as_string(self, unixfrom: bool = False, linesep: str = "\n") -> str:
        return self.as_bytes(linesep=linesep).decode()

    def get_charset(self):
        return None  # a multipart message has none of its own (the console backend asks)

    def __getitem__(self, name: str):
        return BytesHeaderParser(policy=compat32).parsebytes(self._data)[name]


class FilledEmail(EmailMultiAlternatives):
    """An email whose MIME message was filled in from a template (`MessageTemplate.fill`);
    everything else (subject, body, alternatives, headers) is an ordinary email's."""

    def __init__(self, *, filled: bytes, **kwargs):
        super().__init__(**kwargs)
        self.filled = filled

    def message(self):
        return FilledMessage(self.filled)


class MessageTemplate:
    """An email's MIME message generated once, with marks for what differs per recipient: the
    To address, Date, Message-ID and `marks` (in `headers`, `text` or `html`)."""

    def __init__(
        self, *, subject: str, text: str, html: str, headers: dict[str, str], marks: tuple[str, ...]
    ):
        message = email_build(
            subject=subject,
            text=text,
            html=html,
            to=[TO_MARK],
            headers={"Date": DATE_MARK, "Message-ID": MESSAGE_ID_MARK, **headers},
        ).message()
        self.boundary = (message.get_boundary() or "").encode()
        self.data = message.as_bytes(linesep="\n")
        self.ascii_only = {TO_MARK, DATE_MARK, MESSAGE_ID_MARK}
        wanted = dict.fromkeys(self.ascii_only, 1)
        for mark in marks:
            wanted[mark] = sum(value.count(mark) for value in headers.values())
            if wanted[mark]:
                self.ascii_only.add(mark)
        self.usable = True
        for part, body in zip(message.get_payload(), (text, html), strict=True):
            encoding = part["Content-Transfer-Encoding"]
            self.usable = self.usable and encoding in ("7bit", "8bit")
            for mark in marks:
                wanted[mark] += body.count(mark)
                if encoding == "7bit" and mark in body:
                    self.ascii_only.add(mark)
        # Each mark comes out as often as it went in, so none was folded, split or encoded.
        self.usable = self.usable and all(
            self.data.count(mark.encode()) == count for mark, count in wanted.items()
        )
        # Only the lines with a mark change length when filled in: those are checked then.
        every = [mark.encode() for mark in wanted]
        lines = self.data.split(b"\n")
        self.marked = [line for line in lines if any(mark in line for mark in every)]
        self.usable = self.usable and all(
            len(line) <= RFC5322_LINE_LIMIT for line in lines if line not in self.marked
        )

    def fill(self, *, to: str, date: str, message_id: str, values: dict[str, str]) -> bytes | None:
        """The message of one recipient, or None where it cannot be filled in exactly."""
        if not self.usable:
            return None
        data, lines = self.data, self.marked
        values = {TO_MARK: to, DATE_MARK: date, MESSAGE_ID_MARK: message_id, **values}
        for mark, value in values.items():
            encoded = value.encode()
            if (
                "\n" in value
                or "\r" in value
                or (mark in self.ascii_only and not value.isascii())
                or (self.boundary and self.boundary in encoded)
            ):
                return None
            data = data.replace(mark.encode(), encoded)
            lines = [line.replace(mark.encode(), encoded) for line in lines]
        if any(len(line) > RFC5322_LINE_LIMIT for line in lines):
            return None
        return data
