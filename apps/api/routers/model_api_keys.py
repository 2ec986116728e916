"""The model API keys' mapping: a key as billed (an API key, an OpenAI project, an Anthropic
workspace, a LiteLLM team, a Bedrock inference profile) and the project and deployment whose
calls it pays for. Staff and team leads maintain them (a lead: for the projects they lead); a
change re-attributes the key's history, as on the mapping page."""

from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest
from ninja import Router, Status

from apps.billing import services_model_api_keys as services
from apps.billing.models import ModelApiKey
from apps.deployments.models import Deployment
from apps.projects.selectors import projects_editable_by

from ..common import ERRORS
from ..schemas import ModelApiKeyIn, ModelApiKeyOut, ResourceId

router = Router(tags=["model API keys"])
PATH = "/{path:key}"


def _require_mapper(request: HttpRequest) -> None:
    if not services.can_map_keys(user=request.user):
        raise Http404("Only staff and team leads maintain model API keys.")


def _editable_ids(request: HttpRequest) -> set[int]:
    return set(services.key_mappings_editable_by(user=request.user).values_list("pk", flat=True))


def _out(mapping: ModelApiKey, editable: set[int]) -> dict:
    deployment = mapping.deployment
    return {
        "key": mapping.key,
        "kind": mapping.kind,
        "project": mapping.project.slug,
        "deployment": (deployment.external_id or deployment.name) if deployment else None,
        "note": mapping.note,
        "editable": mapping.pk in editable,
    }


def _target(request: HttpRequest, payload: ModelApiKeyIn) -> dict:
    project = projects_editable_by(user=request.user).filter(slug=payload.project).first()
    if project is None:
        raise ValidationError({"project": [f"No project “{payload.project}” of a team you lead."]})
    deployment = None
    if payload.deployment is not None:
        deployment = (
            Deployment.objects.filter(project=project, external_id=payload.deployment).first()
            or Deployment.objects.filter(project=project, name=payload.deployment).first()
        )
        if deployment is None:
            raise ValidationError(
                {
                    "deployment": [
                        f"No deployment “{payload.deployment}” in the project “{project.slug}”."
                    ]
                }
            )
    return {
        "project": project,
        "deployment": deployment,
        "kind": payload.kind,
        "note": payload.note,
    }


@router.get("", response={200: list[ModelApiKeyOut], **ERRORS}, summary="List model API keys")
def model_api_key_list(request: HttpRequest):
    _require_mapper(request)
    editable = _editable_ids(request)
    rows = ModelApiKey.objects.select_related("project", "deployment").order_by("key")
    return [_out(mapping, editable) for mapping in rows]


@router.get(PATH, response={200: ModelApiKeyOut, **ERRORS}, summary="Read a model API key")
def model_api_key_get(request: HttpRequest, key: ResourceId):
    _require_mapper(request)
    mapping = services.key_mapping_of(key)
    if mapping is None:
        raise Http404(f"No mapping of “{key}”.")
    return _out(mapping, _editable_ids(request))


def _editable(request: HttpRequest, key: str) -> ModelApiKey | None:
    mapping = services.key_mapping_of(key)
    if mapping is None:
        return None
    if mapping.pk not in _editable_ids(request):
        raise Http404(f"No mapping of “{key}” that you may change.")
    return mapping


@router.put(
    PATH,
    response={200: ModelApiKeyOut, 201: ModelApiKeyOut, **ERRORS},
    summary="Map a model API key (create or update)",
)
def model_api_key_put(request: HttpRequest, key: ResourceId, payload: ModelApiKeyIn):
    """Map the key to a project and optionally one of its deployments (201 when created, 200
    when changed); its history is attributed again."""
    _require_mapper(request)
    mapping = _editable(request, key)
    arguments = _target(request, payload)
    try:
        if mapping is None:
            created = services.key_mapping_create(key=key, created_by=request.user, **arguments)
            if created is not None:
                return Status(201, _out(created, _editable_ids(request)))
            mapping = _editable(request, key)  # mapped by another call meanwhile
            if mapping is None:
                raise Http404(f"No mapping of “{key}”.")
        mapping = services.key_mapping_update(
            mapping=mapping, key=key, changed_by=request.user, **arguments
        )
    except services.KeyMappingError as error:
        raise ValidationError({"body": [str(error)]}) from None
    return Status(200, _out(mapping, _editable_ids(request)))


@router.delete(PATH, response={204: None, **ERRORS}, summary="Unmap a model API key")
def model_api_key_delete(request: HttpRequest, key: ResourceId):
    _require_mapper(request)
    mapping = _editable(request, key)
    if mapping is None:
        raise Http404(f"No mapping of “{key}”.")
    services.key_mapping_delete(mapping=mapping, deleted_by=request.user)
    return Status(204, None)
