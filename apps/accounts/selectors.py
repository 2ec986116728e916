"""Who may see and change what (DESIGN.md "Roles"), in one place.

- staff see and change everything;
- a team's lead edits the team's projects (and, in later issues, its rules and findings);
- a team's member sees the team's projects and registers (creates and edits) experiments, models
  and deployments in them;
- everybody else gets 404.

Every page fetches its object through one of the `*_for_user` helpers below. A refusal is always
404, never 403: an outsider must not learn that another team's project exists, and a member who asks
to do what only a lead may gets the same answer, so there is one rule to remember and to test.
"""

from django.db.models import QuerySet
from django.http import Http404

from apps.deployments.models import Deployment, Model
from apps.experiments.models import Experiment
from apps.projects.models import Project

from .models import ApiToken, Membership, Team


def projects_visible_to(*, user) -> QuerySet[Project]:
    return Project.objects.visible_to(user)


def projects_editable_by(*, user) -> QuerySet[Project]:
    return Project.objects.editable_by(user)


def teams_led_by(*, user) -> QuerySet[Team]:
    """The teams in which the user may create projects."""
    if user.is_staff:
        return Team.objects.all()
    return Team.objects.filter(
        memberships__user=user, memberships__role=Membership.Role.LEAD
    ).distinct()


def can_edit_project(*, user, project: Project) -> bool:
    return projects_editable_by(user=user).filter(pk=project.pk).exists()


def can_create_project(*, user) -> bool:
    return teams_led_by(user=user).exists()


def project_for_user(*, user, slug: str, edit: bool = False) -> Project:
    """The project, if the user may see it (or, with `edit`, change it); else 404."""
    projects = projects_editable_by(user=user) if edit else projects_visible_to(user=user)
    try:
        return projects.select_related("team").get(slug=slug)
    except Project.DoesNotExist:
        raise Http404("No such project.") from None


def experiment_for_user(*, user, pk: int) -> Experiment:
    """The experiment, if the user may see its project. Whoever sees it may also edit it."""
    try:
        return Experiment.objects.select_related("project__team", "model", "created_by").get(
            pk=pk, project__in=projects_visible_to(user=user)
        )
    except Experiment.DoesNotExist:
        raise Http404("No such experiment.") from None


def model_for_user(*, user, pk: int) -> Model:
    """The model, if the user may see its project. Whoever sees it may also edit it."""
    try:
        return Model.objects.select_related("project__team").get(
            pk=pk, project__in=projects_visible_to(user=user)
        )
    except Model.DoesNotExist:
        raise Http404("No such model.") from None


def deployment_for_user(*, user, pk: int) -> Deployment:
    """The deployment, if the user may see its project. Whoever sees it may also edit it."""
    try:
        return Deployment.objects.select_related("project__team", "model__project").get(
            pk=pk, project__in=projects_visible_to(user=user)
        )
    except Deployment.DoesNotExist:
        raise Http404("No such deployment.") from None


def models_visible_to(*, user) -> QuerySet[Model]:
    return Model.objects.filter(project__in=projects_visible_to(user=user))


def experiments_visible_to(*, user) -> QuerySet[Experiment]:
    return Experiment.objects.filter(project__in=projects_visible_to(user=user))


def deployments_visible_to(*, user) -> QuerySet[Deployment]:
    return Deployment.objects.filter(project__in=projects_visible_to(user=user))


def api_tokens_of(*, user) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user).order_by("revoked_at", "-created_at", "-pk")


def api_token_for_user(*, user, pk: int) -> ApiToken:
    """The user's own token (staff: anybody's, to revoke a leaked one); else 404."""
    tokens = ApiToken.objects.all() if user.is_staff else ApiToken.objects.filter(user=user)
    try:
        return tokens.get(pk=pk)
    except ApiToken.DoesNotExist:
        raise Http404("No such token.") from None


def api_token_for_secret(*, secret: str) -> ApiToken | None:
    """The token with this secret, revoked or not (the caller tells which), with its user."""
    return (
        ApiToken.objects.select_related("user")
        .filter(key_hash=ApiToken.hash_secret(secret))
        .first()
    )


# The API names what a script registered by its project and external id, not by primary key.


def external_experiment_for_user(*, user, slug: str, external_id: str) -> Experiment:
    project = project_for_user(user=user, slug=slug)
    try:
        return Experiment.objects.select_related("project", "model__project").get(
            project=project, external_id=external_id
        )
    except Experiment.DoesNotExist:
        raise Http404(
            f"No experiment with the external id “{external_id}” in the project “{slug}”."
        ) from None


def external_model_for_user(*, user, slug: str, external_id: str) -> Model:
    project = project_for_user(user=user, slug=slug)
    try:
        return Model.objects.select_related("project").get(project=project, external_id=external_id)
    except Model.DoesNotExist:
        raise Http404(
            f"No model with the external id “{external_id}” in the project “{slug}”."
        ) from None


def external_deployment_for_user(*, user, slug: str, external_id: str) -> Deployment:
    project = project_for_user(user=user, slug=slug)
    try:
        return Deployment.objects.select_related("project", "model__project").get(
            project=project, external_id=external_id
        )
    except Deployment.DoesNotExist:
        raise Http404(
            f"No deployment with the external id “{external_id}” in the project “{slug}”."
        ) from None
