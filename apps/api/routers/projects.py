from django.http import HttpRequest
from ninja import Router

from apps.projects.selectors import projects_visible_to

from ..common import AUTH_ERRORS
from ..schemas import ProjectOut

router = Router(tags=["projects"])


@router.get(
    "",
    response={200: list[ProjectOut], **AUTH_ERRORS},
    url_name="api_project_list",
    summary="List the projects you can register in",
)
def project_list(request: HttpRequest):
    """The projects the token's user may register runs and deployments in."""
    projects = projects_visible_to(user=request.user).select_related("team").order_by("slug")
    return [{"slug": p.slug, "name": p.name, "team": p.team.name} for p in projects]
