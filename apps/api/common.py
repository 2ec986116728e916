"""What the routers share: the error answers every endpoint documents, and the translation of
references and resources between the API's JSON and the services' arguments."""

from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.urls import reverse

from apps.deployments.models import Model
from apps.deployments.selectors import models_visible_to
from apps.projects.models import Project
from apps.projects.selectors import resource_ids_out_of_sight, resource_out_of_sight_message
from apps.projects.services import ResourceWindow

from .schemas import Detail, FieldErrors, ModelRef, ResourceUse

ERRORS = {400: FieldErrors, 401: Detail, 404: Detail}
AUTH_ERRORS = {401: Detail}


def page_url(request: HttpRequest, name: str, pk: int) -> str:
    return request.build_absolute_uri(reverse(name, args=[pk]))


def model_for_ref(*, user, project: Project, ref: ModelRef | None) -> Model | None:
    """The model a body names, among those the user may see; a 400 on `model` otherwise (it is
    a field of the input, not the resource of the URL)."""
    if ref is None:
        return None
    slug = ref.project or project.slug
    model = (
        models_visible_to(user=user).filter(project__slug=slug, external_id=ref.external_id).first()
    )
    if model is None:
        raise ValidationError(
            {
                "model": [
                    f"No model with the external id “{ref.external_id}” in a project “{slug}” "
                    "that you can see; register it first (PUT /api/v1/projects/{slug}/models/"
                    "{external_id})."
                ]
            }
        )
    return model


def model_ref_out(*, user, model: Model | None) -> dict | None:
    """The model, if the user may see it (a run may produce a model of another team's project)."""
    if model is None or not models_visible_to(user=user).filter(pk=model.pk).exists():
        return None
    return {"project": model.project.slug, "external_id": model.external_id, "name": model.name}


def windows(uses: list[ResourceUse] | None) -> list[ResourceWindow] | None:
    if uses is None:
        return None
    return [
        ResourceWindow(
            resource_id=use.resource_id, started_at=use.started_at, ended_at=use.ended_at
        )
        for use in uses
    ]


def refuse_resources_out_of_sight(*, user, uses: list[ResourceUse] | None, owner) -> None:
    """A 400 on each resource that a run or deployment of a project the user cannot see has
    registered: registering it would show the user that project's GPUs. `owner`: the experiment
    or deployment the call changes, None when it creates one."""
    if not uses:
        return
    hidden = set(
        resource_ids_out_of_sight(
            user=user, resource_ids=[use.resource_id for use in uses], owner=owner
        )
    )
    errors = {
        f"resources.{n}.resource_id": [resource_out_of_sight_message(use.resource_id)]
        for n, use in enumerate(uses)
        if use.resource_id in hidden
    }
    if errors:
        raise ValidationError(errors)


def uses_out(uses) -> list[dict]:
    return [
        {"resource_id": use.resource_id, "started_at": use.started_at, "ended_at": use.ended_at}
        for use in uses.order_by("resource_id", "started_at")
    ]
