from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.deployments.models import Model
from apps.projects.models import Project
from apps.projects.services import (
    ResourceWindow,
    Upserted,
    resource_uses_replace,
    resource_windows_replace,
)

from .models import FINISHED_STATUSES, TRANSITIONS, Experiment, MetricPoint

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

    Returns the ids added or removed; `resource_uses_replace` announces them, so the billed
    history of exactly these resources is attributed again (pages and API alike).
    """
    return resource_uses_replace(uses=experiment.resources, resource_ids=resource_ids)


def hardware_and_window_errors(owner) -> dict[str, list[str]]:
    """The rules of the registration forms (apps/experiments/forms.py), for writes that do not go
    through a form: the end comes after the start, and a GPU count goes with a GPU type."""
    errors: dict[str, list[str]] = {}
    if owner.started_at and owner.ended_at and owner.ended_at < owner.started_at:
        errors["ended_at"] = ["The end must be after the start."]
    if owner.gpu_count and not owner.gpu_type:
        errors["gpu_type"] = ["Give the GPU type when the GPU count is above zero."]
    if owner.gpu_type and owner.gpu_count == 0:
        errors["gpu_count"] = ["Give the number of GPUs of this type (at least 1)."]
    return errors


@dataclass(frozen=True)
class ExperimentRegistration:
    experiment: Experiment
    created: bool


def experiment_register(
    *,
    project: Project,
    external_id: str,
    changes: dict[str, Any],
    resources: list[ResourceWindow] | None = None,
    created_by=None,
) -> ExperimentRegistration:
    """Create the run with this external id in the project, or update it with `changes` (any of
    UPDATABLE_FIELDS but external_id): what a training script does, so a retried call never makes
    a second run. `resources`, unless None, replaces the run's resource uses.

    Unlike the edit page, a script may only move the status along TRANSITIONS. Becoming running
    stamps the start (and clears any end: a stopped run resumes); becoming finished stamps the
    end, unless the call gives them. Raises ValidationError (by field) and then writes nothing.
    """
    try:
        return _experiment_register(
            project=project,
            external_id=external_id,
            changes=changes,
            resources=resources,
            created_by=created_by,
        )
    except IntegrityError:
        # Two calls for a new run raced (a script retried a request that timed out while it was
        # still running): the loser finds the winner's row and updates it.
        return _experiment_register(
            project=project,
            external_id=external_id,
            changes=changes,
            resources=resources,
            created_by=created_by,
        )


@transaction.atomic
def _experiment_register(
    *,
    project: Project,
    external_id: str,
    changes: dict[str, Any],
    resources: list[ResourceWindow] | None,
    created_by,
) -> ExperimentRegistration:
    unknown = set(changes) - (UPDATABLE_FIELDS - {"external_id"})
    if unknown:
        raise TypeError(f"experiment_register() cannot change {', '.join(sorted(unknown))}")
    experiment = (
        Experiment.objects.select_for_update()
        .filter(project=project, external_id=external_id)
        .first()
    )
    created = experiment is None
    if created:
        experiment = Experiment(
            project=project, external_id=external_id, name=external_id, created_by=created_by
        )
    old_status = experiment.status
    errors: dict[str, list[str]] = {}
    new_status = changes.get("status", old_status)
    if not created and new_status != old_status and new_status not in TRANSITIONS[old_status]:
        errors["status"] = [_transition_message(experiment, new_status)]
    for field, value in changes.items():
        setattr(experiment, field, value)
    status_moved = created or new_status != old_status
    now = timezone.now()
    if new_status == Experiment.Status.RUNNING:
        if changes.get("ended_at") is not None:
            errors["ended_at"] = [
                "A running experiment has no end yet: leave out ended_at or change the status."
            ]
        else:
            if status_moved:
                experiment.ended_at = None
            if experiment.started_at is None:
                experiment.started_at = now
    elif new_status in FINISHED_STATUSES and status_moved and experiment.ended_at is None:
        experiment.ended_at = now
    for field, messages in hardware_and_window_errors(experiment).items():
        errors.setdefault(field, []).extend(messages)
    if errors:
        raise ValidationError(errors)
    experiment.save()
    if resources is not None:
        # Announces the changed ids: their billed history belongs elsewhere now.
        resource_windows_replace(uses=experiment.resources, windows=resources)
    return ExperimentRegistration(experiment=experiment, created=created)


def _transition_message(experiment: Experiment, new_status: str) -> str:
    old = experiment.status
    prefix = f"Cannot change the status from {old} to {new_status}: "
    if old in (Experiment.Status.SUCCEEDED, Experiment.Status.FAILED):
        return (
            prefix + f"a {old} run is finished. Register a retry as a new experiment with its "
            "own external_id."
        )
    allowed = experiment.next_statuses()
    listed = ", ".join(allowed[:-1]) + " or " + allowed[-1] if len(allowed) > 1 else allowed[0]
    return prefix + f"a {old} run can only become {listed}."


@dataclass(frozen=True)
class MetricValues:
    """The values of several metrics at one training step."""

    step: int
    values: dict[str, float]
    recorded_at: datetime | None = None


@transaction.atomic
def experiment_metrics_record(
    *, experiment: Experiment, points: Iterable[MetricValues]
) -> Upserted:
    """Store the points; a step sent again overwrites its value (the last one sent wins, also
    within one batch), so a retried batch never duplicates."""
    rows: dict[tuple[str, int], MetricPoint] = {}
    for point in points:
        for name, value in point.values.items():
            rows[(name, point.step)] = MetricPoint(
                experiment=experiment,
                name=name,
                step=point.step,
                value=value,
                recorded_at=point.recorded_at,
            )
    if not rows:
        return Upserted(created=0, updated=0)
    existing = set(
        MetricPoint.objects.filter(
            experiment=experiment, step__in={step for _, step in rows}
        ).values_list("name", "step")
    )
    MetricPoint.objects.bulk_create(
        rows.values(),
        update_conflicts=True,
        unique_fields=["experiment", "name", "step"],
        update_fields=["value", "recorded_at"],
        batch_size=2000,
    )
    updated = len(existing & rows.keys())
    return Upserted(created=len(rows) - updated, updated=updated)
