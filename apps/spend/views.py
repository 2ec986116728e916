"""The attribution pages: the overview (home), unattributed spend and its claim, and the CSV
exports of every spend table (the project, model, experiment and deployment pages' spend sections
are plain functions in apps/spend/sections.py).

Every page takes its date range and filters from the URL (apps/spend/filters.py). A request htmx
makes for the `#spend` element gets that part of the page only; every table has a CSV export at
`…/spend.csv?table=<name>&<the same filters>`.
"""

import functools
from collections.abc import Callable
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString
from django.views.decorators.http import require_http_methods

from apps.accounts.guards import staff_or_lead_only
from apps.accounts.models import Organization, Team
from apps.billing import freshness
from apps.billing.services_attribution import unattributed_claim as claim_service
from apps.deployments.selectors import deployment_for_user, model_for_user
from apps.experiments.selectors import experiment_for_user
from apps.insights.figures import FINDINGS_SLOT, page_fragment_with_findings
from apps.insights.selectors import findings_section
from apps.projects.models import AllocationRule, Workload
from apps.projects.selectors import project_for_user, projects_editable_by, projects_visible_to
from costsite.htmx import redirect_after_save

from . import selectors
from .charts import pareto_chart, spend_over_time_chart
from .csv_export import csv_response, range_refused
from .figures import in_background
from .filters import SpendFilters, spend_filters_from
from .forms import ClaimForm
from .model_api import model_api_spend
from .sections import (
    MOVERS,
    SpendSection,
    owner_filters,
    project_filters,
    request_organization,
    today,
)

UNATTRIBUTED_PER_PAGE = 25
CLAIM_RULE_PREFIX = "Claimed on the unattributed page"


def owner_spend_html(
    request: HttpRequest,
    *,
    name: str,
    template: str,
    spend: Callable[[], SpendSection],
    preset: str,
    **subject,
) -> SafeString:
    """A run's or a deployment's spend section (#spend, also what a filter change fetches),
    cached as HTML per data version, its findings section apart per findings version
    (apps/insights/figures.py). `spend()` builds the section, `template` renders it with
    `findings_slot` where the findings go, `preset` is the range it shows unless one is chosen,
    and `subject` names what the findings are about (experiment=..., deployment=...)."""
    period = functools.cache(lambda: owner_filters(request.GET, preset).period)
    return page_fragment_with_findings(
        request,
        name,
        lambda: render_to_string(
            template, {**spend().context(), "findings_slot": FINDINGS_SLOT}, request=request
        ),
        lambda: findings_section(
            user=request.user, start=period().start, end=period().end, **subject
        ),
    )


def _org(request: HttpRequest) -> Organization:
    return request_organization(request)


def _wants_spend(request: HttpRequest) -> bool:
    return bool(request.htmx) and request.htmx.target == "spend"


def _freshness() -> dict:
    fresh = selectors.bill_freshness()
    return {"data_as_of": fresh.newest, "bill_freshness": fresh}


def _common(request: HttpRequest, filters: SpendFilters, export_url: str) -> dict:
    return {
        "filters": filters,
        "form": filters.form,
        "currency": _org(request).currency,
        "export_url": export_url,
        "export_query": filters.query_string,
        **_freshness(),
    }


# -- The overview ------------------------------------------------------------------------------


def _overview_filters(request: HttpRequest) -> SpendFilters:
    user = request.user
    teams = Team.objects.all() if user.is_staff else Team.objects.filter(memberships__user=user)
    return spend_filters_from(
        request.GET,
        today=today(),
        teams=teams.distinct().order_by("name"),
        projects=projects_visible_to(user=request.user).order_by("name"),
        providers=selectors.providers_billed(),
    )


def _overview_scope(request: HttpRequest, filters: SpendFilters) -> selectors.SpendScope:
    return selectors.overview_scope(
        user=request.user,
        currency=_org(request).currency,
        team=filters.team,
        project=filters.project,
        provider=filters.provider,
        workload=filters.workload,
    )


