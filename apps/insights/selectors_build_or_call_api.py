"""Build or call, the other way (issue 26): a deployment served by a hosted API (its spend in the
period is model API spend, none of it GPU compute) against self-hosting the model on the
catalogue's cheapest GPU instance that holds it, at the replica capacity the team enters.

It reads the same definitions as the build-or-call page (build_or_call.compute): the API's side
is its real bill (model API cost ÷ requests, per request), the self-hosted side the replicas the
real volume needs (sized for its peak hour: max(1, ⌈volume × peak-to-mean ÷ capacity⌉)) at the
instance's on-demand price, plus the engineering hours; the break-even, verdicts, margins and
the traffic shape are compute's. Requests and their hourly shape are the deployment's reported
traffic where it has any, else the bill's requests per day spread evenly over the day's hours.
"""

from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from django.db.models import Q, Sum

from apps.billing.models import CostKind, DailyCost, DailyModelApiCost, TokenDirection
from apps.deployments.models import Deployment

from . import build_or_call
from .compute_levers import MEMORY_SPARE
from .models import BuildOrCallInputs, GpuInstancePrice, GpuTypeMemory

ZERO = Decimal(0)


def _plain(value: Decimal) -> str:
    """A Decimal without trailing zeros or an exponent: 2000, 0.3, 1.35."""
    return format(value.normalize(), "f")


INPUT_DIRECTIONS = (TokenDirection.INPUT, TokenDirection.CACHED_INPUT, TokenDirection.CACHE_WRITE)


@dataclass(frozen=True)
class ApiUsage:
    """What the deployment bought from hosted APIs in the period, in one currency."""

    currency: str
    cost: Decimal
    other_currencies: dict[str, Decimal]
    tokens_in: int
    tokens_out: int
    requests_by_day: dict[date, int]
    models: list[str]  # provider · model, dearest first


@dataclass(frozen=True)
class Instance:
    """The catalogue's instance a replica would run on."""

    provider: str
    instance_type: str
    region: str
    gpu_type: str
    gpu_count: Decimal
    memory_gb: Decimal  # all its GPUs
    per_hour: Decimal

    @property
    def label(self) -> str:
        return f"{self.provider} {self.instance_type or self.gpu_type} in {self.region}"


def is_api_served(*, deployment: Deployment, start: date, end: date) -> bool:
    """Model API spend in the period and no GPU compute: the model is called, not served."""
    kinds = dict(
        DailyCost.objects.filter(deployment=deployment, day__gte=start, day__lt=end)
        .filter(Q(cost_kind=CostKind.MODEL_API) | Q(cost_kind=CostKind.GPU_COMPUTE))
        .values("cost_kind")
        .annotate(amount=Sum("effective_cost"))
        .order_by()
        .values_list("cost_kind", "amount")
    )
    return bool(kinds.get(CostKind.MODEL_API)) and not kinds.get(CostKind.GPU_COMPUTE)


def api_usage(*, deployment: Deployment, start: date, end: date, currency: str) -> ApiUsage:
    rows = (
        DailyModelApiCost.objects.filter(deployment=deployment, day__gte=start, day__lt=end)
        .values("day", "provider_name", "model", "token_direction", "billing_currency")
        .annotate(cost=Sum("effective_cost"), tokens=Sum("tokens"), requests=Sum("requests"))
        .order_by()
    )
    cost = ZERO
    others: dict[str, Decimal] = {}
    tokens_in = tokens_out = 0
    by_day: dict[date, int] = {}
    by_model: dict[str, Decimal] = {}
    for row in rows:
        if row["billing_currency"] != currency:
            others[row["billing_currency"]] = others.get(row["billing_currency"], ZERO) + (
                row["cost"] or ZERO
            )
            continue
        cost += row["cost"] or ZERO
        label = f"{row['provider_name']} · {row['model'] or 'unknown'}"
        by_model[label] = by_model.get(label, ZERO) + (row["cost"] or ZERO)
        if row["token_direction"] in INPUT_DIRECTIONS:
            tokens_in += int(row["tokens"] or 0)
        elif row["token_direction"] == TokenDirection.OUTPUT:
            tokens_out += int(row["tokens"] or 0)
        if row["requests"]:
            by_day[row["day"]] = by_day.get(row["day"], 0) + int(row["requests"])
    return ApiUsage(
        currency=currency,
        cost=cost,
        other_currencies=others,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        requests_by_day=by_day,
        models=[name for name, _ in sorted(by_model.items(), key=lambda kv: (-kv[1], kv[0]))],
    )


