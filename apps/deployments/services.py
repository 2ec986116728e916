from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.experiments.services import hardware_and_window_errors
from apps.projects.models import Project
from apps.projects.services import (
    ResourceWindow,
    Upserted,
    resource_uses_replace,
    resource_windows_replace,
)

from .models import Deployment, Model, TrafficHour

# What `deployment_update` may change; a script may send only some (replicas, ended_at).
UPDATABLE_FIELDS = frozenset(
    {
        "model",
        "name",
        "external_id",
        "serving_pattern",
        "replicas",
        "latency_objective_ms",
        "cold_start_seconds",
        "data_residency",
        "is_fine_tuned",
        "started_at",
        "ended_at",
        "instance_type",
        "gpu_type",
        "gpu_count",
        "is_spot",
        "region",
        "tags",
    }
)


@transaction.atomic
def model_create(
    *, project: Project, name: str, external_id: str = "", description: str = ""
) -> Model:
    return Model.objects.create(
        project=project, name=name, external_id=external_id, description=description
    )


@transaction.atomic
def model_update(*, model: Model, name: str, external_id: str, description: str) -> Model:
    model.name = name
    model.external_id = external_id
    model.description = description
    model.save()
    return model


@transaction.atomic
def deployment_create(
    *,
    project: Project,
    model: Model,
    name: str,
    external_id: str = "",
    serving_pattern: str = Deployment.ServingPattern.REALTIME,
    replicas: int = 1,
    latency_objective_ms: int | None = None,
    cold_start_seconds: int | None = None,
    data_residency: bool = False,
    is_fine_tuned: bool = False,
    started_at: datetime | None = None,
    ended_at: datetime | None = None,
    instance_type: str = "",
    gpu_type: str = "",
    gpu_count: int = 0,
    is_spot: bool = False,
    region: str = "",
    tags: dict[str, str] | None = None,
    resource_ids: Iterable[str] = (),
) -> Deployment:
    deployment = Deployment.objects.create(
        project=project,
        model=model,
        name=name,
        external_id=external_id,
        serving_pattern=serving_pattern,
        replicas=replicas,
        latency_objective_ms=latency_objective_ms,
        cold_start_seconds=cold_start_seconds,
        data_residency=data_residency,
        is_fine_tuned=is_fine_tuned,
        started_at=started_at,
        ended_at=ended_at,
        instance_type=instance_type,
        gpu_type=gpu_type,
        gpu_count=gpu_count,
        is_spot=is_spot,
        region=region,
        tags=tags or {},
    )
    _resources_replace(deployment=deployment, resource_ids=resource_ids)
    return deployment


@transaction.atomic
def deployment_update(
    *, deployment: Deployment, resource_ids: Iterable[str] | None = None, **changes: Any
) -> Deployment:
    """Change the given fields (any of UPDATABLE_FIELDS) and, unless None, the resource ids."""
    unknown = set(changes) - UPDATABLE_FIELDS
    if unknown:
        raise TypeError(f"deployment_update() cannot change {', '.join(sorted(unknown))}")
    for field, value in changes.items():
        setattr(deployment, field, value)
    deployment.save()
    if resource_ids is not None:
        _resources_replace(deployment=deployment, resource_ids=resource_ids)
    return deployment


def _resources_replace(*, deployment: Deployment, resource_ids: Iterable[str]) -> set[str]:
    """The one place a deployment's resource ids change.

    Returns the ids added or removed; `resource_uses_replace` announces them, so the billed
    history of exactly these resources is attributed again (pages and API alike).
    """
    return resource_uses_replace(uses=deployment.resources, resource_ids=resource_ids)


@dataclass(frozen=True)
class ModelRegistration:
    model: Model
    created: bool


@dataclass(frozen=True)
class DeploymentRegistration:
    deployment: Deployment
    created: bool


def _retrying_a_race(register, **kwargs):
    """Two calls for a new row raced (a client retried a request that timed out while it was
    still running): the loser's insert fails on the unique external id, and its second try finds
    the winner's row and updates it."""
    try:
        return register(**kwargs)
    except IntegrityError:
        return register(**kwargs)


def model_register(
    *, project: Project, external_id: str, changes: dict[str, Any]
) -> ModelRegistration:
    """Create the model with this external id in the project, or update it with `changes` (name,
    description). A new model without a name is named after its external id."""
    return _retrying_a_race(
        _model_register, project=project, external_id=external_id, changes=changes
    )