def _budget_projects(request: HttpRequest, filters: SpendFilters):
    projects = projects_visible_to(user=request.user)
    if filters.team:
        projects = projects.filter(team=filters.team)
    if filters.project:
        projects = projects.filter(pk=filters.project.pk)
    return projects


def _overview_figures(request: HttpRequest, head: dict) -> dict:
    """What the overview's cached part shows (`head`: its filters, read for each request)."""
    filters = head["filters"]
    scope = _overview_scope(request, filters)
    period = filters.period
    sees = head["shows_unattributed"]
    # Who drives the spend against the period before (the heaviest figure) and the unattributed
    # spend on the figures thread while the rest is built here; their results are asked for
    # last.
    changes_result = in_background(
        lambda: selectors.spend_changes(scope=scope, period=period, names_for=MOVERS)
    )
    lead = sees and not request.user.is_staff
    unattributed = in_background(
        lambda: (
            # A lead's headline leaves unattributed spend out; it is shown apart, to be claimed.
            # Its total first: the resources read the same ranking, from the cache.
            selectors.unattributed_summary(
                period=period, currency=scope.currency, provider=filters.provider
            )
            if lead
            else None,
            selectors.unattributed_resources(
                period=period, currency=scope.currency, provider=filters.provider, detail=False
            )
            if (scope.unattributed or lead) and filters.workload in ("", Workload.UNATTRIBUTED)
            else [],
        )
    )
    series = selectors.spend_series(scope=scope, period=period)
    summary = selectors.month_summary(scope=scope, today=today(), as_of=head["data_as_of"])
    here = {
        "series": series,
        "spend_chart": spend_over_time_chart(series=series, currency=scope.currency),
        "summary": summary,
        "budgets": selectors.budget_lines(
            projects=_budget_projects(request, filters), summary=summary
        )[:10],
        "model_api": model_api_spend(scope=scope, period=period),
    }
    # Asked for in the reverse order of their start: one the thread has not begun is computed
    # here while the thread finishes the other.
    claimable, unattributed_resources = unattributed()
    changes = changes_result()
    projects = changes.project_pareto()
    return {
        **head,
        **here,
        "projects": projects,
        "projects_chart": pareto_chart(
            pareto=projects, currency=scope.currency, id="project-pareto"
        ),
        "models": changes.models,
        "models_chart": pareto_chart(
            pareto=changes.models, currency=scope.currency, id="model-pareto"
        ),
        "project_movers": changes.project_movers(MOVERS) if period.previous else [],
        "experiment_movers": changes.experiment_movers(MOVERS) if period.previous else [],
        "deployment_movers": changes.deployment_movers(MOVERS) if period.previous else [],
        "findings_slot": FINDINGS_SLOT,
        "claimable": claimable,
        "unattributed": unattributed_resources,
    }


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    filters = _overview_filters(request)
    head = {
        **_common(request, filters, reverse("overview_export")),
        "shows_unattributed": selectors.sees_unattributed(user=request.user),
        # How far the bill lags is counted from now: read for each request, not cached.
        "lag_warnings": freshness.lag_warnings(),
    }
    # The figures, cached as HTML per data version and the findings section among them per
    # findings version (apps/insights/figures.py): everyone who sees the same projects in the
    # same role shares them.
    filters = head["filters"]
    head["figures_html"] = page_fragment_with_findings(
        request,
        "overview-figures",
        lambda: render_to_string(
            "spend/overview.html#figures", _overview_figures(request, head), request=request
        ),
        lambda: findings_section(
            user=request.user,
            start=filters.period.start,
            end=filters.period.end,
            team=filters.team,
            project=filters.project,
        ),
    )
    template = "spend/overview.html#spend" if _wants_spend(request) else "spend/overview.html"
    return render(request, template, head)


def _change_rows(changes) -> list[list]:
    return [
        [c.kind, c.name, c.parent, c.previous, c.current, c.change, c.change_share] for c in changes
    ]


CHANGE_HEADER = ["kind", "name", "of", "previous_period", "this_period", "change", "change_share"]


