from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import transaction

from apps.deployments.models import Model
from apps.projects.models import Project
from apps.projects.services import resource_uses_replace

from .models import Experiment

# What `experiment_update` may change: a script reporting progress sends only some of them
# (status, ended_at), a page sends all.
UPDATABLE_FIELDS = frozenset(
    {
        "name",
        "external_id",
        "kind",
        "status",
        "started_at",
        "ended_at",
        "model",
        "instance_type",
        "gpu_type",
        "gpu_count",
        "is_spot",
        "region",
        "tags",
    }
)


@transaction.atomic
def experiment_create(
    *,
    project: Project,
    name: str,
    external_id: str = "",
    kind: str = Experiment.Kind.TRAINING,
    status: str = Experiment.Status.PLANNED,
    started_at: datetime | None = None,
    ended_at: datetime | None = None,
    model: Model | None = None,
    instance_type: str = "",
    gpu_type: str = "",
    gpu_count: int = 0,
    is_spot: bool = False,
    region: str = "",
    tags: dict[str, str] | None = None,
    resource_ids: Iterable[str] = (),
    created_by=None,
) -> Experiment:
    experiment = Experiment.objects.create(
        project=project,
        name=name,
        external_id=external_id,
        kind=kind,
        status=status,
        started_at=started_at,
        ended_at=ended_at,
        model=model,
        instance_type=instance_type,
        gpu_type=gpu_type,
        gpu_count=gpu_count,
        is_spot=is_spot,
        region=region,
        tags=tags or {},
        created_by=created_by,
    )
    _resources_replace(experiment=experiment, resource_ids=resource_ids)
    return experiment


@transaction.atomic
def experiment_update(
    *, experiment: Experiment, resource_ids: Iterable[str] | None = None, **changes: Any
) -> Experiment:
    """Change the given fields (any of UPDATABLE_FIELDS) and, unless None, the resource ids."""
    unknown = set(changes) - UPDATABLE_FIELDS
    if unknown:
        raise TypeError(f"experiment_update() cannot change {', '.join(sorted(unknown))}")
    for field, value in changes.items():
        setattr(experiment, field, value)
    experiment.save()
    if resource_ids is not None:
        _resources_replace(experiment=experiment, resource_ids=resource_ids)
    return experiment


def _resources_replace(*, experiment: Experiment, resource_ids: Iterable[str]) -> set[str]:
    """The one place an experiment's resource ids change.

    Returns the ids added or removed: the billed history of exactly these resources is what must be
    attributed again when the list changes.
    """
    return resource_uses_replace(uses=experiment.resources, resource_ids=resource_ids)