def instance_holding(*, memory_gb: Decimal, currency: str) -> Instance | None:
    """The catalogue's cheapest on-demand instance, in any provider and region, whose GPUs hold
    `memory_gb` with 20% to spare (the right-size lever's margin), in `currency`; the first by
    provider, type and region among equals."""
    memory = dict(GpuTypeMemory.objects.values_list("gpu_type", "memory_gb"))
    best = None
    # A GPU alone (a GCP attachment, no instance type) is not something a replica runs on.
    for row in (
        GpuInstancePrice.objects.filter(
            currency=currency, on_demand_per_hour__isnull=False, on_demand_per_hour__gt=0
        )
        .exclude(instance_type="")
        .order_by("provider", "instance_type", "region")
    ):
        per_gpu = memory.get(row.gpu_type)
        if per_gpu is None:
            continue
        total = per_gpu * row.gpu_count
        if total < memory_gb * MEMORY_SPARE:
            continue
        if best is None or row.on_demand_per_hour < best.per_hour:
            best = Instance(
                provider=row.provider,
                instance_type=row.instance_type,
                region=row.region,
                gpu_type=row.gpu_type,
                gpu_count=row.gpu_count,
                memory_gb=total,
                per_hour=row.on_demand_per_hour,
            )
    return best


def _spread(by_day: dict[date, int], hours: list) -> list[int]:
    """A day's requests over its 24 hours: the same in each, the remainder one each in the
    first hours."""
    out = []
    for hour in hours:
        requests = by_day.get(hour.date(), 0)
        share, rest = divmod(requests, 24)
        out.append(share + (1 if hour.hour < rest else 0))
    return out


def api_served_inputs(
    *,
    deployment: Deployment,
    start: date,
    end: date,
    choices: BuildOrCallInputs,
    org,
    hours: list,
    traffic: list,
    shape_thresholds: build_or_call.Thresholds,
) -> build_or_call.Inputs:
    """compute's inputs for an API-served deployment (see the module's docstring)."""
    usage = api_usage(deployment=deployment, start=start, end=end, currency=org.currency)
    if any(row.requests for row in traffic):
        by_hour = {row.hour: row.requests for row in traffic}
        hourly = [by_hour.get(hour, 0) for hour in hours]
        source = "the deployment's reported traffic"
    else:
        hourly = _spread(usage.requests_by_day, hours)
        source = "the bill's requests per day"
    requests = sum(hourly)
    engineering = choices.engineering_hours_per_month
    capacity = choices.capacity_per_replica_hour
    missing = ""
    instance = None
    model = deployment.model.name
    if not choices.open_weights:
        missing = (
            f"{model} is not marked as an open model: there is no self-hosted alternative to "
            "price (tick the box if its weights can be served)."
        )
    elif choices.model_memory_gb is None:
        missing = "Enter the GPU memory one replica needs to price a self-hosted alternative."
    elif capacity is None:
        missing = "Enter the requests one replica serves an hour to size the self-hosted option."
    else:
        instance = instance_holding(memory_gb=choices.model_memory_gb, currency=org.currency)
        if instance is None:
            missing = (
                f"No GPU instance in the catalogue priced in {org.currency} holds "
                f"{choices.model_memory_gb} GB with 20% to spare."
            )
    replicas, spend = 0, ZERO
    if instance is not None and hours:
        shape = build_or_call.shape_of(hourly, shape_thresholds)
        volume = Decimal(requests) / len(hours)
        replicas = int(
            max(
                Decimal(1),
                build_or_call._ceil(
                    volume / build_or_call.effective_capacity(capacity, shape.peak_to_mean)
                ),
            )
        )
        spend = replicas * instance.per_hour * len(hours)
    notes = [f"Requests and their shape: {source}."]
    if usage.models:
        notes.append(f"Called today: {', '.join(usage.models)}.")
    if instance is not None:
        notes.append(
            f"Self-hosted on {instance.label} ({_plain(instance.gpu_count)} × "
            f"{instance.gpu_type}, {_plain(instance.memory_gb)} GB) at "
            f"{build_or_call.money(instance.per_hour, org.currency)} an hour on demand: "
            f"{replicas} replica{'s' if replicas != 1 else ''} of {_plain(capacity)} "
            "requests an hour for the real volume's peak hour."
        )
    return build_or_call.Inputs(
        period_start=start,
        period_end=end,
        currency=org.currency,
        spend=spend,
        other_currencies=usage.other_currencies,
        hourly_requests=hourly,
        duplicate_requests=0,
        tokens_in=usage.tokens_in,
        tokens_out=usage.tokens_out,
        replicas=max(replicas, 1),
        engineering_hours_per_month=org.engineering_hours_per_month
        if engineering is None
        else engineering,
        hourly_rate=org.engineering_hourly_rate,
        api=build_or_call.ApiPrices(
            name=usage.models[0] if usage.models else f"{model} (as billed)",
            currency=org.currency,
            input_per_token=None,
            output_per_token=None,
        ),
        batch=deployment.serving_pattern == Deployment.ServingPattern.BATCH,
        data_residency=deployment.data_residency,
        fine_tuned=deployment.is_fine_tuned,
        api_serves_fine_tuned=True,  # it is served by the API today
        busiest_hour_within_objective=None,
        capacity_per_replica_hour=capacity,
        expected_requests_per_hour=choices.expected_requests_per_hour,
        thresholds=shape_thresholds,
        billed_api_per_request=usage.cost / requests if requests else None,
        api_served=True,
        self_hosted_missing=missing,
        extra_notes=notes,
    )
