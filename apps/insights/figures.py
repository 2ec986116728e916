"""Findings figures cached per findings version, never stale: the waste totals the pages show.

The pages' findings sections and the waste page sum finding-hours (millions of rows in a year of
a large organisation's bill) for the visible findings of a period. They are cached through the
spend figures' cache (apps/spend/figures.py: keyed by the spend data version and the query's
SQL, so a change of projects, teams or who sees what is covered) under a tag that also carries
the findings version, a random token that moves whenever findings or their hours change:

- at the commit of every findings recompute (its findings and hours are written in bulk);
- at the commit of every status change of the workflow (services._change: acknowledge, snooze,
  resolve, reopen, a snooze waking) and of an edit or delete in the admin.

A token rather than a counter: if the cache loses it, a new one is drawn, and entries cached
under the old one are never read again (a counter starting again at 0 could find them).
"""

import uuid
from collections.abc import Callable

from django.core.cache import cache
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.safestring import SafeString

from apps.accounts.guards import is_staff_or_lead
from apps.accounts.models import Team
from apps.projects.selectors import visible_project_ids
from apps.spend.figures import cached, cached_fragment, version_bump
from apps.spend.rollup import bill_freshness
from apps.spend.sections import request_organization, today

VERSION_KEY = "insights-findings-version"


def findings_version() -> str:
    token = cache.get(VERSION_KEY)
    if token is None:
        cache.add(VERSION_KEY, uuid.uuid4().hex, None)
        token = cache.get(VERSION_KEY)
    return token


def findings_version_bump() -> None:
    """A new findings version once the current transaction commits (at once outside one).

    The spend data version moves too, in the transaction (a row in the database, which every
    process reads): the pages' parts cached as HTML show findings' rows and statuses, and a
    process whose own cache still holds the old token must not serve them."""
    version_bump()
    transaction.on_commit(lambda: cache.set(VERSION_KEY, uuid.uuid4().hex, None))


def cached_findings(tag: str, query: QuerySet, compute: Callable[[], object]) -> object:
    """`compute()`'s result for `query` (see apps.spend.figures.cached), from the cache while
    neither the spend data nor the findings changed."""
    return cached(f"findings:{findings_version()}:{tag}", query, compute)


def page_fragment(
    request: HttpRequest, name: str, render: Callable[[], SafeString], **depends_on: object
) -> SafeString:
    """The HTML `render()` makes of a page's spend and findings figures, cached while neither
    the spend data nor the findings changed, for everyone who asks the same question: the same
    URL and query, on the same UTC day (the presets' periods, the month-end forecast), in the
    same time zone and currency, seeing the same projects and teams in the same role, with the
    bill loaded up to the same minute as shown (never later than now). `render` must read
    nothing else about the request than `depends_on` names: no user, no CSRF token (a form that
    posts takes its token from outside the part, by the input's `form` attribute)."""
    # The same for every part of the request's page: asked once.
    asked = getattr(request, "_costsite_fragment_parts", None)
    if asked is None:
        asked = request._costsite_fragment_parts = {
            "url": request.get_full_path(),
            "today": today(),
            "time_zone": timezone.get_current_timezone_name(),
            "currency": request_organization(request).currency,
            "sees": visible_project_ids(user=request.user),
            # The team menu lists the user's teams (a team may have no project yet).
            "teams": _team_ids(request.user),
            # Staff see everything, and leads the findings and spend nobody owns yet.
            "role": (request.user.is_staff, is_staff_or_lead(user=request.user)),
            "fresh": _fresh_as_shown(),
        }
    # The versions are read for each part: a change within the request moves them.
    parts = {**asked, **depends_on, "findings": findings_version(), "name": name}
    # Rendered HTML is a SafeString, and stays one through the cache (pickled with its class).
    return cached_fragment(parts, render)


def _team_ids(user) -> tuple[int, ...] | None:
    if user.is_staff:
        return None  # every team
    return tuple(
        Team.objects.filter(memberships__user=user).order_by("pk").values_list("pk", flat=True)
    )


def _fresh_as_shown() -> tuple:
    """How fresh the bill is, to the minute the pages show: a bill whose usage runs past now is
    shown as loaded up to now, which would otherwise make a new key every microsecond."""
    fresh = bill_freshness()

    def minute(moment):
        return moment and moment.replace(second=0, microsecond=0)

    return (minute(fresh.newest), minute(fresh.oldest), fresh.oldest_account, fresh.accounts)
