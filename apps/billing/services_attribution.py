"""Writes of the attribution pages: claiming unattributed spend.

A claim is an allocation rule on the resource id (the rules are the step of attribution that
reaches what tags and registered resources did not, DESIGN.md), so it claims the resource's whole
history and every line it bills later; then the history is attributed again in a task.
"""

import re
from dataclasses import dataclass
from decimal import Decimal

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Count, Sum

from apps.deployments.models import Deployment
from apps.experiments.models import Experiment
from apps.projects.models import AllocationRule, Project
from costsite.patterns import matches_every_id

from .models import DailyCost, DailyResourceCost
from .services import attribution_schedule

WILDCARDS = set("*?[")


def exact_pattern(resource_id: str) -> str:
    """A shell-style pattern that matches this id and nothing else (`*`, `?`, `[` escaped)."""
    return "".join(f"[{char}]" if char in WILDCARDS else char for char in resource_id)


def is_pattern(text: str) -> bool:
    return any(char in WILDCARDS for char in text)


def pattern_regex(pattern: str) -> str:
    """A shell-style pattern as an anchored regular expression that PostgreSQL and SQLite (Python's
    re) read alike: `*` any run, `?` one character, `[...]` a class, the rest literal."""
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            escaped = "".join(c if c.isalnum() or c == "-" else "\\" + c for c in body)
            out.append(f"[{'^' if negate else ''}{escaped}]")
            i = end
        elif char.isalnum():
            out.append(char)
        else:
            out.append(re.escape(char) if char != " " else " ")
        i += 1
    return "^" + "".join(out) + "$"


@dataclass(frozen=True)
class Claim:
    """What a claim moves: the unattributed history of the resources it matches."""

    rule: AllocationRule
    resources: int
    amounts: dict[str, Decimal]  # per currency, the whole history


def unattributed_matching(*, pattern: str) -> dict:
    """The unattributed history (all days) of the resources whose id matches the pattern, matched
    without case as the rules match: how many resources, and how much per currency."""
    rows = DailyResourceCost.objects.filter(
        project__isnull=True, resource_id__iregex=pattern_regex(pattern)
    )
    per_currency = {
        row["billing_currency"]: row["amount"]
        for row in rows.values("billing_currency")
        .annotate(amount=Sum("effective_cost"))
        .order_by("billing_currency")
    }
    resources = rows.aggregate(n=Count("resource_id", distinct=True))["n"]
    return {"resources": resources, "amounts": per_currency}


def unattributed_matching_lines(*, field: str, pattern: str) -> dict:
    """The unattributed history (all days) of the lines whose service or billing account matches
    the pattern (as a rule on that field matches): how much per currency, how much of it on lines
    without a resource id, and on how many resources the rest is."""
    regex = pattern_regex(pattern)
    if field == AllocationRule.Field.SERVICE:
        lines = DailyCost.objects.filter(project__isnull=True, service_name__iregex=regex)
        resources = DailyResourceCost.objects.filter(
            project__isnull=True, service_name__iregex=regex
        )
    else:
        lines = DailyCost.objects.filter(
            project__isnull=True, delivery__billing_account_id__iregex=regex
        )
        resources = DailyResourceCost.objects.filter(
            project__isnull=True, billing_account_id__iregex=regex
        )
    amounts = {
        row["billing_currency"]: row["amount"]
        for row in lines.values("billing_currency")
        .annotate(amount=Sum("effective_cost"))
        .order_by("billing_currency")
    }
    on_resources = dict(
        resources.values("billing_currency")
        .annotate(amount=Sum("effective_cost"))
        .order_by()
        .values_list("billing_currency", "amount")
    )
    return {
        "resources": resources.aggregate(n=Count("resource_id", distinct=True))["n"],
        "amounts": amounts,
        "without_resource_id": {
            code: amount - on_resources.get(code, Decimal(0)) for code, amount in amounts.items()
        },
    }