@transaction.atomic
def _model_register(
    *, project: Project, external_id: str, changes: dict[str, Any]
) -> ModelRegistration:
    unknown = set(changes) - {"name", "description"}
    if unknown:
        raise TypeError(f"model_register() cannot change {', '.join(sorted(unknown))}")
    model = Model.objects.select_for_update().filter(project=project, external_id=external_id)
    model = model.first()
    created = model is None
    if created:
        model = Model(project=project, external_id=external_id, name=external_id)
    for field, value in changes.items():
        setattr(model, field, value)
    namesake = Model.objects.filter(project=project, name=model.name).exclude(pk=model.pk)
    if namesake.exists():
        raise ValidationError(
            {"name": [f"A model named “{model.name}” already exists in this project."]}
        )
    model.save()
    return ModelRegistration(model=model, created=created)


def deployment_register(
    *,
    project: Project,
    external_id: str,
    changes: dict[str, Any],
    resources: list[ResourceWindow] | None = None,
) -> DeploymentRegistration:
    """Create the deployment with this external id in the project, or update it with `changes`
    (any of UPDATABLE_FIELDS but external_id); `resources`, unless None, replaces its resource
    uses. A new deployment needs its model; without a name it is named after its external id.
    Raises ValidationError (by field) and then writes nothing."""
    return _retrying_a_race(
        _deployment_register,
        project=project,
        external_id=external_id,
        changes=changes,
        resources=resources,
    )


@transaction.atomic
def _deployment_register(
    *,
    project: Project,
    external_id: str,
    changes: dict[str, Any],
    resources: list[ResourceWindow] | None,
) -> DeploymentRegistration:
    unknown = set(changes) - (UPDATABLE_FIELDS - {"external_id"})
    if unknown:
        raise TypeError(f"deployment_register() cannot change {', '.join(sorted(unknown))}")
    deployment = (
        Deployment.objects.select_for_update()
        .filter(project=project, external_id=external_id)
        .first()
    )
    created = deployment is None
    if created:
        deployment = Deployment(project=project, external_id=external_id, name=external_id)
    for field, value in changes.items():
        setattr(deployment, field, value)
    errors = hardware_and_window_errors(deployment)
    if deployment.model_id is None:
        errors["model"] = ["A new deployment needs the model it serves."]
    if errors:
        raise ValidationError(errors)
    deployment.save()
    if resources is not None:
        # Announces the changed ids: their billed history belongs elsewhere now.
        resource_windows_replace(uses=deployment.resources, windows=resources)
    return DeploymentRegistration(deployment=deployment, created=created)


@dataclass(frozen=True)
class TrafficFigures:
    """What a deployment served in one hour (`hour`: its start, in UTC)."""

    hour: datetime
    requests: int
    duplicate_requests: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    latency_p99_ms: float | None = None


@transaction.atomic
def deployment_traffic_record(
    *, deployment: Deployment, hours: Iterable[TrafficFigures]
) -> Upserted:
    """Store the hours; an hour sent again replaces its figures (the last one sent wins, also
    within one batch)."""
    now = timezone.now()
    rows = {
        figures.hour: TrafficHour(deployment=deployment, updated_at=now, **vars(figures))
        for figures in hours
    }
    if not rows:
        return Upserted(created=0, updated=0)
    existing = set(
        TrafficHour.objects.filter(deployment=deployment, hour__in=rows).values_list(
            "hour", flat=True
        )
    )
    TrafficHour.objects.bulk_create(
        rows.values(),
        update_conflicts=True,
        unique_fields=["deployment", "hour"],
        update_fields=[
            "requests",
            "duplicate_requests",
            "tokens_in",
            "tokens_out",
            "latency_p50_ms",
            "latency_p95_ms",
            "latency_p99_ms",
            "updated_at",
        ],
        batch_size=2000,
    )
    updated = len(existing & rows.keys())
    return Upserted(created=len(rows) - updated, updated=updated)


def deployment_traffic_import_log(*, deployment: Deployment, stream, name: str) -> Upserted:
    """A request log's hours (request_log.py) stored as the API stores hours: all or nothing
    (a bad cell raises ValidationError naming its row and column and nothing is written), an
    hour sent again replacing its figures."""
    from .request_log import request_log_hours  # it builds this module's TrafficFigures

    return deployment_traffic_record(
        deployment=deployment, hours=request_log_hours(stream, name=name)
    )
