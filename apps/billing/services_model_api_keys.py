"""Model API keys mapped to projects and deployments: who may change which, and the changes,
each re-attributing the history of the keys it touches (through the ownership port).

Staff map any key; a team's lead maps keys to the projects (and their deployments) they lead and
changes or deletes the mappings of those projects. The pages and the REST API both call these."""

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.db.models.functions import Lower

from apps.accounts.guards import is_staff_or_lead
from apps.deployments.models import Deployment
from apps.projects.models import Project
from apps.projects.selectors import projects_editable_by
from apps.projects.services import ownership_announce

from .models import ModelApiKey


class KeyMappingError(ValueError):
    """A mapping that cannot be made as asked: the message says why."""


def can_map_keys(*, user) -> bool:
    """Staff and team leads maintain the model API keys' mapping."""
    return is_staff_or_lead(user=user)


def key_mappings_editable_by(*, user) -> QuerySet[ModelApiKey]:
    """Staff: all. A lead: those of the projects they lead."""
    if user.is_staff:
        return ModelApiKey.objects.all()
    if not can_map_keys(user=user):
        return ModelApiKey.objects.none()
    return ModelApiKey.objects.filter(project__in=projects_editable_by(user=user))


def key_mapping_of(key: str) -> ModelApiKey | None:
    """The mapping of `key` (without case), or None."""
    return (
        ModelApiKey.objects.annotate(lower=Lower("key"))
        .filter(lower=key.strip().lower())
        .select_related("project", "deployment")
        .first()
    )


def _check(*, key: str, project: Project, deployment: Deployment | None) -> str:
    key = key.strip()
    if not key:
        raise KeyMappingError("A key is required.")
    if len(key) > 1000:
        raise KeyMappingError("A key has at most 1,000 characters.")
    if any(ch.isspace() for ch in key):
        raise KeyMappingError("A key has no spaces in it.")
    if deployment is not None and deployment.project_id != project.pk:
        raise KeyMappingError(f"The deployment “{deployment}” is not in the project “{project}”.")
    return key


def _target(mapping: ModelApiKey) -> str:
    return str(mapping.deployment or mapping.project)


def key_mapping_create(
    *,
    key: str,
    project: Project,
    deployment: Deployment | None = None,
    kind: str = ModelApiKey.Kind.API_KEY,
    note: str = "",
    created_by: AbstractBaseUser | None = None,
) -> ModelApiKey | None:
    """Map `key`, which has no mapping yet; its history is attributed again after the commit.
    None when the key turns out to be mapped already (a request that lost a race: the caller
    treats it as a change of that mapping)."""
    key = _check(key=key, project=project, deployment=deployment)
    try:
        with transaction.atomic():
            mapping = ModelApiKey.objects.create(
                key=key,
                kind=kind,
                project=project,
                deployment=deployment,
                note=note,
                created_by=created_by,
            )
            ownership_announce(
                resource_ids=[key],
                reason=f"Model API key “{key}” mapped to {_target(mapping)}",
                created_by=created_by,
            )
            return mapping
    except IntegrityError:
        return None


@transaction.atomic
def key_mapping_update(
    *,
    mapping: ModelApiKey,
    key: str,
    project: Project,
    deployment: Deployment | None = None,
    kind: str = ModelApiKey.Kind.API_KEY,
    note: str = "",
    changed_by: AbstractBaseUser | None = None,
) -> ModelApiKey:
    """Change a mapping; the history of the old key and of the new one is attributed again."""
    key = _check(key=key, project=project, deployment=deployment)
    old_key = mapping.key
    moved = (old_key.lower(), mapping.project_id, mapping.deployment_id) != (
        key.lower(),
        project.pk,
        deployment.pk if deployment else None,
    )
    mapping.key = key
    mapping.kind = kind
    mapping.project = project
    mapping.deployment = deployment
    mapping.note = note
    mapping.save()
    if moved:
        ownership_announce(
            resource_ids=[old_key, key],
            reason=f"Model API key “{key}” now maps to {_target(mapping)}",
            created_by=changed_by,
        )
    return mapping


@transaction.atomic
def key_mapping_delete(*, mapping: ModelApiKey, deleted_by: AbstractBaseUser | None = None) -> None:
    """Unmap a key: its spend is unattributed again (unless a rule or a tag claims it)."""
    key = mapping.key
    mapping.delete()
    ownership_announce(
        resource_ids=[key],
        reason=f"Model API key “{key}” no longer mapped",
        created_by=deleted_by,
    )
