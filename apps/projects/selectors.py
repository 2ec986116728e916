from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date

from django.db.models import Count, F, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce, TruncMonth
from django.http import Http404

from apps.accounts.memo import RequestMemo
from apps.accounts.models import Membership
from apps.accounts.selectors import leads_a_team
from apps.deployments.models import Deployment, DeploymentResource, Model
from apps.experiments.models import Experiment, ExperimentResource

from .models import AllocationRule, Project, Workload, tail_of, usual_workload

# The columns the project list sorts by: ?sort=<key> or ?sort=-<key>.
PROJECT_SORTS = {
    "name": "name",
    "team": "team__name",
    "budget": "monthly_budget",
    "experiments": "experiment_count",
    "running": "running_count",
    "models": "model_count",
    "deployments": "deployment_count",
}


def _count(queryset: QuerySet) -> Coalesce:
    """A correlated COUNT per project: one subquery each keeps several counts from multiplying
    one another, as joins would."""
    counted = (
        queryset.filter(project=OuterRef("pk"))
        .order_by()
        .values("project")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def project_list(*, user, sort: str = "name") -> QuerySet[Project]:
    """The projects the user may see, with the counts the list shows, sorted by a known column
    (an unknown one sorts by name)."""
    key = sort.removeprefix("-")
    order = PROJECT_SORTS.get(key, "name")
    if sort.startswith("-") and key in PROJECT_SORTS:
        order = f"-{order}"
    return (
        projects_visible_to(user=user)
        .select_related("team")
        .annotate(
            experiment_count=_count(Experiment.objects.all()),
            running_count=_count(Experiment.objects.filter(status=Experiment.Status.RUNNING)),
            model_count=_count(Model.objects.all()),
            deployment_count=_count(Deployment.objects.all()),
        )
        .order_by(order, "name")
    )


def project_experiments(*, project: Project) -> QuerySet[Experiment]:
    """Newest first; runs not started yet (planned) lead, as they are what comes next."""
    return (
        project.experiments.select_related("model")
        .annotate(resource_count=Count("resources"))
        .order_by(F("started_at").desc(nulls_first=True), "-pk")
    )


def project_models(*, project: Project) -> QuerySet[Model]:
    return project.models.annotate(
        experiment_count=_count_by(Experiment, "model"),
        deployment_count=_count_by(Deployment, "model"),
    ).order_by("name")


def _count_by(model, field: str) -> Coalesce:
    counted = (
        model.objects.filter(**{field: OuterRef("pk")})
        .order_by()
        .values(field)
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def project_deployments(*, project: Project) -> QuerySet[Deployment]:
    return project.deployments.select_related("model").order_by("name")


@dataclass(frozen=True)
class MonthStatusCount:
    month: date
    status: str
    count: int


def project_experiments_by_month(*, project: Project) -> list[MonthStatusCount]:
    """How many runs started each month (in the organisation's time zone), by status.

    Runs without a start (planned ones, mostly) have no month and are left out.
    """
    rows = (
        project.experiments.filter(started_at__isnull=False)
        .annotate(month=TruncMonth("started_at"))
        .values("month", "status")
        .annotate(count=Count("pk"))
        .order_by("month", "status")
    )
    return [
        MonthStatusCount(month=row["month"].date(), status=row["status"], count=row["count"])
        for row in rows
    ]


@dataclass(frozen=True)
class RuleGpuWorkload:
    """What GPU compute counts as when rules give it to the project without a workload."""

    rules: int  # the project's rules (and claims) on the project alone, without a workload
    workload: str | None  # the project's usual workload; None: nothing registered to take it from

    @property
    def label(self) -> str:
        return Workload(self.workload or Workload.OTHER).label.lower()


def project_usual_workload(*, project: Project) -> str | None:
    """The project's usual workload (`usual_workload`), from its registered runs and
    deployments, as billing's attribution reads it."""
    workloads = [
        Experiment(kind=kind).workload
        for kind in project.experiments.values_list("kind", flat=True)
    ]
    workloads += [Workload.INFERENCE.value] * project.deployments.count()
    return usual_workload(workloads)


def project_rule_gpu_workload(*, project: Project) -> RuleGpuWorkload | None:
    """None when no rule gives the project spend without naming a workload or an owner."""
    rules = AllocationRule.objects.filter(
        project=project, workload="", experiment=None, deployment=None
    ).count()
    if not rules:
        return None
    return RuleGpuWorkload(rules=rules, workload=project_usual_workload(project=project))


# Who may see what of this app (the rules: apps/accounts/selectors.py).


def projects_visible_to(*, user) -> QuerySet[Project]:
    return Project.objects.visible_to(user)


def visible_project_ids(*, user) -> tuple[int, ...] | None:
    """The ids of the projects the user sees, sorted; None for staff, who see every project.

    A figure filtered by these ids, rather than by a subquery naming the user, compiles to the
    same SQL for everyone who sees the same projects, so a team shares its cached figures (they
    are keyed by their SQL), and the planner reads each project's rows from its (project, day)
    index. Read once per request: a page asks several times (a project or a membership saved or
    deleted in the request makes it read again)."""
    if user.is_staff:
        return None
    return _visible.get(
        user.pk,
        lambda: tuple(
            sorted(set(Project.objects.visible_to(user).values_list("pk", flat=True).order_by()))
        ),
    )


_visible = RequestMemo("visible-project-ids", models=(Project, Membership))


def projects_editable_by(*, user) -> QuerySet[Project]:
    return Project.objects.editable_by(user)


def can_edit_project(*, user, project: Project) -> bool:
    return projects_editable_by(user=user).filter(pk=project.pk).exists()


def can_create_project(*, user) -> bool:
    return leads_a_team(user=user)


def project_for_user(*, user, slug: str, edit: bool = False) -> Project:
    """The project, if the user may see it (or, with `edit`, change it); else 404."""
    projects = projects_editable_by(user=user) if edit else projects_visible_to(user=user)
    try:
        return projects.select_related("team").get(slug=slug)
    except Project.DoesNotExist:
        raise Http404("No such project.") from None


# Registering resources ---------------------------------------------------------------------------


def _resource_keys(resource_id: str) -> set[str]:
    """The names a GPU is joined to a registered resource by (apps/gpu/selectors.py): the id
    itself and, for an ARN or a path, its last part."""
    return {resource_id, tail_of(resource_id)}


def resource_ids_out_of_sight(*, user, resource_ids: Iterable[str], owner=None) -> list[str]:
    """Those of `resource_ids` that a run or deployment of a project the user cannot see has
    registered, compared as GPUs are joined to them. Registering one of them would show the user
    that project's GPUs (host, UUID, utilisation), so the registration is refused. Ids the owner
    (the experiment or deployment being changed) has already are never refused: keeping them
    grants nothing new."""
    kept = set(owner.resources.values_list("resource_id", flat=True)) if owner else set()
    new = [rid for rid in dict.fromkeys(resource_ids) if rid not in kept]
    if not new or user.is_staff:
        return []
    keys = set().union(*(_resource_keys(rid) for rid in new))
    # Its id or its tail (ResourceUse.tail, `_resource_keys`' cut) one of the keys: read from
    # their indexes. (An id ending in `/` escaped the `LIKE '%/key'` this replaces.)
    matches = Q(resource_id__in=keys) | Q(tail__in=keys)
    visible = projects_visible_to(user=user)
    registered = set(
        ExperimentResource.objects.filter(matches)
        .exclude(experiment__project__in=visible)
        .values_list("resource_id", flat=True)
    ) | set(
        DeploymentResource.objects.filter(matches)
        .exclude(deployment__project__in=visible)
        .values_list("resource_id", flat=True)
    )
    hidden = set().union(*(_resource_keys(rid) for rid in registered)) if registered else set()
    return [rid for rid in new if _resource_keys(rid) & hidden]


def resource_out_of_sight_message(resource_id: str) -> str:
    return (
        f"“{resource_id}” is registered by a run or deployment of a project you cannot see; "
        "registering it here would show you that project's GPUs. Ask staff to sort out who "
        "runs on it."
    )
