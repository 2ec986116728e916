from datetime import date

from django.core.exceptions import ValidationError
from django.http import HttpRequest
from ninja import Field, Router, Schema

from apps.deployments.selectors import external_deployment_for_user
from apps.insights.selectors_build_or_call import (
    build_or_call_result,
    default_period,
    result_json,
)

from ..common import ERRORS
from ..schemas import ExternalId, Slug

router = Router(tags=["build or call"])
PATH = "/{slug}/deployments/{external_id}/build-or-call"


class BuildOrCallOut(Schema):
    deployment: str
    project: str
    model: str
    period_start: date
    period_end: date
    requests: int
    self_hosted_cost: str
    self_hosted_per_request: str | None
    idle_spend: str | None
    api_model: str | None
    api_per_request: str | None
    break_even_requests_per_hour: str | None
    requests_per_hour: str
    expected_requests_per_hour: str | None
    served_by_api: bool = Field(
        description="Served by a hosted API today: the verdict is self-hosting it, the other way."
    )
    api_monthly: str | None
    self_hosted_monthly: str
    verdict: str | None
    monthly_margin: str | None
    traffic_shape: str
    reasons: list[str]
    notes: list[str]
    currency: str


@router.get(PATH, response={200: BuildOrCallOut, **ERRORS}, summary="Build or call")
def deployment_build_or_call(
    request: HttpRequest,
    slug: Slug,
    external_id: ExternalId,
    start: date | None = None,
    end: date | None = None,
):
    """Self-hosting against the picked hosted API in the UTC days [start, end) (both or
    neither; by default the 30 days ending at the bill's data as of), at the saved inputs: the
    same object as `manage.py build_or_call --json`. Money as exact decimal strings."""
    deployment = external_deployment_for_user(user=request.user, slug=slug, external_id=external_id)
    if (start is None) != (end is None):
        raise ValidationError({"end": ["Give both start and end, or neither."]})
    if start is None:
        start, end = default_period()
    elif end <= start:
        raise ValidationError({"end": ["The end must be after the start."]})
    elif (end - start).days > 366:
        raise ValidationError({"end": ["Ask for at most 366 days at a time."]})
    result = build_or_call_result(deployment=deployment, start=start, end=end)
    return result_json(deployment=deployment, result=result)
