"""The spend sections that other apps' pages show: a project's, a model's, an experiment's and a
deployment's spend. Each is a plain function of keyword arguments (the object, the request's GET
data, the organisation's currency) returning a dataclass; the page's view spreads
`section.context()` into its template's context, so the templates read the same names as before.

Every section takes its date range and filters from the URL (apps/spend/filters.py), and its
figures from the spend selectors; its tables' CSV exports are the `*_spend_export` views.
"""

from dataclasses import dataclass, fields
from datetime import UTC, date, datetime
from decimal import Decimal

from django.db.models import Sum
from django.http import HttpRequest, QueryDict
from django.urls import reverse
from django.utils import timezone

from apps.accounts.models import Organization
from apps.deployments.models import Deployment, Model
from apps.experiments.models import Experiment
from apps.projects.models import Project, Workload
from apps.projects.selectors import projects_visible_to
from costsite.charts import Chart

from . import selectors
from .charts import spend_over_time_chart
from .figures import in_background
from .filters import Period, SpendFilterForm, SpendFilters, preset_period, spend_filters_from
from .model_api import ModelApiSpend, model_api_spend

MOVERS = 5  # per kind on a page; the CSV has every change
# The range an experiment's and a deployment's page shows unless one is chosen: all of a run's
# life, a deployment's last 30 days.
EXPERIMENT_PRESET = "all"
DEPLOYMENT_PRESET = "30d"
# The costliest runs listed; the CSV lists them all. The model page lists every run that produced
# the model below already, so its spend section shows the few that cost most.
PROJECT_RUNS = 25
MODEL_RUNS = 10


def today() -> date:
    """Rollup days are UTC days, so "today" is the UTC one."""
    return timezone.now().astimezone(UTC).date()


def request_organization(request: HttpRequest) -> Organization:
    """The organisation of a request (its currency is the sections' `currency`)."""
    # The organisation middleware fetched it for this request already.
    return getattr(request, "_costsite_org", None) or Organization.get()


def project_filters(params: QueryDict) -> SpendFilters:
    return spend_filters_from(
        params,
        today=today(),
        dimensions=("provider", "workload"),
        providers=selectors.providers_billed(),
        workloads=[(value, label) for value, label in Workload.choices if value != "unattributed"],
    )


def owner_filters(params: QueryDict, default_preset: str) -> SpendFilters:
    """The filters of a model's, an experiment's or a deployment's spend."""
    return spend_filters_from(
        params,
        today=today(),
        default_preset=default_preset,
        dimensions=("provider",),
        providers=selectors.providers_billed(),
    )


@dataclass(frozen=True)
class SpendSection:
    """What every spend section shows: its filters, its series over time and where to export."""

    filters: SpendFilters
    form: SpendFilterForm
    currency: str
    export_url: str
    export_query: str
    data_as_of: datetime | None
    bill_freshness: selectors.BillFreshness
    series: selectors.SpendSeries
    spend_chart: Chart

    def context(self) -> dict:
        """The section's fields by name, for a template's context (not copied)."""
        return {item.name: getattr(self, item.name) for item in fields(self)}


def _freshness() -> dict:
    fresh = selectors.bill_freshness()
    return {"data_as_of": fresh.newest, "bill_freshness": fresh}


def _common(*, filters: SpendFilters, currency: str, export_url: str) -> dict:
    return {
        "filters": filters,
        "form": filters.form,
        "currency": currency,
        "export_url": export_url,
        "export_query": filters.query_string,
        **_freshness(),
    }


# -- A project's spend -------------------------------------------------------------------------


@dataclass(frozen=True)
class ProjectSpend(SpendSection):
    summary: selectors.MonthSummary
    budget: list[selectors.BudgetLine]
    experiment_costs: selectors.ExperimentCosts
    deployment_costs: list[selectors.DeploymentCost]
    breakdown: dict[str, list[selectors.BreakdownRow]]
    model_api: ModelApiSpend
    experiment_movers: list[selectors.Change]
    deployment_movers: list[selectors.Change]


