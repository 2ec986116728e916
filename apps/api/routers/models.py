from django.http import HttpRequest
from ninja import Router, Status

from apps.deployments import services
from apps.deployments.models import Model
from apps.deployments.selectors import external_model_for_user
from apps.projects.selectors import project_for_user

from ..common import ERRORS, page_url
from ..schemas import ExternalId, ModelIn, ModelOut, Slug

router = Router(tags=["models"])
PATH = "/{slug}/models/{external_id}"


def _out(request: HttpRequest, model: Model) -> dict:
    return {
        "id": model.pk,
        "url": page_url(request, "model_detail", model.pk),
        "project": model.project.slug,
        "external_id": model.external_id,
        "name": model.name,
        "description": model.description,
    }


@router.put(
    PATH, response={200: ModelOut, 201: ModelOut, **ERRORS}, summary="Create or update a model"
)
def model_put(request: HttpRequest, slug: Slug, external_id: ExternalId, payload: ModelIn):
    """Create the model with this external id, or update it (201 when created, 200 when
    updated). Idempotent; fields left out keep their value."""
    project = project_for_user(user=request.user, slug=slug)
    registration = services.model_register(
        project=project, external_id=external_id, changes=payload.model_dump(exclude_unset=True)
    )
    return Status(201 if registration.created else 200, _out(request, registration.model))


@router.get(PATH, response={200: ModelOut, **ERRORS}, summary="Read a model")
def model_get(request: HttpRequest, slug: Slug, external_id: ExternalId):
    return _out(
        request, external_model_for_user(user=request.user, slug=slug, external_id=external_id)
    )
