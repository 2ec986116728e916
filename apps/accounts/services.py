import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from .models import ApiToken

# last_used_at is for people ("is this token still in use?"): a minute's precision is plenty, and
# a script that sends a batch every second then costs one write a minute, not one a request.
LAST_USED_PRECISION = timedelta(minutes=1)


@dataclass(frozen=True)
class IssuedToken:
    """A new token and its secret. The secret exists only here: it is shown once, never stored."""

    token: ApiToken
    secret: str


@transaction.atomic
def api_token_create(*, user, name: str) -> IssuedToken:
    secret = ApiToken.SCHEME + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=secret[: ApiToken.PREFIX_LENGTH],
        key_hash=ApiToken.hash_secret(secret),
    )
    return IssuedToken(token=token, secret=secret)


def api_token_revoke(*, token: ApiToken) -> ApiToken:
    """Revoke the token; revoking it again keeps the first revocation time."""
    now = timezone.now()
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=now)
    token.refresh_from_db(fields=["revoked_at"])
    return token


def api_token_touch(*, token: ApiToken) -> None:
    """Record that the token was used now (at most one write per LAST_USED_PRECISION)."""
    now = timezone.now()
    ApiToken.objects.filter(pk=token.pk).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_PRECISION)
    ).update(last_used_at=now)
