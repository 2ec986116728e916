from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from apps.accounts.models import Team
from apps.deployments.models import Deployment
from apps.experiments.models import Experiment

from .models import AllocationRule, Project, TagKeyAlias
from .ports import ownership_changed


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


def ownership_announce(
    *,
    resource_ids: Iterable[str] | None = None,
    reason: str = "",
    created_by: AbstractBaseUser | None = None,
) -> list[object]:
    """Say that who used what changed: the one function pages, API and admin call.

    `resource_ids` are the ids whose owner may have changed (None: all history, after an alias,
    a rule or a project changed). Every handler of `ownership_changed` hears it (billing
    re-attributes the history, after the commit); returns their results in order.
    """
    ids = None if resource_ids is None else sorted(set(resource_ids))
    return ownership_changed.announce(resource_ids=ids, reason=reason, created_by=created_by)


def _uses_changed(*, uses, changed: set[str]) -> None:
    """The billed history of these resources may belong elsewhere now."""
    if changed:
        owner = uses.instance
        ownership_announce(
            resource_ids=changed,
            reason=f"Resources of the {owner._meta.verbose_name} “{owner}” changed",
        )


def resource_uses_changed(*, uses, before: Iterable[tuple]) -> set[str]:
    """After an edit that bypassed the two functions below (the admin's inline rows), announce
    the ids whose use changed since `before` (the owner's `resource_uses_snapshot`)."""
    before = set(before)
    after = set(resource_uses_snapshot(uses=uses))
    changed = {use[0] for use in before ^ after}
    _uses_changed(uses=uses, changed=changed)
    return changed


def resource_uses_snapshot(*, uses) -> list[tuple]:
    """The owner's resource uses as (resource id, start, end) tuples."""
    return list(uses.values_list("resource_id", "started_at", "ended_at"))


def resource_uses_replace(*, uses, resource_ids: Iterable[str]) -> set[str]:
    """Make the resource ids of one owner (an experiment's or a deployment's `resources`
    manager) exactly `resource_ids`, and return the ids that were added or removed.

    Ids that stay keep their rows, and with them any usage window set on them (in the admin or by
    a script), so editing the list on a page never loses that detail. The changed ids are
    announced (`ownership_announce`): their billed history is attributed again after the commit.
    Callers run inside their own transaction.
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
    changed = removed | set(added)
    _uses_changed(uses=uses, changed=changed)
    return changed


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
    use whose end moved is updated in place. The changed ids are announced, as above. Callers run
    inside their own transaction.
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
    changed = {use.resource_id for use in stale + moved} | {window.resource_id for window in new}
    _uses_changed(uses=uses, changed=changed)
    return changed


# -- tag key aliases and allocation rules -----------------------------------------------------
# Both decide who owns past spend: every change re-attributes the whole history, in a tracked
# run (billing's, through the `ownership_changed` port) that starts once the change commits.


@dataclass(frozen=True)
class Reattributed:
    """A saved (or deleted) alias or rule and the re-attribution it scheduled (billing's
    `AttributionRun`, which billing's handler of `ownership_changed` returns)."""

    subject: TagKeyAlias | AllocationRule
    run: object


def _check_owner(
    *, project: Project, experiment: Experiment | None, deployment: Deployment | None
) -> None:
    if experiment is not None and deployment is not None:
        raise ValueError("A rule gives spend to an experiment or a deployment, not both.")
    for owner in (experiment, deployment):
        if owner is not None and owner.project_id != project.pk:
            raise ValueError(f"“{owner}” is not in the project “{project}”.")


def _reattribute(*, reason: str, created_by: AbstractBaseUser | None) -> object:
    runs = [r for r in ownership_announce(reason=reason, created_by=created_by) if r is not None]
    assert len(runs) == 1, runs  # billing's re-attribution of all history: always one run
    return runs[0]


@transaction.atomic
def tag_key_alias_create(
    *, dimension: str, key: str, created_by: AbstractBaseUser | None = None
) -> Reattributed:
    alias = TagKeyAlias.objects.create(dimension=dimension, key=key.strip())
    reason = f"Tag key alias “{alias.key}” for the {alias.dimension} added"
    return Reattributed(alias, _reattribute(reason=reason, created_by=created_by))


@transaction.atomic
def tag_key_alias_update(
    *, alias: TagKeyAlias, dimension: str, key: str, created_by: AbstractBaseUser | None = None
) -> Reattributed:
    alias.dimension = dimension
    alias.key = key.strip()
    alias.save(update_fields=["dimension", "key"])
    reason = f"Tag key alias “{alias.key}” for the {alias.dimension} changed"
    return Reattributed(alias, _reattribute(reason=reason, created_by=created_by))


@transaction.atomic
def tag_key_alias_delete(
    *, alias: TagKeyAlias, created_by: AbstractBaseUser | None = None
) -> Reattributed:
    reason = f"Tag key alias “{alias.key}” for the {alias.dimension} deleted"
    alias.delete()
    return Reattributed(alias, _reattribute(reason=reason, created_by=created_by))


@transaction.atomic
def allocation_rule_create(
    *,
    name: str,
    field: str,
    pattern: str,
    priority: int,
    project: Project,
    experiment: Experiment | None = None,
    deployment: Deployment | None = None,
    workload: str = "",
    created_by: AbstractBaseUser | None = None,
) -> Reattributed:
    _check_owner(project=project, experiment=experiment, deployment=deployment)
    rule = AllocationRule.objects.create(
        name=name,
        field=field,
        pattern=pattern,
        priority=priority,
        project=project,
        experiment=experiment,
        deployment=deployment,
        workload=workload,
        created_by=created_by,
    )
    reason = f"Allocation rule “{rule.name}” added"
    return Reattributed(rule, _reattribute(reason=reason, created_by=created_by))


@transaction.atomic
def allocation_rule_update(
    *,
    rule: AllocationRule,
    name: str,
    field: str,
    pattern: str,
    priority: int,
    project: Project,
    experiment: Experiment | None = None,
    deployment: Deployment | None = None,
    workload: str = "",
    created_by: AbstractBaseUser | None = None,
) -> Reattributed:
    _check_owner(project=project, experiment=experiment, deployment=deployment)
    rule.name, rule.field, rule.pattern, rule.priority = name, field, pattern, priority
    rule.project, rule.experiment, rule.deployment = project, experiment, deployment
    rule.workload = workload
    rule.save()
    reason = f"Allocation rule “{rule.name}” changed"
    return Reattributed(rule, _reattribute(reason=reason, created_by=created_by))


@transaction.atomic
def allocation_rule_delete(
    *, rule: AllocationRule, created_by: AbstractBaseUser | None = None
) -> Reattributed:
    reason = f"Allocation rule “{rule.name}” deleted"
    rule.delete()
    return Reattributed(rule, _reattribute(reason=reason, created_by=created_by))
