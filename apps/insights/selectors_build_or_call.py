"""Reads of build or call: a deployment's inputs (its spend, hourly traffic, saved choices and the
organisation's defaults) gathered for build_or_call.compute, the API models offered for it, and
the models page's ranking."""

import copy
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from difflib import SequenceMatcher

from django.db.models import QuerySet
from django.utils import timezone

from apps.accounts.models import Organization
from apps.deployments.models import Deployment
from apps.deployments.selectors import deployment_traffic, deployments_visible_to
from apps.spend.selectors import data_as_of, deployment_scope, spend_report

from . import build_or_call
from .models import BuildOrCallInputs, BuildOrCallSettings, ModelApiPrice
from .selectors import default_period as findings_default_period
from .selectors_build_or_call_api import api_served_inputs, is_api_served

SUGGESTIONS = 5
# Names closer than this to the model's name are offered first; others are not offered at all.
SUGGESTION_CUTOFF = 0.3


def default_period(*, today: date | None = None) -> tuple[date, date]:
    """The findings' default: the 30 whole UTC days ending at the bill's "data as of"."""
    today = today or timezone.now().astimezone(UTC).date()
    return findings_default_period(as_of=data_as_of(), today=today)


def inputs_for(*, deployment: Deployment) -> BuildOrCallInputs:
    """The saved inputs, or unsaved empty ones (every field at its default)."""
    saved = BuildOrCallInputs.objects.filter(deployment=deployment).first()
    return saved or BuildOrCallInputs(deployment=deployment)


def api_price(*, name: str) -> ModelApiPrice | None:
    return ModelApiPrice.objects.filter(name=name).first() if name else None


def _comparable(name: str) -> str:
    return name.rsplit("/", 1)[-1].lower()


def api_model_suggestions(*, deployment: Deployment, limit: int = SUGGESTIONS) -> list[str]:
    """The catalogue's names closest to the model's (ignoring a provider prefix), among the APIs
    priced per input and output token."""
    wanted = _comparable(deployment.model.name)
    names = ModelApiPrice.objects.filter(
        input_per_token__isnull=False, output_per_token__isnull=False
    ).values_list("name", flat=True)
    scored = []
    for name in names:
        matcher = SequenceMatcher(None, wanted, _comparable(name))
        if matcher.quick_ratio() < SUGGESTION_CUTOFF:
            continue
        ratio = matcher.ratio()
        if ratio >= SUGGESTION_CUTOFF:
            scored.append((-ratio, len(name), name))
    return [name for *_, name in sorted(scored)[:limit]]


def _hours(start: date, end: date) -> list[datetime]:
    first = datetime(start.year, start.month, start.day, tzinfo=UTC)
    count = (end - start).days * 24
    return [first + timedelta(hours=index) for index in range(count)]


def _prices(row: ModelApiPrice | None) -> build_or_call.ApiPrices | None:
    if row is None:
        return None
    return build_or_call.ApiPrices(
        name=row.name,
        currency=row.currency,
        input_per_token=row.input_per_token,
        output_per_token=row.output_per_token,
        cached_input_per_token=row.cached_input_per_token,
        batch_input_per_token=row.batch_input_per_token,
        batch_output_per_token=row.batch_output_per_token,
    )


def thresholds() -> build_or_call.Thresholds:
    row = BuildOrCallSettings.get()
    return build_or_call.Thresholds(
        low_requests_per_hour=row.low_requests_per_hour,
        high_requests_per_hour=row.high_requests_per_hour,
        spiky_idle_share=row.spiky_idle_share,
        spiky_variation=row.spiky_variation,
        steady_variation=row.steady_variation,
    )


def build_or_call_inputs(
    *,
    deployment: Deployment,
    start: date,
    end: date,
    choices: BuildOrCallInputs | None = None,
    organization: Organization | None = None,
    shape_thresholds: build_or_call.Thresholds | None = None,
) -> build_or_call.Inputs:
    """What compute needs for the deployment in the UTC days [start, end); `choices` are the
    page's inputs (saved or not), else the saved ones."""
    org = organization or Organization.get()
    choices = choices or inputs_for(deployment=deployment)
    report = spend_report(
        scope=deployment_scope(deployment=deployment, currency=org.currency), start=start, end=end
    )
    spend = {total.currency: total.effective_cost for total in report.totals}
    hours = _hours(start, end)
    traffic = list(
        deployment_traffic(
            deployment=deployment, start=hours[0], end=hours[-1] + timedelta(hours=1)
        )
        if hours
        else []
    )
    if is_api_served(deployment=deployment, start=start, end=end):
        # The other way: the model is called from a hosted API today (selectors_build_or_call_api).
        return api_served_inputs(
            deployment=deployment,
            start=start,
            end=end,
            choices=choices,
            org=org,
            hours=hours,
            traffic=traffic,
            shape_thresholds=shape_thresholds or thresholds(),
        )
    by_hour = {row.hour: row.requests for row in traffic}
    objective = choices.latency_objective_ms or deployment.latency_objective_ms
    within = [
        row.requests
        for row in traffic
        if objective is None or row.latency_p95_ms is None or row.latency_p95_ms <= objective
    ]
    engineering = choices.engineering_hours_per_month
    return build_or_call.Inputs(
        period_start=start,
        period_end=end,
        currency=org.currency,
        spend=spend.pop(org.currency, Decimal(0)),
        other_currencies=spend,
        hourly_requests=[by_hour.get(hour, 0) for hour in hours],
        duplicate_requests=sum(row.duplicate_requests for row in traffic),
        tokens_in=sum(row.tokens_in for row in traffic),
        tokens_out=sum(row.tokens_out for row in traffic),
        replicas=deployment.replicas,
        engineering_hours_per_month=org.engineering_hours_per_month
        if engineering is None
        else engineering,
        hourly_rate=org.engineering_hourly_rate,
        api=_prices(api_price(name=choices.api_model)),
        batch=deployment.serving_pattern == Deployment.ServingPattern.BATCH,
        data_residency=deployment.data_residency,
        fine_tuned=deployment.is_fine_tuned,
        api_serves_fine_tuned=choices.api_serves_fine_tuned,
        busiest_hour_within_objective=max(within) if within and max(within) else None,
        capacity_per_replica_hour=choices.capacity_per_replica_hour,
        expected_requests_per_hour=choices.expected_requests_per_hour,
        thresholds=shape_thresholds or thresholds(),
    )


