from collections.abc import Iterable
from decimal import Decimal

from django.db import transaction

from apps.accounts.models import Team

from .models import Project


@transaction.atomic
def project_create(
    *,
    team: Team,
    name: str,
    slug: str,
    description: str = "",
    monthly_budget: Decimal | None = None,
) -> Project:
    return Project.objects.create(
        team=team, name=name, slug=slug, description=description, monthly_budget=monthly_budget
    )


@transaction.atomic
def project_update(
    *,
    project: Project,
    team: Team,
    name: str,
    slug: str,
    description: str,
    monthly_budget: Decimal | None,
) -> Project:
    project.team = team
    project.name = name
    project.slug = slug
    project.description = description
    project.monthly_budget = monthly_budget
    project.save()
    return project


def resource_uses_replace(*, uses, resource_ids: Iterable[str]) -> set[str]:
    """Make the resource ids of one owner (an experiment's or a deployment's `resources`
    manager) exactly `resource_ids`, and return the ids that were added or removed.

    Ids that stay keep their rows, and with them any usage window set on them (in the admin or by
    a script), so editing the list on a page never loses that detail. Callers run inside their own
    transaction.
    """
    wanted = list(dict.fromkeys(resource_ids))
    current = set(uses.values_list("resource_id", flat=True))
    removed = current - set(wanted)
    added = [resource_id for resource_id in wanted if resource_id not in current]
    if removed:
        uses.filter(resource_id__in=removed).delete()
    if added:
        owner_field = uses.field.name
        uses.model.objects.bulk_create(
            [uses.model(**{owner_field: uses.instance, "resource_id": rid}) for rid in added]
        )
    return removed | set(added)
