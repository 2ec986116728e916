"""Spend of a project, a run, a deployment or a model for a period: the billing rollup's figures,
as the pages show them (FOCUS EffectiveCost, with BilledCost beside it), read through the pages'
own scopes and apps.spend's `spend_report`."""

from datetime import UTC, date, timedelta

from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.utils import timezone
from ninja import Router

from apps.deployments.selectors import external_deployment_for_user, external_model_for_user
from apps.experiments.selectors import external_experiment_for_user
from apps.projects.selectors import project_for_user
from apps.spend.sections import request_organization
from apps.spend.selectors import (
    SpendReport,
    deployment_scope,
    experiment_scope,
    model_scope,
    project_scope,
    spend_report,
)

from ..common import ERRORS
from ..schemas import Day, ExternalId, Slug, SpendReportOut

router = Router(tags=["spend"])
PERIOD_HELP = (
    "Days are UTC days, as bills are; the period is [start, end). Without them: this month so far."
)


def _period(start: date | None, end: date | None) -> tuple[date, date]:
    today = timezone.now().astimezone(UTC).date()
    start = start or today.replace(day=1)
    end = end or today + timedelta(days=1)
    if end <= start:
        raise ValidationError({"end": ["The end must be after the start."]})
    return start, end


def _currency(request: HttpRequest) -> str:
    # The scopes carry the organisation's currency; the report keeps every currency apart.
    return request_organization(request).currency


@router.get(
    "/{slug}/spend",
    response={200: SpendReportOut, **ERRORS},
    summary="Spend of a project",
    description=PERIOD_HELP,
)
def project_spend(
    request: HttpRequest, slug: Slug, start: Day | None = None, end: Day | None = None
) -> SpendReport:
    project = project_for_user(user=request.user, slug=slug)
    start, end = _period(start, end)
    scope = project_scope(project=project, currency=_currency(request))
    return spend_report(scope=scope, start=start, end=end)


@router.get(
    "/{slug}/experiments/{external_id}/spend",
    response={200: SpendReportOut, **ERRORS},
    summary="Spend of an experiment",
    description=PERIOD_HELP,
)
def experiment_spend(
    request: HttpRequest,
    slug: Slug,
    external_id: ExternalId,
    start: Day | None = None,
    end: Day | None = None,
) -> SpendReport:
    experiment = external_experiment_for_user(user=request.user, slug=slug, external_id=external_id)
    start, end = _period(start, end)
    scope = experiment_scope(experiment=experiment, currency=_currency(request))
    return spend_report(scope=scope, start=start, end=end)


@router.get(
    "/{slug}/deployments/{external_id}/spend",
    response={200: SpendReportOut, **ERRORS},
    summary="Spend of a deployment",
    description=PERIOD_HELP,
)
def deployment_spend(
    request: HttpRequest,
    slug: Slug,
    external_id: ExternalId,
    start: Day | None = None,
    end: Day | None = None,
) -> SpendReport:
    deployment = external_deployment_for_user(user=request.user, slug=slug, external_id=external_id)
    start, end = _period(start, end)
    scope = deployment_scope(deployment=deployment, currency=_currency(request))
    return spend_report(scope=scope, start=start, end=end)


@router.get(
    "/{slug}/models/{external_id}/spend",
    response={200: SpendReportOut, **ERRORS},
    summary="Spend of a model",
    description="The runs that produced it and the deployments that serve it, among those you "
    "can see. " + PERIOD_HELP,
)
def model_spend(
    request: HttpRequest,
    slug: Slug,
    external_id: ExternalId,
    start: Day | None = None,
    end: Day | None = None,
) -> SpendReport:
    model = external_model_for_user(user=request.user, slug=slug, external_id=external_id)
    start, end = _period(start, end)
    scope = model_scope(model=model, user=request.user, currency=_currency(request))
    return spend_report(scope=scope, start=start, end=end)
