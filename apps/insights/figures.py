"""Findings figures cached per findings version, never stale: the waste totals the pages show.

The pages' findings sections and the waste page sum finding-hours (millions of rows in a year of
a large organisation's bill) for the visible findings of a period. They are cached through the
spend figures' cache (apps/spend/figures.py: keyed by the query's SQL) under the findings'
version and the joined one (a change of projects, teams or who sees what), both parts of the
version row in the database that every process reads with the data version. The findings'
version moves in the transaction of every change of findings or their hours:

- every findings recompute (its findings and hours are written in bulk);
- every status change of the workflow (services._change: acknowledge, snooze, resolve, reopen,
  a snooze waking) and an edit or delete in the admin.

A change of spend alone (an import, a re-attribution) leaves them cached: these queries read the
findings tables (and the projects and teams they filter by, which the joined version follows),
which change when the recompute that the change starts commits. So the first page after an
import computes its spend figures, and the first after the recompute its findings figures,
never both.
"""

from collections.abc import Callable

from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from apps.accounts.guards import is_staff_or_lead
from apps.accounts.models import Team
from apps.projects.selectors import visible_project_ids
from apps.spend.figures import cached, cached_by, cached_fragment
from apps.spend.rollup import bill_freshness
from apps.spend.sections import request_organization, today


def cached_findings(
    tag: str, query: QuerySet | list[QuerySet], compute: Callable[[], object]
) -> object:
    """`compute()`'s result for `query` (a query of the findings tables; see
    apps.spend.figures.cached), from the cache while neither the findings nor what the queries
    join (names, teams, who sees what) changed. A change of spend alone leaves them: the
    findings follow it at the next recompute, which moves their version."""
    return cached(tag, query, compute, findings=True)


def cached_findings_by(tag: str, parts: tuple, compute: Callable[[], object]) -> object:
    """`compute()`'s result for `parts` (its arguments and what the person asking sees; see
    apps.spend.figures.cached_by), cached as cached_findings caches: while neither the findings
    nor what they join changed."""
    return cached_by(tag, parts, compute, findings=True)


def page_fragment(
    request: HttpRequest,
    name: str,
    render: Callable[[], SafeString],
    *,
    spend: bool = True,
    findings: bool = True,
    **depends_on: object,
) -> SafeString:
    """The HTML `render()` makes of a page's spend and findings figures, cached while neither
    the spend data nor the findings changed, for everyone who asks the same question: the same
    URL and query, on the same UTC day (the presets' periods, the month-end forecast), in the
    same time zone and currency, seeing the same projects and teams in the same role, with the
    bill loaded up to the same minute as shown (never later than now). `render` must read
    nothing else about the request than `depends_on` names: no user, no CSRF token (a form that
    posts takes its token from outside the part, by the input's `form` attribute). `spend` and
    `findings` say what the part shows (apps.spend.figures.cached_fragment): a part without
    either is cached until what it shows is saved (the joined version), whatever the bill and
    the findings do."""
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
    # The versions (the data's, the findings') are read by cached_fragment for each part.
    parts = {**asked, **depends_on, "name": name}
    if not spend:
        # A part that shows no spend (a findings section; a project's runs, models and
        # deployments) does not follow the bill either: an import leaves it cached.
        del parts["fresh"]
    # Rendered HTML is a SafeString, and stays one through the cache (pickled with its class).
    return cached_fragment(parts, render, spend=spend, findings=findings)


# Where a spend part's HTML takes its findings section (page_fragment_with_findings).
FINDINGS_SLOT = mark_safe("<!-- costsite: the findings section -->")


def page_fragment_with_findings(
    request: HttpRequest,
    name: str,
    render: Callable[[], SafeString],
    section: Callable[[], object],
    **depends_on: object,
) -> SafeString:
    """A part of a page that shows spend figures with a findings section among them, cached as
    two parts: the spend under the data version alone, rendered with FINDINGS_SLOT where the
    section goes (`render` puts `findings_slot` in its template), and the section (`section()`:
    a FindingsSection) under the findings' version. Cached whole, a recompute of findings made
    every spend figure around the section be built and rendered again, and a new bill the
    section: half of a cold overview's time went to the half that had not changed."""
    spend_html = page_fragment(request, name, render, findings=False, **depends_on)
    section_html = page_fragment(
        request,
        f"{name}:findings",
        lambda: render_to_string(
            "insights/_findings_section.html",
            {"section": section(), "title": "Waste"},
            request=request,
        ),
        spend=False,
        **depends_on,
    )
    # Both parts are our templates' output, escaped as they were rendered.
    return mark_safe(spend_html.replace(FINDINGS_SLOT, section_html, 1))  # noqa: S308


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