def project_spend(
    *, project: Project, params: QueryDict, currency: str, filters: SpendFilters | None = None
) -> ProjectSpend:
    """The spend section of the project page (`filters`: project_filters(params), where the
    caller has them)."""
    filters = filters or project_filters(params)
    scope = selectors.project_scope(
        project=project, currency=currency, provider=filters.provider, workload=filters.workload
    )
    period = filters.period
    common = _common(
        filters=filters,
        currency=currency,
        export_url=reverse("project_spend_export", args=[project.slug]),
    )
    # The movers and the runs' costs on the figures thread while the rest is built here; their
    # results are asked for last.
    changes = in_background(
        lambda: selectors.spend_changes(scope=scope, period=period, names_for=MOVERS, models=False)
    )
    experiment_costs = in_background(
        lambda: selectors.experiment_costs(scope=scope, period=period, limit=PROJECT_RUNS)
    )
    series = selectors.spend_series(scope=scope, period=period)
    summary = selectors.month_summary(scope=scope, today=today(), as_of=common["data_as_of"])
    here = {
        "series": series,
        "spend_chart": spend_over_time_chart(series=series, currency=currency),
        "summary": summary,
        "budget": selectors.budget_lines(
            projects=Project.objects.filter(pk=project.pk), summary=summary
        ),
        "deployment_costs": selectors.deployment_costs(scope=scope, period=period),
        "breakdown": selectors.spend_breakdown(scope=scope, period=period),
        "model_api": model_api_spend(scope=scope, period=period),
    }
    # Asked for in the reverse order of their start (see the overview).
    costs = experiment_costs()
    movers = changes()
    return ProjectSpend(
        **common,
        **here,
        experiment_costs=costs,
        experiment_movers=movers.experiment_movers(MOVERS) if period.previous else [],
        deployment_movers=movers.deployment_movers(MOVERS) if period.previous else [],
    )


# -- A model's cost of ownership ----------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpend(SpendSection):
    experiment_costs: selectors.ExperimentCosts
    deployment_costs: list[selectors.DeploymentCost]
    model_api: ModelApiSpend


def model_spend(*, model: Model, user, params: QueryDict, currency: str) -> ModelSpend:
    """The model page's cost of ownership: the runs that produced it, the deployments serving it
    and their storage, over time (all time unless a range is chosen)."""
    filters = owner_filters(params, "all")
    scope = selectors.model_scope(
        model=model, user=user, currency=currency, provider=filters.provider
    )
    common = _common(
        filters=filters,
        currency=currency,
        export_url=reverse("model_spend_export", args=[model.pk]),
    )
    # The runs' and deployments' costs on the figures thread while the rest is built here; their
    # results are asked for last.
    experiment_costs = in_background(
        lambda: selectors.experiment_costs(scope=scope, period=filters.period, limit=MODEL_RUNS)
    )
    deployment_costs = in_background(
        lambda: selectors.deployment_costs(scope=scope, period=filters.period)
    )
    series = selectors.spend_series(scope=scope, period=filters.period, by="component")
    here = {
        "series": series,
        "spend_chart": spend_over_time_chart(
            series=series,
            currency=currency,
            empty_message="No spend on this model's runs or deployments in this period: register "
            "the resources they ran on, or pick a longer range.",
        ),
        "model_api": model_api_spend(scope=scope, period=filters.period),
    }
    deployments = deployment_costs()  # the reverse order of their start (see the overview)
    return ModelSpend(
        **common,
        **here,
        experiment_costs=experiment_costs(),
        deployment_costs=deployments,
    )


# -- An experiment's and a deployment's spend ---------------------------------------------------


def _owner_common(*, scope: selectors.SpendScope, filters: SpendFilters, export_url: str) -> dict:
    common = _common(filters=filters, currency=scope.currency, export_url=export_url)
    series = selectors.spend_series(scope=scope, period=filters.period, by="cost_kind")
    return {
        **common,
        "series": series,
        "spend_chart": spend_over_time_chart(
            series=series,
            currency=scope.currency,
            id="owner-spend",
            empty_message="No billed spend attributed here in this period: register the "
            "resource ids it ran on, or pick a longer range.",
        ),
        "services": selectors.spend_breakdown(
            scope=scope, period=filters.period, dimensions=("service_name",)
        )["service_name"],
    }


