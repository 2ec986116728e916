"""The GPU metrics' host-to-resource mappings: the host a metric names, and the billed resource id
it is. Staff and team leads maintain them (apps/gpu's rules); a lead changes the mappings they
made and those to a resource registered on a project they lead."""

from django.http import Http404, HttpRequest
from ninja import Router, Status

from apps.gpu import selectors, services
from apps.gpu.models import HostMapping

from ..common import ERRORS
from ..schemas import Host, HostMappingIn, HostMappingOut

router = Router(tags=["host mappings"])
PATH = "/{host}"


def _require_mapper(request: HttpRequest) -> None:
    if not selectors.can_map_hosts(user=request.user):
        raise Http404("Only staff and team leads maintain host mappings.")


def _editable_ids(request: HttpRequest) -> set[int]:
    return set(selectors.host_mappings_editable_by(user=request.user).values_list("pk", flat=True))


def _out(mapping: HostMapping, editable: set[int]) -> dict:
    return {
        "host": mapping.host,
        "resource_id": mapping.resource_id,
        "note": mapping.note,
        "editable": mapping.pk in editable,
    }


def _editable(request: HttpRequest, host: str) -> HostMapping | None:
    """The mapping of `host` if the user may change it; None if there is none; 404 if there is one
    the user may not change."""
    mapping = HostMapping.objects.filter(host=host).first()
    if mapping is None:
        return None
    try:
        return selectors.host_mappings_editable_by(user=request.user).get(pk=mapping.pk)
    except HostMapping.DoesNotExist:
        raise Http404(f"No mapping of “{host}” that you may change.") from None


@router.get("", response={200: list[HostMappingOut], **ERRORS}, summary="List host mappings")
def host_mapping_list(request: HttpRequest):
    _require_mapper(request)
    editable = _editable_ids(request)
    return [_out(mapping, editable) for mapping in HostMapping.objects.order_by("host")]


@router.get(PATH, response={200: HostMappingOut, **ERRORS}, summary="Read a host mapping")
def host_mapping_get(request: HttpRequest, host: Host):
    _require_mapper(request)
    mapping = HostMapping.objects.filter(host=host).first()
    if mapping is None:
        raise Http404(f"No mapping of “{host}”.")
    return _out(mapping, _editable_ids(request))


@router.put(
    PATH,
    response={200: HostMappingOut, 201: HostMappingOut, **ERRORS},
    summary="Create or update a host mapping",
)
def host_mapping_put(request: HttpRequest, host: Host, payload: HostMappingIn):
    """Map the host to a billed resource id (201 when created, 200 when updated)."""
    _require_mapper(request)
    mapping = _editable(request, host)
    if mapping is None:
        created = services.host_mapping_create(
            host=host, resource_id=payload.resource_id, note=payload.note, created_by=request.user
        )
        if created is not None:
            return Status(201, _out(created, _editable_ids(request)))
        # Another call mapped the host since the look-up: this one is a change of that mapping.
        mapping = _editable(request, host)
        if mapping is None:  # and deleted again since: nothing is left to change
            raise Http404(f"No mapping of “{host}”.")
    mapping = services.host_mapping_update(
        mapping=mapping, host=host, resource_id=payload.resource_id, note=payload.note
    )
    return Status(200, _out(mapping, _editable_ids(request)))


@router.delete(PATH, response={204: None, **ERRORS}, summary="Delete a host mapping")
def host_mapping_delete(request: HttpRequest, host: Host):
    _require_mapper(request)
    mapping = _editable(request, host)
    if mapping is None:
        raise Http404(f"No mapping of “{host}”.")
    services.host_mapping_delete(mapping=mapping)
    return Status(204, None)