def build_or_call_result(
    *,
    deployment: Deployment,
    start: date,
    end: date,
    choices: BuildOrCallInputs | None = None,
    organization: Organization | None = None,
    shape_thresholds: build_or_call.Thresholds | None = None,
) -> build_or_call.Result:
    return build_or_call.compute(
        build_or_call_inputs(
            deployment=deployment,
            start=start,
            end=end,
            choices=choices,
            organization=organization,
            shape_thresholds=shape_thresholds,
        )
    )


@dataclass(frozen=True)
class RankedDeployment:
    deployment: Deployment
    result: build_or_call.Result


def deployments_for_build_or_call(*, user) -> QuerySet[Deployment]:
    return deployments_visible_to(user=user).select_related("model", "project")


def build_or_call_ranking(*, user, start: date, end: date) -> list[RankedDeployment]:
    """Every deployment the user sees, by monthly self-hosted cost (dearest first), with its
    verdict. A query or two per deployment: an organisation runs tens of models, not thousands."""
    org = Organization.get()
    shape = thresholds()
    saved = {
        row.deployment_id: row
        for row in BuildOrCallInputs.objects.filter(
            deployment__in=deployments_for_build_or_call(user=user)
        )
    }
    ranked = []
    for deployment in deployments_for_build_or_call(user=user):
        # The ranking is of real volumes: an expected volume is the page's what-if.
        choices = copy.copy(saved.get(deployment.pk) or BuildOrCallInputs(deployment=deployment))
        choices.expected_requests_per_hour = None
        result = build_or_call_result(
            deployment=deployment,
            start=start,
            end=end,
            choices=choices,
            organization=org,
            shape_thresholds=shape,
        )
        ranked.append(RankedDeployment(deployment=deployment, result=result))
    # By what each costs a month as it is served (an API-served one: its API bill).
    ranked.sort(key=lambda row: (-row.result.monthly_cost, row.deployment.name))
    return ranked


def build_or_call_all(*, start: date, end: date) -> list[RankedDeployment]:
    """Every deployment, for the command line (by name), at its saved inputs."""
    org = Organization.get()
    shape = thresholds()
    return [
        RankedDeployment(
            deployment=deployment,
            result=build_or_call_result(
                deployment=deployment,
                start=start,
                end=end,
                organization=org,
                shape_thresholds=shape,
            ),
        )
        for deployment in Deployment.objects.select_related("model", "project").order_by(
            "project__slug", "name", "pk"
        )
    ]


def _text(value: Decimal | None, places: str) -> str | None:
    return None if value is None else str(value.quantize(Decimal(places)))


def result_json(*, deployment: Deployment, result: build_or_call.Result) -> dict:
    """The command line's and the API's object (money as exact decimal strings: per request to
    1e-10, a month to the cent; volumes to the hundredth)."""
    return {
        "deployment": deployment.external_id or deployment.name,
        "project": deployment.project.slug,
        "model": deployment.model.external_id or deployment.model.name,
        "period_start": result.inputs.period_start.isoformat(),
        "period_end": result.inputs.period_end.isoformat(),
        "requests": result.requests,
        "self_hosted_cost": _text(result.self_hosted_cost, "0.01"),
        "self_hosted_per_request": _text(result.self_hosted_per_request, "1E-10"),
        "idle_spend": _text(result.idle_spend, "0.01"),
        "api_model": result.inputs.api.name if result.inputs.api else None,
        "api_per_request": _text(result.api_per_request, "1E-10"),
        "break_even_requests_per_hour": _text(result.break_even_requests_per_hour, "0.01"),
        "requests_per_hour": _text(result.requests_per_hour, "0.01"),
        "expected_requests_per_hour": _text(result.inputs.expected_requests_per_hour, "0.01"),
        "served_by_api": result.inputs.api_served,
        "api_monthly": _text(result.api_monthly, "0.01"),
        "self_hosted_monthly": _text(result.self_hosted_monthly, "0.01"),
        "verdict": result.verdict,
        "monthly_margin": _text(result.monthly_margin, "0.01"),
        "traffic_shape": result.shape.label,
        "reasons": result.reasons,
        "notes": result.notes,
        "currency": result.inputs.currency,
    }
