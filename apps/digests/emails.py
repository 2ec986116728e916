"""Every email is three templates, `digests/emails/<name>-subject.txt`, `-body.txt` and
`-body.html`, put together here (STYLE.md, Email)."""

from django.conf import settings
from django.core import signing
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string
from django.urls import reverse

UNSUBSCRIBE_SALT = "digests.unsubscribe"
UNSUBSCRIBE_MAX_AGE = 60 * 60 * 24 * 90  # 90 days: a quarter's digests keep a working link


def absolute(path: str) -> str:
    return settings.COSTSITE_BASE_URL.rstrip("/") + path


def unsubscribe_token(*, user) -> str:
    return signing.dumps({"u": user.pk}, salt=UNSUBSCRIBE_SALT, compress=True)


def unsubscribe_user_id(token: str) -> int | None:
    """The user a token was made for, or None when it is forged or has expired."""
    try:
        data = signing.loads(token, salt=UNSUBSCRIBE_SALT, max_age=UNSUBSCRIBE_MAX_AGE)
    except signing.BadSignature:
        return None
    return data.get("u") if isinstance(data, dict) else None


def unsubscribe_url(*, user) -> str:
    return absolute(reverse("digest_unsubscribe", kwargs={"token": unsubscribe_token(user=user)}))


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
    *, subject: str, text: str, html: str, to: list[str], headers: dict | None, connection=None
) -> EmailMultiAlternatives:
    message = EmailMultiAlternatives(
        subject=subject,
        body=text,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=to,
        headers=headers or {},
        connection=connection,
    )
    message.attach_alternative(html, "text/html")
    return message
