from dataclasses import dataclass

from django.db.models import Count, F, Max, Min, OuterRef, QuerySet, Subquery, Window
from django.db.models.functions import Mod, RowNumber
from django.http import Http404

from apps.deployments.models import Model
from apps.projects.selectors import project_for_user, projects_visible_to

from .models import Experiment, ExperimentResource, MetricPoint

# Points per metric on the experiment page: plenty for a line, and a page that stays light
# whatever the length of the run.
SERIES_POINTS = 2000


def experiment_resources(*, experiment: Experiment) -> QuerySet[ExperimentResource]:
    return experiment.resources.order_by("resource_id", "started_at")


def experiment_model_for_user(*, experiment: Experiment, user) -> Model | None:
    """The model the run produces, if the user may see it: a run may produce a model of another
    team's project, and its name is then not ours to show."""
    if experiment.model_id is None:
        return None
    # models_visible_to (apps/deployments/selectors.py), without importing it back
    models = Model.objects.filter(project__in=projects_visible_to(user=user))
    return models.filter(pk=experiment.model_id).first()


@dataclass(frozen=True)
class MetricSummary:
    name: str
    points: int
    first_step: int
    last_step: int
    last_value: float
    min_value: float
    max_value: float


def experiment_metric_summaries(*, experiment: Experiment) -> list[MetricSummary]:
    last_value = (
        MetricPoint.objects.filter(experiment=experiment, name=OuterRef("name"))
        .order_by("-step")
        .values("value")[:1]
    )
    rows = (
        MetricPoint.objects.filter(experiment=experiment)
        .values("name")
        .annotate(
            points=Count("id"),
            first_step=Min("step"),
            last_step=Max("step"),
            min_value=Min("value"),
            max_value=Max("value"),
            last_value=Subquery(last_value),
        )
        .order_by("name")
    )
    return [MetricSummary(**row) for row in rows]


@dataclass(frozen=True)
class MetricSeries:
    name: str
    steps: list[int]
    values: list[float]


def experiment_metric_series(
    *, experiment: Experiment, max_points: int = SERIES_POINTS
) -> list[MetricSeries]:
    """Every metric of the run in step order, thinned in the database to about `max_points` per
    metric (every n-th point, and always the last, where the run ends)."""
    numbered = MetricPoint.objects.filter(experiment=experiment).annotate(
        position=Window(RowNumber(), partition_by=[F("name")], order_by=F("step").asc()),
        total=Window(Count("id"), partition_by=[F("name")]),
    )
    # Integer division on both databases: the stride is the ceiling of total / max_points.
    stride = (F("total") + (max_points - 1)) / max_points
    kept = (
        numbered.annotate(phase=Mod(F("position") - 1, stride))
        .filter(phase=0)
        .values_list("name", "step", "value")
        .order_by("name", "step")
    )
    last = numbered.filter(position=F("total")).values_list("name", "step", "value")
    points: dict[str, dict[int, float]] = {}
    for name, step, value in [*kept, *last]:
        points.setdefault(name, {})[step] = value
    return [
        MetricSeries(name=name, steps=sorted(by_step), values=[by_step[s] for s in sorted(by_step)])
        for name, by_step in sorted(points.items())
    ]


# Who may see what of this app (the rules: apps/accounts/selectors.py).


def experiment_for_user(*, user, pk: int) -> Experiment:
    """The experiment, if the user may see its project. Whoever sees it may also edit it."""
    try:
        return Experiment.objects.select_related("project__team", "model", "created_by").get(
            pk=pk, project__in=projects_visible_to(user=user)
        )
    except Experiment.DoesNotExist:
        raise Http404("No such experiment.") from None


def experiments_visible_to(*, user) -> QuerySet[Experiment]:
    return Experiment.objects.filter(project__in=projects_visible_to(user=user))


def external_experiment_for_user(*, user, slug: str, external_id: str) -> Experiment:
    project = project_for_user(user=user, slug=slug)
    try:
        return Experiment.objects.select_related("project", "model__project").get(
            project=project, external_id=external_id
        )
    except Experiment.DoesNotExist:
        raise Http404(
            f"No experiment with the external id “{external_id}” in the project “{slug}”."
        ) from None
