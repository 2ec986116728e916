"""Who may see and change what (DESIGN.md "Roles"), in one place.

- staff see and change everything;
- a team's lead edits the team's projects (and, in later issues, its rules and findings);
- a team's member sees the team's projects and registers (creates and edits) experiments, models
  and deployments in them;
- everybody else gets 404.

Every page fetches its object through one of the `*_for_user` helpers, which live in the app of
the object they return (apps/projects, apps/experiments and apps/deployments `selectors.py`); this
module keeps the teams' and tokens' own. A refusal is always
404, never 403: an outsider must not learn that another team's project exists, and a member who asks
to do what only a lead may gets the same answer, so there is one rule to remember and to test.
"""

from django.db.models import QuerySet
from django.http import Http404

from .memo import RequestMemo
from .models import ApiToken, Membership, Team


def teams_led_by(*, user) -> QuerySet[Team]:
    """The teams in which the user may create projects."""
    if user.is_staff:
        return Team.objects.all()
    return Team.objects.filter(
        memberships__user=user, memberships__role=Membership.Role.LEAD
    ).distinct()


def leads_a_team(*, user) -> bool:
    """Whether the user leads at least one team (staff: whether there is a team). Read once per
    request: a page asks several times (its role, the findings it shows, what its parts are
    cached by); a team or membership saved or deleted in the request makes it read again."""
    return _leads.get(user.pk, lambda: teams_led_by(user=user).exists())


_leads = RequestMemo("leads-a-team", models=(Team, Membership))


def api_tokens_of(*, user) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user).order_by("revoked_at", "-created_at", "-pk")


def api_token_for_user(*, user, pk: int) -> ApiToken:
    """The user's own token (staff: anybody's, to revoke a leaked one); else 404."""
    tokens = ApiToken.objects.all() if user.is_staff else ApiToken.objects.filter(user=user)
    try:
        return tokens.get(pk=pk)
    except ApiToken.DoesNotExist:
        raise Http404("No such token.") from None


def api_token_for_secret(*, secret: str) -> ApiToken | None:
    """The token with this secret, revoked or not (the caller tells which), with its user."""
    return (
        ApiToken.objects.select_related("user")
        .filter(key_hash=ApiToken.hash_secret(secret))
        .first()
    )


# The API names what a script registered by its project and external id, not by primary key.
