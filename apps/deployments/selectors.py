from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import Max, QuerySet
from django.http import Http404

from apps.experiments.models import Experiment
from apps.experiments.selectors import experiments_visible_to
from apps.projects.selectors import project_for_user, projects_visible_to

from .models import Deployment, DeploymentResource, Model, TrafficHour


def model_experiments(*, model: Model, user) -> QuerySet[Experiment]:
    """The runs that produced the model, among those the user may see (a run of another team's
    project may have produced it)."""
    return (
        experiments_visible_to(user=user)
        .filter(model=model)
        .select_related("project")
        .order_by("-started_at", "-pk")
    )


def model_deployments(*, model: Model, user) -> QuerySet[Deployment]:
    """The deployments that serve the model, among those the user may see."""
    return (
        deployments_visible_to(user=user)
        .filter(model=model)
        .select_related("project")
        .order_by("name")
    )


def deployment_resources(*, deployment: Deployment) -> QuerySet[DeploymentResource]:
    return deployment.resources.order_by("resource_id", "started_at")


def deployment_model_for_user(*, deployment: Deployment, user) -> Model | None:
    """The served model, if the user may see it (it may belong to another team's project)."""
    return models_visible_to(user=user).filter(pk=deployment.model_id).first()


# The deployment page shows the last two weeks of reported traffic, counted back from the latest
# reported hour (a deployment that stopped reporting still shows what it last served).
TRAFFIC_PAGE_DAYS = 14


def deployment_traffic(*, deployment: Deployment, start: datetime, end: datetime) -> QuerySet:
    """The hours in [start, end), in order."""
    return deployment.traffic.filter(hour__gte=start, hour__lt=end).order_by("hour")


@dataclass(frozen=True)
class TrafficSummary:
    hours: list[TrafficHour]
    requests: int
    duplicate_requests: int
    tokens_in: int
    tokens_out: int
    hours_over_objective: int | None  # None: no latency objective to compare with

    @property
    def duplicate_share(self) -> Decimal | None:
        """The share of requests a cache of repeated requests would have answered."""
        if not self.requests:
            return None
        return Decimal(self.duplicate_requests) / Decimal(self.requests)


def deployment_recent_traffic(
    *, deployment: Deployment, days: int = TRAFFIC_PAGE_DAYS
) -> TrafficSummary | None:
    latest = deployment.traffic.aggregate(latest=Max("hour"))["latest"]
    if latest is None:
        return None
    hours = list(
        deployment_traffic(
            deployment=deployment,
            start=latest - timedelta(days=days) + timedelta(hours=1),
            end=latest + timedelta(hours=1),
        )
    )
    objective = deployment.latency_objective_ms
    return TrafficSummary(
        hours=hours,
        requests=sum(hour.requests for hour in hours),
        duplicate_requests=sum(hour.duplicate_requests for hour in hours),
        tokens_in=sum(hour.tokens_in for hour in hours),
        tokens_out=sum(hour.tokens_out for hour in hours),
        hours_over_objective=None
        if objective is None
        else sum(
            1
            for hour in hours
            if hour.latency_p95_ms is not None and hour.latency_p95_ms > objective
        ),
    )


# Who may see what of this app (the rules: apps/accounts/selectors.py).


def model_for_user(*, user, pk: int) -> Model:
    """The model, if the user may see its project. Whoever sees it may also edit it."""
    try:
        return Model.objects.select_related("project__team").get(
            pk=pk, project__in=projects_visible_to(user=user)
        )
    except Model.DoesNotExist:
        raise Http404("No such model.") from None


def deployment_for_user(*, user, pk: int) -> Deployment:
    """The deployment, if the user may see its project. Whoever sees it may also edit it."""
    try:
        return Deployment.objects.select_related("project__team", "model__project").get(
            pk=pk, project__in=projects_visible_to(user=user)
        )
    except Deployment.DoesNotExist:
        raise Http404("No such deployment.") from None


def models_visible_to(*, user) -> QuerySet[Model]:
    return Model.objects.filter(project__in=projects_visible_to(user=user))


def deployments_visible_to(*, user) -> QuerySet[Deployment]:
    return Deployment.objects.filter(project__in=projects_visible_to(user=user))


def external_model_for_user(*, user, slug: str, external_id: str) -> Model:
    project = project_for_user(user=user, slug=slug)
    try:
        return Model.objects.select_related("project").get(project=project, external_id=external_id)
    except Model.DoesNotExist:
        raise Http404(
            f"No model with the external id “{external_id}” in the project “{slug}”."
        ) from None


def external_deployment_for_user(*, user, slug: str, external_id: str) -> Deployment:
    project = project_for_user(user=user, slug=slug)
    try:
        return Deployment.objects.select_related("project", "model__project").get(
            project=project, external_id=external_id
        )
    except Deployment.DoesNotExist:
        raise Http404(
            f"No deployment with the external id “{external_id}” in the project “{slug}”."
        ) from None
