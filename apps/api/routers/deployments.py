from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.utils import timezone
from ninja import File, Router, Status, UploadedFile

from apps.deployments import selectors, services
from apps.deployments.models import Deployment
from apps.deployments.selectors import external_deployment_for_user
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
    DeploymentIn,
    DeploymentOut,
    ExternalId,
    Moment,
    Slug,
    TrafficIn,
    TrafficOut,
    Upserted,
)

router = Router(tags=["deployments"])
PATH = "/{slug}/deployments/{external_id}"
LONGEST_TRAFFIC_READ = timedelta(days=31)


def _out(request: HttpRequest, deployment: Deployment) -> dict:
    return {
        "id": deployment.pk,
        "url": page_url(request, "deployment_detail", deployment.pk),
        "project": deployment.project.slug,
        "external_id": deployment.external_id,
        "name": deployment.name,
        "model": model_ref_out(user=request.user, model=deployment.model),
        "serving_pattern": deployment.serving_pattern,
        "replicas": deployment.replicas,
        "latency_objective_ms": deployment.latency_objective_ms,
        "cold_start_seconds": deployment.cold_start_seconds,
        "data_residency": deployment.data_residency,
        "is_fine_tuned": deployment.is_fine_tuned,
        "started_at": deployment.started_at,
        "ended_at": deployment.ended_at,
        "instance_type": deployment.instance_type,
        "gpu_type": deployment.gpu_type,
        "gpu_count": deployment.gpu_count,
        "is_spot": deployment.is_spot,
        "region": deployment.region,
        "tags": deployment.tags,
        "resources": uses_out(deployment.resources),
    }


@router.put(
    PATH,
    response={200: DeploymentOut, 201: DeploymentOut, **ERRORS},
    summary="Create or update a deployment",
)
def deployment_put(
    request: HttpRequest, slug: Slug, external_id: ExternalId, payload: DeploymentIn
):
    """Create the deployment with this external id, or update it (201 when created, 200 when
    updated). Idempotent; fields left out keep their value; a new deployment needs `model`.
    `resources`, when given, replaces its resource ids."""
    project = project_for_user(user=request.user, slug=slug)
    changes = payload.model_dump(exclude_unset=True, exclude={"model", "resources"})
    if "model" in payload.model_fields_set:
        changes["model"] = model_for_ref(user=request.user, project=project, ref=payload.model)
    refuse_resources_out_of_sight(
        user=request.user,
        uses=payload.resources if "resources" in payload.model_fields_set else None,
        owner=Deployment.objects.filter(project=project, external_id=external_id).first(),
    )
    registration = services.deployment_register(
        project=project,
        external_id=external_id,
        changes=changes,
        resources=windows(payload.resources) if "resources" in payload.model_fields_set else None,
    )
    return Status(201 if registration.created else 200, _out(request, registration.deployment))


@router.get(PATH, response={200: DeploymentOut, **ERRORS}, summary="Read a deployment")
def deployment_get(request: HttpRequest, slug: Slug, external_id: ExternalId):
    return _out(
        request,
        external_deployment_for_user(user=request.user, slug=slug, external_id=external_id),
    )


@router.post(PATH + "/traffic", response={200: Upserted, **ERRORS}, summary="Record hourly traffic")
def deployment_traffic_post(
    request: HttpRequest, slug: Slug, external_id: ExternalId, payload: TrafficIn
):
    """Record hourly traffic, many hours per call. An hour sent again replaces its figures."""
    deployment = external_deployment_for_user(user=request.user, slug=slug, external_id=external_id)
    written = services.deployment_traffic_record(
        deployment=deployment,
        hours=[services.TrafficFigures(**hour.model_dump()) for hour in payload.hours],
    )
    return {"created": written.created, "updated": written.updated}


@router.post(
    PATH + "/traffic/log",
    response={200: Upserted, **ERRORS},
    summary="Upload a request log (CSV) as hourly traffic",
)
def deployment_traffic_log_post(
    request: HttpRequest, slug: Slug, external_id: ExternalId, file: File[UploadedFile]
):
    """A serving stack's request log, a multipart upload of a CSV in the field `file`, one row a
    request, with a header naming `timestamp` (ISO 8601 with a time zone; required),
    `latency_ms`, `tokens_in`, `tokens_out` and `request_hash` (any order and case, others
    ignored). Counted per UTC hour into requests, repeats (a hash seen earlier in the same hour),
    the tokens' sums and p50/p95/p99 latency by nearest rank, as the deployment's upload page
    does. All or nothing: a bad cell is a 400 naming the file, row and column under `file`, and
    nothing is written; an hour sent again replaces its figures (`updated`)."""
    deployment = external_deployment_for_user(user=request.user, slug=slug, external_id=external_id)
    name = file.name or "request log"
    try:
        written = services.deployment_traffic_import_log(
            deployment=deployment, stream=file.file, name=name
        )
    except ValidationError as error:
        raise ValidationError({"file": error.messages}) from error
    return {"created": written.created, "updated": written.updated}


@router.get(PATH + "/traffic", response={200: TrafficOut, **ERRORS}, summary="Read hourly traffic")
def deployment_traffic_get(
    request: HttpRequest,
    slug: Slug,
    external_id: ExternalId,
    start: Moment | None = None,
    end: Moment | None = None,
):
    """The hours in [start, end): by default the last 7 days; at most 31 days per call."""
    deployment = external_deployment_for_user(user=request.user, slug=slug, external_id=external_id)
    end = end or _next_hour(timezone.now())
    start = start or end - timedelta(days=7)
    if end <= start:
        raise ValidationError({"end": ["The end must be after the start."]})
    if end - start > LONGEST_TRAFFIC_READ:
        raise ValidationError({"end": ["Ask for at most 31 days at a time."]})
    hours = selectors.deployment_traffic(deployment=deployment, start=start, end=end)
    return {"hours": list(hours)}


def _next_hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