def _decimal(value: float) -> Decimal:
    return Decimal(str(value))


@dataclass(frozen=True)
class ExperimentSpend(SpendSection):
    services: list[selectors.BreakdownRow]
    waste: bool
    gpu_hours: float | None
    cost_per_gpu_hour: Decimal | None


def experiment_spend(
    *, experiment: Experiment, params: QueryDict, currency: str
) -> ExperimentSpend:
    """The experiment page's spend: all of the run's life unless a range is chosen."""
    filters = owner_filters(params, EXPERIMENT_PRESET)
    scope = selectors.experiment_scope(
        experiment=experiment, currency=currency, provider=filters.provider
    )
    common = _owner_common(
        scope=scope,
        filters=filters,
        export_url=reverse("experiment_spend_export", args=[experiment.pk]),
    )
    hours = selectors.gpu_hours_by_owner(experiment_ids=[experiment.pk], period=filters.period)
    gpu_hours = hours.get(("experiment", experiment.pk))
    total = common["series"].total
    return ExperimentSpend(
        **common,
        waste=experiment.status == experiment.Status.FAILED and total > 0,
        gpu_hours=gpu_hours,
        cost_per_gpu_hour=total / _decimal(gpu_hours) if gpu_hours else None,
    )


@dataclass(frozen=True)
class DeploymentSpend(SpendSection):
    services: list[selectors.BreakdownRow]
    deployment_cost: selectors.DeploymentCost | None
    gpu_hours: float | None
    cost_per_gpu_hour: Decimal | None
    model_api: ModelApiSpend


def deployment_spend(
    *, deployment: Deployment, params: QueryDict, currency: str
) -> DeploymentSpend:
    """The deployment page's spend: the last 30 days unless a range is chosen."""
    filters = owner_filters(params, DEPLOYMENT_PRESET)
    scope = selectors.deployment_scope(
        deployment=deployment, currency=currency, provider=filters.provider
    )
    common = _owner_common(
        scope=scope,
        filters=filters,
        export_url=reverse("deployment_spend_export", args=[deployment.pk]),
    )
    costs = selectors.deployment_costs(scope=scope, period=filters.period, limit=1)
    cost = costs[0] if costs else None
    return DeploymentSpend(
        **common,
        deployment_cost=cost,
        gpu_hours=cost.gpu_hours if cost else None,
        cost_per_gpu_hour=cost.amount / _decimal(cost.gpu_hours)
        if cost and cost.gpu_hours
        else None,
        model_api=model_api_spend(scope=scope, period=filters.period),
    )


# -- The projects list ---------------------------------------------------------------------------

PROJECT_LIST_PRESETS = ("7d", "30d", "90d", "mtd", "last-month")


@dataclass(frozen=True)
class ProjectListSpend:
    """Each listed project's spend in the period and this month's budget status."""

    period: Period
    currency: str
    amounts: dict[int, Decimal]
    budgets: dict[int, selectors.BudgetLine]

    def rows(self, projects) -> list:
        """The projects with `.spend` and `.budget_line` (None without a budget) set."""
        for project in projects:
            project.spend = self.amounts.get(project.pk, selectors.ZERO)
            project.budget_line = self.budgets.get(project.pk)
        return projects


def project_list_spend(*, user, preset: str, currency: str) -> ProjectListSpend:
    """Two grouped queries on the rollups: spend per project in the period (the spend pages'
    presets; 30 days unless another is chosen), and this month so far with its forecast."""
    period = preset_period(preset if preset in PROJECT_LIST_PRESETS else "30d", today=today())
    scope = selectors.overview_scope(user=user, currency=currency)
    amounts = {
        row["project_id"]: row["amount"]
        for row in scope.daily(period)
        .filter(project__isnull=False, billing_currency=currency)
        .values("project_id")
        .annotate(amount=Sum("effective_cost"))
        .order_by()
    }
    summary = selectors.month_summary(scope=scope, today=today(), as_of=selectors.data_as_of())
    lines = selectors.budget_lines(projects=projects_visible_to(user=user), summary=summary)
    return ProjectListSpend(
        period=period,
        currency=currency,
        amounts=amounts,
        budgets={line.project.pk: line for line in lines},
    )