@login_required
def overview_export(request: HttpRequest) -> HttpResponse:
    filters = _overview_filters(request)
    if filters.range_errors:
        return range_refused(filters.range_errors)
    scope = _overview_scope(request, filters)
    period, table = filters.period, request.GET.get("table", "spend")
    if table == "spend":
        return _series_csv("spend", selectors.spend_series(scope=scope, period=period), scope)
    if table in ("projects", "models", "movers"):
        changes = selectors.spend_changes(scope=scope, period=period, names_for=None)
        if table == "projects":
            return _pareto_csv("projects", changes.project_pareto(), scope, "team")
        if table == "models":
            return _pareto_csv("models", changes.models, scope, "project")
        rows = (
            [*changes.project_movers(None), *changes.experiments, *changes.deployments]
            if period.previous
            else []
        )
        return csv_response(
            filename="spend-movers.csv", header=CHANGE_HEADER, rows=_change_rows(rows)
        )
    if table == "budgets":
        summary = selectors.month_summary(scope=scope, today=today(), as_of=selectors.data_as_of())
        projects = _budget_projects(request, filters)
        lines = selectors.budget_lines(projects=projects, summary=summary)
        return csv_response(
            filename="budgets.csv",
            header=["project", "team", "currency", "budget", "month_to_date", "forecast", "status"],
            rows=[
                [
                    line.project.name,
                    line.project.team.name,
                    scope.currency,
                    line.budget,
                    line.month_to_date,
                    line.forecast,
                    line.status,
                ]
                for line in lines
            ],
        )
    if table == "unattributed" and selectors.sees_unattributed(user=request.user):
        return _unattributed_csv(filters, currency=scope.currency)
    raise Http404("No such table.")


# -- CSV tables shared by the pages ------------------------------------------------------------


def _series_csv(name: str, series: selectors.SpendSeries, scope) -> HttpResponse:
    rows = [
        [bucket, key, scope.currency, series.values[key][index]]
        for index, bucket in enumerate(series.buckets)
        for key in series.keys
    ] + [["", "", currency, amount] for currency, amount in series.other_currencies.items()]
    return csv_response(
        filename=f"{name}.csv",
        header=[series.bucket, series.by, "currency", "spend"],
        rows=rows,
    )


def _pareto_csv(name: str, pareto: selectors.Pareto, scope, parent: str) -> HttpResponse:
    return csv_response(
        filename=f"spend-by-{name}.csv",
        header=[name.rstrip("s"), parent, "currency", "spend", "share", "cumulative_share"],
        rows=[
            [item.name, item.parent, scope.currency, item.amount, item.share, item.cumulative_share]
            for item in pareto.items
        ],
    )


def _experiments_csv(scope, period) -> HttpResponse:
    costs = selectors.experiment_costs(scope=scope, period=period, limit=None)
    return csv_response(
        filename="experiments-spend.csv",
        header=[
            "experiment",
            "project",
            "kind",
            "status",
            "currency",
            "spend",
            "gpu_hours",
            "cost_per_gpu_hour",
            "cumulative_share",
        ],
        rows=[
            [
                row.name,
                row.project_name,
                row.kind,
                row.status,
                scope.currency,
                row.amount,
                row.gpu_hours,
                row.cost_per_gpu_hour,
                row.cumulative_share,
            ]
            for row in costs.rows
        ],
    )


def _deployments_csv(scope, period) -> HttpResponse:
    rows = selectors.deployment_costs(scope=scope, period=period, limit=None)
    return csv_response(
        filename="deployments-spend.csv",
        header=[
            "deployment",
            "model",
            "project",
            "currency",
            "spend",
            "requests",
            "cost_per_1000_requests",
            "gpu_hours",
        ],
        rows=[
            [
                row.name,
                row.model_name,
                row.project_name,
                scope.currency,
                row.amount,
                row.requests,
                row.cost_per_thousand_requests,
                row.gpu_hours,
            ]
            for row in rows
        ],
    )


def _breakdown_csv(scope, period, dimensions=None) -> HttpResponse:
    breakdown = selectors.spend_breakdown(scope=scope, period=period, dimensions=dimensions)
    return csv_response(
        filename="spend-breakdown.csv",
        header=["dimension", "value", "currency", "spend", "share"],
        rows=[
            [dimension, row.label, scope.currency, row.amount, row.share]
            for dimension, rows in breakdown.items()
            for row in rows
        ],
    )


