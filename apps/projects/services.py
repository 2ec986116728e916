from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
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


@dataclass(frozen=True)
class ResourceWindow:
    """A resource id and when its owner used it (None: from the owner's start, to its end)."""

    resource_id: str
    started_at: datetime | None = None
    ended_at: datetime | None = None


@dataclass(frozen=True)
class Upserted:
    """What a batch write did: rows it created and rows it overwrote."""

    created: int
    updated: int


def resource_windows_replace(*, uses, windows: Iterable[ResourceWindow]) -> set[str]:
    """Make the resource uses of one owner exactly `windows`, usage times included (a script
    knows when it used what), and return the ids added, removed or whose window changed.

    A use is known by its resource id and start, so the same id may appear in several windows; a
    use whose end moved is updated in place. Callers run inside their own transaction.
    """
    wanted = {(window.resource_id, window.started_at): window for window in windows}
    current = {(use.resource_id, use.started_at): use for use in uses.all()}
    stale = [use for key, use in current.items() if key not in wanted]
    moved = []
    for key, window in wanted.items():
        use = current.get(key)
        if use is not None and use.ended_at != window.ended_at:
            use.ended_at = window.ended_at
            moved.append(use)
    new = [window for key, window in wanted.items() if key not in current]
    if stale:
        uses.filter(pk__in=[use.pk for use in stale]).delete()
    if moved:
        uses.model.objects.bulk_update(moved, ["ended_at"])
    if new:
        owner_field = uses.field.name
        uses.model.objects.bulk_create(
            [
                uses.model(
                    **{owner_field: uses.instance},
                    resource_id=window.resource_id,
                    started_at=window.started_at,
                    ended_at=window.ended_at,
                )
                for window in new
            ]
        )
    return {use.resource_id for use in stale + moved} | {window.resource_id for window in new}
