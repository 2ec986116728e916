"""Findings: the waste page's list (same filters, same permissions), one finding, and its status
actions. Members read their team's findings, leads act on them, staff on all; another team's
finding is a 404. Money is per currency, as exact decimal strings."""

from datetime import date
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest
from ninja import Router, Schema

from apps.insights import selectors, services
from apps.insights.management.commands.findings import finding_as_json

from ..common import ERRORS

router = Router(tags=["findings"])


class FindingOut(Schema):
    id: int
    kind: str
    project: str | None
    experiment: str | None
    deployment: str | None
    resource_id: str | None
    billing_account_id: str | None
    service_name: str | None
    status: str
    snoozed_until: str | None
    reason: str
    wasted: dict[str, str]
    savings_per_month: dict[str, str]
    first_seen: str | None
    last_seen: str | None


class ActionIn(Schema):
    action: str
    until: date | None = None
    note: str = ""


@router.get("", response={200: list[FindingOut], **ERRORS}, summary="List findings")
def finding_list(
    request: HttpRequest,
    kind: str = "",
    project: str = "",
    team: str = "",
    status: str = "",
    minimum: Decimal | None = None,
):
    """Ranked by wasted (organisation currency), filtered as on the waste page. `status=active`
    is open or acknowledged; empty: any."""
    findings = selectors.findings_filtered(
        selectors.findings_visible_to(user=request.user),
        kind=kind,
        project=project,
        team=team,
        status=status,
        minimum=minimum,
    )
    return [finding_as_json(finding) for finding in findings]


@router.get("/{finding_id}", response={200: FindingOut, **ERRORS}, summary="Read a finding")
def finding_get(request: HttpRequest, finding_id: int):
    return finding_as_json(selectors.finding_for_user(user=request.user, pk=finding_id))


@router.post(
    "/{finding_id}/status", response={200: FindingOut, **ERRORS}, summary="Change its status"
)
def finding_status(request: HttpRequest, finding_id: int, payload: ActionIn):
    """`action`: acknowledge, snooze (with `until`), resolve (with `note`) or reopen."""
    finding = selectors.finding_for_user(user=request.user, pk=finding_id)
    if not selectors.can_act_on(user=request.user, finding=finding):
        raise Http404("No such finding that you may change.")
    actions = {
        "acknowledge": lambda: services.finding_acknowledge(finding=finding, by=request.user),
        "snooze": lambda: services.finding_snooze(
            finding=finding, by=request.user, until=payload.until
        ),
        "resolve": lambda: services.finding_resolve(
            finding=finding, by=request.user, note=payload.note
        ),
        "reopen": lambda: services.finding_reopen(
            finding=finding, by=request.user, note=payload.note
        ),
    }
    if payload.action not in actions:
        raise ValidationError({"action": [f"One of {', '.join(actions)}."]})
    if payload.action == "snooze" and payload.until is None:
        raise ValidationError({"until": ["Say until when."]})
    try:
        actions[payload.action]()
    except services.WorkflowError as error:
        raise ValidationError({"action": [str(error)]}) from None
    return finding_as_json(finding)