def _unattributed_csv(filters: SpendFilters, *, currency: str) -> HttpResponse:
    resources = selectors.unattributed_resources(
        period=filters.period, currency=currency, provider=filters.provider, limit=None
    )
    return csv_response(
        filename="unattributed-spend.csv",
        header=[
            "resource_id",
            "resource_name",
            "provider",
            "billing_account",
            "sub_account",
            "service",
            "region",
            "currency",
            "spend",
            "days",
            "first_day",
            "last_day",
        ],
        rows=[
            [
                r.resource_id,
                r.resource_name,
                r.provider_name,
                r.billing_account_id,
                r.sub_account_id,
                r.service_name,
                r.region_id,
                currency,
                r.amount,
                r.days,
                r.first_day,
                r.last_day,
            ]
            for r in resources
        ],
    )


# -- A project's spend -------------------------------------------------------------------------


@login_required
def project_spend_export(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_for_user(user=request.user, slug=slug)
    filters = project_filters(request.GET)
    if filters.range_errors:
        return range_refused(filters.range_errors)
    scope = selectors.project_scope(
        project=project,
        currency=_org(request).currency,
        provider=filters.provider,
        workload=filters.workload,
    )
    period, table = filters.period, request.GET.get("table", "spend")
    if table == "spend":
        return _series_csv(
            f"{project.slug}-spend", selectors.spend_series(scope=scope, period=period), scope
        )
    if table == "experiments":
        return _experiments_csv(scope, period)
    if table == "deployments":
        return _deployments_csv(scope, period)
    if table == "breakdown":
        return _breakdown_csv(scope, period)
    if table == "movers":
        changes = selectors.spend_changes(scope=scope, period=period, names_for=None, models=False)
        rows = [*changes.experiments, *changes.deployments] if period.previous else []
        return csv_response(
            filename=f"{project.slug}-movers.csv", header=CHANGE_HEADER, rows=_change_rows(rows)
        )
    raise Http404("No such table.")


# -- A model's cost of ownership ----------------------------------------------------------------


@login_required
def model_spend_export(request: HttpRequest, model_pk: int) -> HttpResponse:
    model = model_for_user(user=request.user, pk=model_pk)
    filters = owner_filters(request.GET, "all")
    if filters.range_errors:
        return range_refused(filters.range_errors)
    scope = selectors.model_scope(
        model=model, user=request.user, currency=_org(request).currency, provider=filters.provider
    )
    table = request.GET.get("table", "spend")
    if table == "spend":
        series = selectors.spend_series(scope=scope, period=filters.period, by="component")
        return _series_csv(f"model-{model.pk}-spend", series, scope)
    if table == "experiments":
        return _experiments_csv(scope, filters.period)
    if table == "deployments":
        return _deployments_csv(scope, filters.period)
    raise Http404("No such table.")


# -- An experiment's and a deployment's spend ---------------------------------------------------


def _owner_export(request, *, scope, filters, name: str) -> HttpResponse:
    if filters.range_errors:
        return range_refused(filters.range_errors)
    table = request.GET.get("table", "spend")
    if table == "spend":
        series = selectors.spend_series(scope=scope, period=filters.period, by="cost_kind")
        return _series_csv(name, series, scope)
    if table == "services":
        return _breakdown_csv(scope, filters.period, dimensions=("service_name",))
    raise Http404("No such table.")


@login_required
def experiment_spend_export(request: HttpRequest, experiment_pk: int) -> HttpResponse:
    experiment = experiment_for_user(user=request.user, pk=experiment_pk)
    filters = owner_filters(request.GET, "all")
    scope = selectors.experiment_scope(
        experiment=experiment, currency=_org(request).currency, provider=filters.provider
    )
    return _owner_export(
        request, scope=scope, filters=filters, name=f"experiment-{experiment.pk}-spend"
    )


@login_required
def deployment_spend_export(request: HttpRequest, deployment_pk: int) -> HttpResponse:
    deployment = deployment_for_user(user=request.user, pk=deployment_pk)
    filters = owner_filters(request.GET, "30d")
    scope = selectors.deployment_scope(
        deployment=deployment, currency=_org(request).currency, provider=filters.provider
    )
    return _owner_export(
        request, scope=scope, filters=filters, name=f"deployment-{deployment.pk}-spend"
    )


# -- Unattributed spend --------------------------------------------------------------------------


def _unattributed_filters(request: HttpRequest) -> SpendFilters:
    return spend_filters_from(
        request.GET,
        today=today(),
        dimensions=("provider",),
        providers=selectors.providers_billed(),
    )


def unattributed_context(request: HttpRequest, *, claim_form: ClaimForm | None = None) -> dict:
    filters = _unattributed_filters(request)
    currency = _org(request).currency
    context = _common(request, filters, reverse("unattributed_export"))
    ranked = selectors.unattributed_ranked(
        period=filters.period, currency=currency, provider=filters.provider
    )
    # Counted and cut from the ranking; only the page's resources are named.
    page = Paginator(ranked, UNATTRIBUTED_PER_PAGE).get_page(request.GET.get("page"))
    context.update(
        summary=selectors.unattributed_summary(
            period=filters.period, currency=currency, provider=filters.provider
        ),
        page=page,
        resources=selectors.unattributed_resources(
            period=filters.period,
            currency=currency,
            provider=filters.provider,
            limit=UNATTRIBUTED_PER_PAGE,
            offset=(page.number - 1) * UNATTRIBUTED_PER_PAGE,
        ),
        without_resource_id=selectors.unattributed_without_resource_id(
            period=filters.period, currency=currency, provider=filters.provider
        ),
        page_query=filters.query_string,
        claim_form=claim_form,
        recent_claims=AllocationRule.objects.filter(name__startswith=CLAIM_RULE_PREFIX)
        .select_related("project", "experiment", "deployment", "created_by")
        .order_by("-created_at", "-pk")[:5],
    )
    return context


# Unattributed spend is for staff and team leads (DESIGN.md, Roles).
unattributed_only = staff_or_lead_only(message="Unattributed spend is for staff and team leads.")


@login_required
@unattributed_only
def unattributed(request: HttpRequest) -> HttpResponse:
    template = (
        "spend/unattributed.html#spend" if _wants_spend(request) else "spend/unattributed.html"
    )
    return render(request, template, unattributed_context(request))


@login_required
@unattributed_only
def unattributed_export(request: HttpRequest) -> HttpResponse:
    filters = _unattributed_filters(request)
    if filters.range_errors:
        return range_refused(filters.range_errors)
    return _unattributed_csv(filters, currency=_org(request).currency)


@login_required
@require_http_methods(["GET", "POST"])
@unattributed_only
def unattributed_claim(request: HttpRequest) -> HttpResponse:
    """Assign one unattributed resource, or a pattern of resource ids, to a project (or one of
    its experiments or deployments) of a team the user leads; staff to any."""
    form = ClaimForm(
        request.POST or None,
        projects=projects_editable_by(user=request.user),
        initial={
            "resource_id": request.GET.get("resource", ""),
            "service_name": request.GET.get("service", ""),
            "billing_account_id": request.GET.get("account", ""),
        },
    )
    # Back to the unattributed page with the range and filter it was opened from.
    state = request.GET.copy()
    for key in ("resource", "service", "account"):
        state.pop(key, None)
    back = reverse("unattributed") + (f"?{state.urlencode()}" if state else "")
    if request.method == "POST" and form.is_valid():
        claim = claim_service(created_by=request.user, **form.claim_arguments())
        messages.success(request, form.moved_message(claim, currency=_org(request).currency))
        return redirect_after_save(request, back)
    template = "spend/claim.html#claim-form" if request.htmx else "spend/claim.html"
    return render(
        request,
        template,
        {
            "form": form,
            "back": back,
            "resource": form.initial.get("resource_id") or form.data.get("resource_id", ""),
            "action": reverse("unattributed_claim")
            + (f"?{urlencode(request.GET)}" if request.GET else ""),
        },
    )
