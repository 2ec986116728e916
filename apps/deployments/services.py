from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import transaction

from apps.projects.models import Project
from apps.projects.services import resource_uses_replace

from .models import Deployment, Model

# What `deployment_update` may change; a script may send only some (replicas, ended_at).
UPDATABLE_FIELDS = frozenset(
    {
        "model",
        "name",
        "external_id",
        "serving_pattern",
        "replicas",
        "latency_objective_ms",
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

    Returns the ids added or removed: the billed history of exactly these resources is what must be
    attributed again when the list changes.
    """
    return resource_uses_replace(uses=deployment.resources, resource_ids=resource_ids)
