from django.http import HttpRequest
from ninja import Router, Status

from apps.experiments import selectors, services
from apps.experiments.models import Experiment
from apps.experiments.selectors import external_experiment_for_user
from apps.projects.selectors import project_for_user

from ..common import (
    ERRORS,
    model_for_ref,
    model_ref_out,
    page_url,
    refuse_resources_out_of_sight,
    uses_out,
    windows,
)
from ..schemas import (
    ExperimentIn,
    ExperimentOut,
    ExternalId,
    MetricsIn,
    MetricsOut,
    Slug,
    Upserted,
)

router = Router(tags=["experiments"])
PATH = "/{slug}/experiments/{external_id}"


def _out(request: HttpRequest, experiment: Experiment) -> dict:
    return {
        "id": experiment.pk,
        "url": page_url(request, "experiment_detail", experiment.pk),
        "project": experiment.project.slug,
        "external_id": experiment.external_id,
        "name": experiment.name,
        "kind": experiment.kind,
        "status": experiment.status,
        "started_at": experiment.started_at,
        "ended_at": experiment.ended_at,
        "model": model_ref_out(user=request.user, model=experiment.model),
        "instance_type": experiment.instance_type,
        "gpu_type": experiment.gpu_type,
        "gpu_count": experiment.gpu_count,
        "is_spot": experiment.is_spot,
        "region": experiment.region,
        "tags": experiment.tags,
        "resources": uses_out(experiment.resources),
    }


@router.put(
    PATH,
    response={200: ExperimentOut, 201: ExperimentOut, **ERRORS},
    summary="Create or update an experiment",
)
def experiment_put(
    request: HttpRequest, slug: Slug, external_id: ExternalId, payload: ExperimentIn
):
    """Create the run with this external id, or update it (201 when created, 200 when updated).

    Idempotent: a script that retries the call still has one run. Fields left out keep their
    value. `resources`, when given, replaces the run's resource ids.
    """
    project = project_for_user(user=request.user, slug=slug)
    changes = payload.model_dump(exclude_unset=True, exclude={"model", "resources"})
    if "model" in payload.model_fields_set:
        changes["model"] = model_for_ref(user=request.user, project=project, ref=payload.model)
    refuse_resources_out_of_sight(
        user=request.user,
        uses=payload.resources if "resources" in payload.model_fields_set else None,
        owner=Experiment.objects.filter(project=project, external_id=external_id).first(),
    )
    registration = services.experiment_register(
        project=project,
        external_id=external_id,
        changes=changes,
        resources=windows(payload.resources) if "resources" in payload.model_fields_set else None,
        created_by=request.user,
    )
    return Status(201 if registration.created else 200, _out(request, registration.experiment))


@router.get(PATH, response={200: ExperimentOut, **ERRORS}, summary="Read an experiment")
def experiment_get(request: HttpRequest, slug: Slug, external_id: ExternalId):
    experiment = external_experiment_for_user(user=request.user, slug=slug, external_id=external_id)
    return _out(request, experiment)


@router.post(PATH + "/metrics", response={200: Upserted, **ERRORS}, summary="Record metric points")
def experiment_metrics_post(
    request: HttpRequest, slug: Slug, external_id: ExternalId, payload: MetricsIn
):
    """Record metric points (e.g. the loss by step), many per call. A step sent again overwrites
    its value, so a retried batch never duplicates."""
    experiment = external_experiment_for_user(user=request.user, slug=slug, external_id=external_id)
    written = services.experiment_metrics_record(
        experiment=experiment,
        points=[
            services.MetricValues(step=point.step, values=point.values, recorded_at=point.time)
            for point in payload.points
        ],
    )
    return {"created": written.created, "updated": written.updated}


@router.get(
    PATH + "/metrics",
    response={200: MetricsOut, **ERRORS},
    summary="Summarise an experiment's metrics",
)
def experiment_metrics_get(request: HttpRequest, slug: Slug, external_id: ExternalId):
    """Each metric of the run: how many points, its step range, its last, lowest and highest
    value."""
    experiment = external_experiment_for_user(user=request.user, slug=slug, external_id=external_id)
    return {"metrics": selectors.experiment_metric_summaries(experiment=experiment)}