@transaction.atomic
def unattributed_claim(
    *,
    project: Project,
    resource_id: str = "",
    pattern: str = "",
    experiment: Experiment | None = None,
    deployment: Deployment | None = None,
    workload: str = "",
    service_name: str = "",
    billing_account_id: str = "",
    created_by: AbstractBaseUser | None = None,
) -> Claim:
    """Assign one resource (`resource_id`) or the resources whose id matches a shell-style
    `pattern` to a project, and optionally to one of its experiments or deployments, from now on
    and for their whole history.

    The caller checks that the user may claim for this project (a team's lead for the team's
    projects, staff for any). Re-attribution runs after commit: for one resource only its lines,
    for a pattern all history (a rule may reach resources that billed nothing unattributed yet).

    Lines without a resource id (transfer, fees) are claimed by their service (`service_name`) or
    billing account (`billing_account_id`): a rule on that field, which takes every unattributed
    line of it, with or without a resource id, and all history is attributed again.
    """
    if sum(map(bool, (resource_id, pattern, service_name, billing_account_id))) != 1:
        raise ValueError("A claim names one resource id, one pattern, a service or an account.")
    if service_name or billing_account_id:
        return _lines_claim(
            project=project,
            experiment=experiment,
            deployment=deployment,
            workload=workload,
            field=AllocationRule.Field.SERVICE
            if service_name
            else AllocationRule.Field.BILLING_ACCOUNT,
            value=service_name or billing_account_id,
            created_by=created_by,
        )
    if experiment is not None and deployment is not None:
        raise ValueError("A claim goes to an experiment or a deployment, not both.")
    for owner in (experiment, deployment):
        if owner is not None and owner.project_id != project.pk:
            raise ValueError(f"“{owner}” is not in the project “{project}”.")
    if pattern and matches_every_id(pattern, part_regex=pattern_regex):
        raise ValueError("A pattern that matches every resource id would claim everything.")
    rule_pattern = exact_pattern(resource_id) if resource_id else pattern
    moved = unattributed_matching(pattern=rule_pattern)
    target = experiment or deployment or project
    rule = AllocationRule.objects.create(
        name=f"Claimed on the unattributed page for {target}"[:200],
        field=AllocationRule.Field.RESOURCE,
        pattern=rule_pattern,
        project=project,
        experiment=experiment,
        deployment=deployment,
        # A GPU box claimed for a project is what it trains on, not "Other": the claim says so.
        workload=workload,
        created_by=created_by,
    )
    attribution_schedule(
        resource_ids=[resource_id] if resource_id else None,
        reason=f"Unattributed spend of “{rule_pattern}” claimed for {target}",
        created_by=created_by,
    )
    return Claim(rule=rule, resources=moved["resources"], amounts=moved["amounts"])


@dataclass(frozen=True)
class LinesClaim(Claim):
    """A claim by service or billing account: what of it was on lines without a resource id."""

    without_resource_id: dict[str, Decimal]


def _lines_claim(
    *,
    project: Project,
    experiment: Experiment | None,
    deployment: Deployment | None,
    workload: str,
    field: str,
    value: str,
    created_by: AbstractBaseUser | None,
) -> LinesClaim:
    if experiment is not None and deployment is not None:
        raise ValueError("A claim goes to an experiment or a deployment, not both.")
    for owner in (experiment, deployment):
        if owner is not None and owner.project_id != project.pk:
            raise ValueError(f"“{owner}” is not in the project “{project}”.")
    pattern = exact_pattern(value)
    moved = unattributed_matching_lines(field=field, pattern=pattern)
    target = experiment or deployment or project
    what = AllocationRule.Field(field).label.lower()
    rule = AllocationRule.objects.create(
        name=f"Claimed on the unattributed page for {target}"[:200],
        field=field,
        pattern=pattern,
        project=project,
        experiment=experiment,
        deployment=deployment,
        workload=workload,
        created_by=created_by,
    )
    attribution_schedule(
        resource_ids=None,  # a rule on a service or an account reaches any line: all history
        reason=f"Unattributed spend of the {what} “{value}” claimed for {target}",
        created_by=created_by,
    )
    return LinesClaim(
        rule=rule,
        resources=moved["resources"],
        amounts=moved["amounts"],
        without_resource_id=moved["without_resource_id"],
    )
