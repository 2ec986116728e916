"""The inference levers (issue 20): what a deployment could save a month by caching repeated
requests, scaling to zero, batching, serving in batch what nobody needs in real time,
right-sizing its hardware or trying a smaller model. Savings, never waste.

`levers` is pure computation on exact Decimals over one deployment's `Facts` (the tests
hand-compute it); `deployment_facts` reads them in bulk for every deployment with spend in the
last 30 days of the bill (the spot and region levers' window): its lines spread over their UTC
hours, its hourly traffic, its GPUs' hourly utilisation and memory, the catalogue instance it
runs on and the others in its provider and region, the API model it is compared with. Within
a findings recompute (facts_shared) the six kinds share that one read of the period; the spend
comes grouped by deployment, currency and charge period from SQL (per deployment and hour on an
hourly bill), not line by line.

Every lever of a deployment has one subject (its main resource, else `deployment:<id>`), so the
savings total counts the largest of them (and of any spot or region lever on that resource):
they are alternative ways of cutting one bill, not additive ones. scale_to_zero's hours are also
idle GPU waste; the waste stays in idle_gpu and this finding only says what the fix saves.
"""

from collections import defaultdict
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_CEILING, ROUND_DOWN, Decimal

from django.db.models import Q, Sum

from apps.billing.models import CostLineItem
from apps.deployments.models import Deployment, DeploymentResource, TrafficHour
from apps.gpu.models import GpuHour
from apps.gpu.selectors import gpus_by_resource, gpus_named_by

from .compute import HOUR, PLACES, SubjectHours, _hours_of
from .compute_part3 import _lever_window, lever_rows, provider_key
from .models import (
    BuildOrCallInputs,
    BuildOrCallSettings,
    GpuInstancePrice,
    GpuTypeMemory,
    Kind,
    ModelApiPrice,
)

ZERO = Decimal(0)
# A higher batch size is sized to keep the GPUs this busy (percent of the time).
BATCH_TARGET_UTILISATION = Decimal(80)
# Batching helps only GPUs busy less than this on average while traffic flows.
BATCH_BELOW_UTILISATION = Decimal(50)
# A batch job answers within the hour at best: an objective under it forbids batch serving.
BATCH_DELAY_MS = 3_600_000
# Right-sizing: the model's peak memory with 20% to spare, as part 2's right_size.
MEMORY_SPARE = Decimal("1.2")
MIB_IN_GB = Decimal("1.048576") / 1000
CANDIDATES_SHOWN = 5
# Batch serving: the day's requests fit a batch window when its busiest hours carry this share.
BATCH_WINDOW_HOURS = 8
BATCH_WINDOW_SHARE = Decimal("0.8")
# The next smaller comparable model of a family (13B -> 7B, 70B -> 34B) needs about half the
# memory: the GPU that holds half the model's peak (with the spare) holds the smaller model.
SMALLER_MODEL_MEMORY_SHARE = Decimal("0.5")
EVIDENCE_HOURS = 24 * 31  # the timelines keep at most a month of hours


@dataclass(frozen=True)
class Offer:
    """A catalogue instance (gpu_count 0: a CPU instance, memory_gb its host memory)."""

    instance_type: str
    gpu_type: str
    gpu_count: Decimal
    memory_gb: Decimal | None  # per GPU (all of it for a CPU instance)
    on_demand_per_hour: Decimal
    spot_per_hour: Decimal | None = None
    source: str = ""


@dataclass(frozen=True)
class Traffic:
    requests: int
    duplicates: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    latency_p95_ms: float | None = None


@dataclass(frozen=True)
class ApiModel:
    name: str
    input_per_token: Decimal
    output_per_token: Decimal
    batch_input_per_token: Decimal | None = None
    batch_output_per_token: Decimal | None = None


@dataclass
class Facts:
    """One deployment over the 30 days: what the levers need, all in `currency`."""

    deployment_id: int
    name: str
    currency: str
    hours: list[datetime]  # the window's UTC hours
    spend_by_hour: dict[datetime, Decimal]  # the deployment's EffectiveCost spread over hours
    traffic: dict[datetime, Traffic]  # reported hours (a reported hour of 0 requests is 0)
    replicas: int = 1
    realtime: bool = True
    latency_objective_ms: int | None = None
    cold_start_seconds: int | None = None
    utilisation_by_hour: dict[datetime, Decimal] = field(default_factory=dict)  # percent
    peak_utilisation: Decimal | None = None  # the highest hourly mean of any of its GPUs
    peak_memory_gb: Decimal | None = None  # the largest GPU's peak memory
    current: Offer | None = None  # the catalogue instance it runs on (on-demand)
    instance_hours: Decimal = ZERO  # its on-demand instance-hours in the window
    offers: list[Offer] = field(default_factory=list)  # the provider and region's instances
    api: ApiModel | None = None  # the API model its build-or-call page compares with
    smaller_api: ApiModel | None = None  # the next smaller comparable one
    steady_variation: Decimal = Decimal("0.5")
    spiky_idle_share: Decimal = Decimal("0.25")

    @property
    def spend(self) -> Decimal:
        return sum(self.spend_by_hour.values(), ZERO)

    @property
    def requests(self) -> int:
        return sum(row.requests for row in self.traffic.values())

    def requests_at(self, hour: datetime) -> int:
        row = self.traffic.get(hour)
        return row.requests if row is not None else 0


@dataclass(frozen=True)
class Lever:
    saving: Decimal  # a month (the 30 days), in the facts' currency
    reason: str
    evidence: dict


def _text(value: Decimal) -> str:
    text = format(value.normalize(), "f")
    return text if text != "-0" else "0"


def money(amount: Decimal, currency: str) -> str:
    return f"{currency} {amount.quantize(Decimal('0.01')):,}"


def _ceil(value: Decimal) -> Decimal:
    return value.to_integral_value(rounding=ROUND_CEILING)


def _timeline(facts: Facts) -> list[list]:
    """[hour, requests, spend] per hour of the window (the latest EVIDENCE_HOURS)."""
    return [
        [hour.isoformat(), facts.requests_at(hour), _text(facts.spend_by_hour.get(hour, ZERO))]
        for hour in facts.hours[-EVIDENCE_HOURS:]
    ]


def _spans(hours: list[datetime]) -> list[dict]:
    spans: list[list[datetime]] = []
    for hour in hours:
        if spans and hour - spans[-1][1] == HOUR:
            spans[-1][1] = hour
        else:
            spans.append([hour, hour])
    return [
        {
            "start": start.isoformat(),
            "end": (end + HOUR).isoformat(),
            "hours": int((end - start) / HOUR) + 1,
        }
        for start, end in spans
    ]


# -- The levers, one function each: None when it does not fire ------------------------------------


def cache_repeats(facts: Facts) -> Lever | None:
    """Duplicate requests × cost per request (the 30 days' spend ÷ their requests)."""
    requests = facts.requests
    duplicates = sum(row.duplicates for row in facts.traffic.values())
    spend = facts.spend
    if not duplicates or not requests or spend <= 0:
        return None
    per_request = spend / requests
    saving = duplicates * per_request
    return Lever(
        saving=saving,
        reason=(
            f"{duplicates:,} of {requests:,} requests repeated an earlier one: a cache would "
            f"save {money(saving, facts.currency)} a month at "
            f"{money(per_request * 1000, facts.currency)} per thousand requests"
        ),
        evidence={
            "requests": requests,
            "duplicates": duplicates,
            "duplicate_percent": _text((Decimal(duplicates) * 100 / requests).quantize(PLACE)),
            "cost_per_request": _text(per_request.quantize(PLACES)),
            "spend": _text(spend),
            "duplicates_by_hour": [
                [hour.isoformat(), row.requests, row.duplicates]
                for hour, row in sorted(facts.traffic.items())[-EVIDENCE_HOURS:]
            ],
        },
    )


PLACE = Decimal("0.01")


def cold_start_allowed(facts: Facts) -> bool:
    """A known cold start within the latency objective (none set: any cold start will do)."""
    if facts.cold_start_seconds is None:
        return False
    return (
        facts.latency_objective_ms is None
        or facts.cold_start_seconds * 1000 <= facts.latency_objective_ms
    )


def scale_to_zero(facts: Facts) -> Lever | None:
    """The spend of the billed hours with no traffic, where a cold start is allowed."""
    if not facts.traffic or not cold_start_allowed(facts):
        return None
    idle = [
        hour
        for hour in facts.hours
        if facts.spend_by_hour.get(hour, ZERO) > 0 and facts.requests_at(hour) == 0
    ]
    if not idle:
        return None
    saving = sum((facts.spend_by_hour[hour] for hour in idle), ZERO)
    billed = sum(1 for hour in facts.hours if facts.spend_by_hour.get(hour, ZERO) > 0)
    spans = _spans(idle)
    return Lever(
        saving=saving,
        reason=(
            f"{len(idle):,} of {billed:,} billed hours served no request: scaling to zero "
            f"({facts.cold_start_seconds} s cold start"
            + (
                f", within the {facts.latency_objective_ms:,} ms objective"
                if facts.latency_objective_ms
                else ", no latency objective"
            )
            + f") would save {money(saving, facts.currency)} a month (that spend is idle GPU "
            "waste, counted there)"
        ),
        evidence={
            "zero_hours": len(idle),
            "billed_hours_30d": billed,  # billed_hours is the finding-hours' (none)
            "spans": spans[-50:],
            "spans_count": len(spans),
            "cold_start_seconds": facts.cold_start_seconds,
            "latency_objective_ms": facts.latency_objective_ms,
            "timeline": _timeline(facts),
        },
    )


def _variation(values: list[int]) -> Decimal | None:
    if not values or not sum(values):
        return None
    mean = Decimal(sum(values)) / len(values)
    variance = sum((Decimal(value) - mean) ** 2 for value in values) / len(values)
    return variance.sqrt() / mean


def batch_requests(facts: Facts) -> Lever | None:
    """Steady traffic on GPUs busy under BATCH_BELOW_UTILISATION % on average (in the hours with
    traffic): a higher batch size would serve it on ⌈replicas × utilisation ÷ 80⌉ replicas;
    saving = the spend × freed replicas ÷ replicas."""
    if facts.replicas < 2 or not facts.traffic:
        return None
    billed = [hour for hour in facts.hours if facts.spend_by_hour.get(hour, ZERO) > 0]
    hourly = [facts.requests_at(hour) for hour in billed]
    if not hourly:
        return None
    idle_share = Decimal(sum(1 for value in hourly if value == 0)) / len(hourly)
    variation = _variation(hourly)
    if (
        variation is None
        or idle_share >= facts.spiky_idle_share
        or variation > facts.steady_variation
    ):
        return None  # spiky traffic: batching does not free a replica
    busy = [
        facts.utilisation_by_hour[hour]
        for hour in billed
        if facts.requests_at(hour) > 0 and hour in facts.utilisation_by_hour
    ]
    if not busy:
        return None
    utilisation = sum(busy, ZERO) / len(busy)
    if utilisation >= BATCH_BELOW_UTILISATION:
        return None
    needed = max(Decimal(1), _ceil(facts.replicas * utilisation / BATCH_TARGET_UTILISATION))
    freed = facts.replicas - int(needed)
    if freed <= 0:
        return None
    saving = facts.spend * freed / facts.replicas
    return Lever(
        saving=saving,
        reason=(
            f"Steady traffic on GPUs {utilisation.quantize(Decimal('0.1'))}% busy: a higher "
            f"batch size serves it on {int(needed)} of {facts.replicas} replicas, "
            f"{money(saving, facts.currency)} a month less"
        ),
        evidence={
            "utilisation_percent": _text(utilisation.quantize(PLACES)),
            "target_percent": _text(BATCH_TARGET_UTILISATION),
            "replicas": facts.replicas,
            "replicas_needed": int(needed),
            "variation": _text(variation.quantize(Decimal("0.0001"))),
            "idle_share": _text(idle_share.quantize(Decimal("0.0001"))),
            "utilisation_by_hour": [
                [
                    hour.isoformat(),
                    facts.requests_at(hour),
                    _text(facts.utilisation_by_hour[hour])
                    if hour in facts.utilisation_by_hour
                    else None,
                ]
                for hour in facts.hours[-EVIDENCE_HOURS:]
            ],
        },
    )


def _api_cost(api: ApiModel, *, requests: int, tokens_in: int, tokens_out: int, batch: bool):
    """What the requests would cost at the API's prices (batch prices where asked and known)."""
    if batch:
        if api.batch_input_per_token is None or api.batch_output_per_token is None:
            return None
        return tokens_in * api.batch_input_per_token + tokens_out * api.batch_output_per_token
    return tokens_in * api.input_per_token + tokens_out * api.output_per_token


def traffic_pattern(facts: Facts) -> dict | None:
    """Whether the traffic suits batch serving, and why; any of:
    - concentrated: the busiest BATCH_WINDOW_HOURS hours of the UTC day carry
      BATCH_WINDOW_SHARE or more of the window's requests;
    - bursty: not steady under the build-or-call settings (a spiky share of billed hours
      without traffic, or a variation above the steady one);
    - fits a batch window: its GPUs' mean utilisation over the billed hours with metrics,
      U%, says a day's requests take 24 × U ÷ BATCH_TARGET_UTILISATION hours on the same
      GPUs kept 80% busy: BATCH_WINDOW_HOURS or fewer.
    None for steady round-the-clock traffic that keeps its GPUs busy all day (or whose
    utilisation is unknown): a batch job would only delay the answers."""
    total = facts.requests
    if not total:
        return None
    by_hour_of_day = [0] * 24
    for hour, row in facts.traffic.items():
        by_hour_of_day[hour.hour] += row.requests
    busiest = sorted(range(24), key=lambda h: (-by_hour_of_day[h], h))[:BATCH_WINDOW_HOURS]
    window_share = Decimal(sum(by_hour_of_day[h] for h in busiest)) / total
    billed = [hour for hour in facts.hours if facts.spend_by_hour.get(hour, ZERO) > 0]
    hourly = [facts.requests_at(hour) for hour in billed]
    idle_share = Decimal(sum(1 for value in hourly if value == 0)) / len(hourly) if hourly else ZERO
    variation = _variation(hourly)
    concentrated = window_share >= BATCH_WINDOW_SHARE
    bursty = idle_share >= facts.spiky_idle_share or (
        variation is not None and variation > facts.steady_variation
    )
    busy = [facts.utilisation_by_hour[hour] for hour in billed if hour in facts.utilisation_by_hour]
    utilisation = sum(busy, ZERO) / len(busy) if busy else None
    day_hours = utilisation * 24 / BATCH_TARGET_UTILISATION if utilisation is not None else None
    fits = day_hours is not None and day_hours <= BATCH_WINDOW_HOURS
    if not concentrated and not bursty and not fits:
        return None
    why = []
    if concentrated:
        why.append(
            f"{_text((window_share * 100).quantize(PLACE))}% of the requests came in the "
            f"{BATCH_WINDOW_HOURS} busiest hours of the day"
        )
    if bursty:
        why.append(
            f"bursty traffic (variation {_text(variation.quantize(PLACE)) if variation else '0'}, "
            f"{_text((idle_share * 100).quantize(PLACE))}% of billed hours without any)"
        )
    if fits:
        why.append(
            f"a day's requests fit a {_text(day_hours.quantize(PLACE))}-hour batch window (its "
            f"GPUs {_text(utilisation.quantize(PLACE))}% busy, kept "
            f"{_text(BATCH_TARGET_UTILISATION)}% busy)"
        )
    return {
        "concentrated": concentrated,
        "bursty": bursty,
        "fits_window": fits,
        "utilisation_percent": _text(utilisation.quantize(PLACE)) if busy else None,
        "batch_window_hours": _text(day_hours.quantize(PLACE)) if busy else None,
        "window_hours": BATCH_WINDOW_HOURS,
        "window_share_percent": _text((window_share * 100).quantize(PLACE)),
        "busiest_hours": sorted(busiest),
        "variation": _text(variation.quantize(Decimal("0.0001"))) if variation else "0",
        "idle_share": _text(idle_share.quantize(Decimal("0.0001"))),
        "requests_by_hour_of_day": by_hour_of_day,
        "why": " and ".join(why),
    }


def batch_not_realtime(facts: Facts) -> Lever | None:
    """A real-time deployment whose latency objective is an hour or more (a batch job's
    turnaround) and whose traffic is concentrated or bursty (traffic_pattern): the larger of
    serving it on spot capacity (instance-hours × (on-demand − spot)) and at the API's batch
    prices (the spend − its tokens at the batch prices)."""
    objective = facts.latency_objective_ms
    if not facts.realtime or objective is None or objective < BATCH_DELAY_MS:
        return None
    requests = facts.requests
    if not requests:
        return None
    pattern = traffic_pattern(facts)
    if pattern is None:
        return None  # steady round the clock: the answers are wanted as they come
    options = []
    current = facts.current
    if current is not None and current.spot_per_hour is not None and facts.instance_hours:
        spot = facts.instance_hours * (current.on_demand_per_hour - current.spot_per_hour)
        if spot > 0:
            options.append(
                {
                    "option": "spot",
                    "what": f"{current.instance_type} on spot capacity",
                    "saving": spot,
                    "detail": f"{_text(facts.instance_hours)} instance-hours × "
                    f"({_text(current.on_demand_per_hour)} − {_text(current.spot_per_hour)})",
                }
            )
    if facts.api is not None:
        tokens_in = sum(row.tokens_in for row in facts.traffic.values())
        tokens_out = sum(row.tokens_out for row in facts.traffic.values())
        cost = _api_cost(
            facts.api, requests=requests, tokens_in=tokens_in, tokens_out=tokens_out, batch=True
        )
        if cost is not None and facts.spend - cost > 0:
            options.append(
                {
                    "option": "api_batch",
                    "what": f"{facts.api.name} at its batch prices",
                    "saving": facts.spend - cost,
                    "detail": f"{_text(facts.spend)} spent − {_text(cost)} at batch prices",
                }
            )
    if not options:
        return None
    best = max(options, key=lambda option: (option["saving"], option["option"]))
    return Lever(
        saving=best["saving"],
        reason=(
            f"Served in real time though its objective allows {objective / 3_600_000:g} h "
            f"and {pattern['why']}: {best['what']} would save "
            f"{money(best['saving'], facts.currency)} a month"
        ),
        evidence={
            "latency_objective_ms": objective,
            "requests": requests,
            "pattern": pattern,
            "options": [{**option, "saving": _text(option["saving"])} for option in options],
            "chosen": best["option"],
            "timeline": _timeline(facts),
        },
    )


def _offer_json(offer: Offer, *, current: Offer, hours: Decimal) -> dict:
    return {
        "instance_type": offer.instance_type,
        "gpu_type": offer.gpu_type or "CPU",
        "gpu_count": _text(offer.gpu_count),
        "memory_gb": _text(offer.memory_gb) if offer.memory_gb is not None else None,
        "on_demand_per_hour": _text(offer.on_demand_per_hour),
        "saving_per_month": _text((current.on_demand_per_hour - offer.on_demand_per_hour) * hours),
        "source": offer.source,
    }


def right_size_serving(facts: Facts) -> Lever | None:
    """The cheapest instance of its provider and region that holds the model's memory (the
    largest GPU's peak with 20% to spare, per GPU; a CPU instance: the sum) with at least
    ⌈GPUs × peak utilisation ÷ 100⌉ GPUs: saving = (current − it) × the instance-hours."""
    current = facts.current
    if current is None or facts.peak_memory_gb is None or not facts.instance_hours:
        return None
    peak_util = facts.peak_utilisation or ZERO
    needed = max(Decimal(1), _ceil(current.gpu_count * peak_util / 100))
    want = facts.peak_memory_gb * MEMORY_SPARE
    fitting = []
    for offer in facts.offers:
        if offer.on_demand_per_hour >= current.on_demand_per_hour or offer.memory_gb is None:
            continue
        if offer.gpu_count == 0:
            # A CPU instance holds the model in host memory; only for a model its GPUs barely use.
            holds = offer.memory_gb >= want * current.gpu_count and peak_util < 10
        else:
            holds = offer.gpu_count >= needed and offer.memory_gb >= want
        if holds:
            fitting.append(offer)
    if not fitting:
        return None
    fitting.sort(key=lambda offer: (offer.on_demand_per_hour, offer.instance_type))
    best = fitting[0]
    saving = (current.on_demand_per_hour - best.on_demand_per_hour) * facts.instance_hours
    return Lever(
        saving=saving,
        reason=(
            f"Peak {_text(facts.peak_memory_gb.quantize(PLACE))} GB and "
            f"{_text(peak_util.quantize(PLACE))}% busy fit {best.instance_type} "
            f"({_text(best.gpu_count)} × {best.gpu_type or 'CPU'}) instead of "
            f"{current.instance_type} ({_text(current.gpu_count)} × {current.gpu_type}): "
            f"{money(saving, facts.currency)} a month less"
        ),
        evidence={
            "current": _offer_json(current, current=current, hours=facts.instance_hours),
            "candidates": [
                _offer_json(offer, current=current, hours=facts.instance_hours)
                for offer in fitting[:CANDIDATES_SHOWN]
            ],
            "peak_memory_gb": _text(facts.peak_memory_gb.quantize(PLACE)),
            "peak_utilisation_percent": _text(peak_util.quantize(PLACE)),
            "gpus_needed": int(needed),
            "instance_hours": _text(facts.instance_hours),
            "utilisation_by_hour": [
                [hour.isoformat(), facts.requests_at(hour), _text(value)]
                for hour, value in sorted(facts.utilisation_by_hour.items())[-EVIDENCE_HOURS:]
            ],
        },
    )


def _smaller_api(facts: Facts) -> dict | None:
    """The 30 days' tokens at the next smaller comparable API model's prices against those of
    the API model the deployment's build-or-call page compares with."""
    if facts.api is None or facts.smaller_api is None or not facts.requests:
        return None
    tokens_in = sum(row.tokens_in for row in facts.traffic.values())
    tokens_out = sum(row.tokens_out for row in facts.traffic.values())
    if not tokens_in and not tokens_out:
        return None
    now = _api_cost(
        facts.api, requests=facts.requests, tokens_in=tokens_in, tokens_out=tokens_out, batch=False
    )
    smaller = _api_cost(
        facts.smaller_api,
        requests=facts.requests,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        batch=False,
    )
    saving = now - smaller
    if saving <= 0:
        return None
    return {
        "option": "api",
        "what": facts.smaller_api.name,
        "saving": saving,
        "reason": (
            f"{facts.smaller_api.name} would cost {money(saving, facts.currency)} a month less "
            f"than {facts.api.name} for the same tokens"
        ),
        "evidence": {
            "model": facts.api.name,
            "smaller_model": facts.smaller_api.name,
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "cost": _text(now),
            "smaller_cost": _text(smaller),
            "prices": [
                {
                    "name": api.name,
                    "input_per_million": _text(api.input_per_token * 1_000_000),
                    "output_per_million": _text(api.output_per_token * 1_000_000),
                }
                for api in (facts.api, facts.smaller_api)
            ],
        },
    }


def _smaller_gpu(facts: Facts) -> dict | None:
    """A self-hosted deployment's next smaller GPU: of the catalogue instances of its provider
    and region cheaper than its own, with ⌈GPUs × peak utilisation ÷ 100⌉ GPUs or more, those
    whose GPUs cannot hold the model (under its peak × 1.2) but hold a comparable model half
    its size (peak × 0.5 × 1.2); the one with the most memory per GPU (the next step down),
    the cheaper on a tie. Saving = (current − it) on-demand × the instance-hours."""
    current = facts.current
    if (
        current is None
        or not current.gpu_count
        or facts.peak_memory_gb is None
        or not facts.instance_hours
    ):
        return None
    peak_util = facts.peak_utilisation or ZERO
    needed = max(Decimal(1), _ceil(current.gpu_count * peak_util / 100))
    holds_now = facts.peak_memory_gb * MEMORY_SPARE
    holds_smaller = holds_now * SMALLER_MODEL_MEMORY_SHARE
    fitting = [
        offer
        for offer in facts.offers
        if offer.gpu_count >= needed
        and offer.gpu_count > 0
        and offer.memory_gb is not None
        and holds_smaller <= offer.memory_gb < holds_now
        and offer.on_demand_per_hour < current.on_demand_per_hour
    ]
    if not fitting:
        return None
    fitting.sort(
        key=lambda offer: (-offer.memory_gb, offer.on_demand_per_hour, offer.instance_type)
    )
    best = fitting[0]
    saving = (current.on_demand_per_hour - best.on_demand_per_hour) * facts.instance_hours
    smaller_gb = facts.peak_memory_gb * SMALLER_MODEL_MEMORY_SHARE
    return {
        "option": "gpu",
        "what": best.instance_type,
        "saving": saving,
        "reason": (
            f"a comparable model half the size ({_text(smaller_gb.quantize(PLACE))} GB of "
            f"{_text(facts.peak_memory_gb.quantize(PLACE))} GB) fits {best.instance_type} "
            f"({_text(best.gpu_count)} × {best.gpu_type}, {_text(best.memory_gb)} GB) instead of "
            f"{current.instance_type} ({_text(current.gpu_count)} × {current.gpu_type}): "
            f"{money(saving, facts.currency)} a month less"
        ),
        "evidence": {
            "current": _offer_json(current, current=current, hours=facts.instance_hours),
            "instance": _offer_json(best, current=current, hours=facts.instance_hours),
            "candidates": [
                _offer_json(offer, current=current, hours=facts.instance_hours)
                for offer in fitting[:CANDIDATES_SHOWN]
            ],
            "peak_memory_gb": _text(facts.peak_memory_gb.quantize(PLACE)),
            "smaller_memory_gb": _text(smaller_gb.quantize(PLACE)),
            "memory_share": _text(SMALLER_MODEL_MEMORY_SHARE),
            "gpus_needed": int(needed),
            "instance_hours": _text(facts.instance_hours),
        },
    }


def smaller_model(facts: Facts) -> Lever | None:
    """An option, not a verdict (quality is the team's call): the larger of the next smaller
    comparable API model's prices for the 30 days' tokens (_smaller_api) and, self-hosted, the
    next smaller GPU that holds a comparable model half the size (_smaller_gpu)."""
    options = [
        option for option in (_smaller_api(facts), _smaller_gpu(facts)) if option is not None
    ]
    if not options:
        return None
    best = max(options, key=lambda option: (option["saving"], option["option"]))
    if best["option"] == "api":
        reason = (
            f"An option, not a verdict: {best['reason']}; whether its answers are good enough "
            "is the team's call"
        )
    else:
        reason = (
            f"An option, not a verdict: {best['reason']}; whether a smaller model answers well "
            "enough is the team's call"
        )
    evidence: dict = {
        "option": True,
        "chosen": best["option"],
        "options": [
            {"option": option["option"], "what": option["what"], "saving": _text(option["saving"])}
            for option in options
        ],
    }
    for option in options:
        if option["option"] == "api":
            evidence.update(option["evidence"])
        else:
            evidence["gpu"] = option["evidence"]
    return Lever(saving=best["saving"], reason=reason, evidence=evidence)


LEVERS = {
    Kind.CACHE_REPEATS: cache_repeats,
    Kind.SCALE_TO_ZERO: scale_to_zero,
    Kind.BATCH_REQUESTS: batch_requests,
    Kind.BATCH_NOT_REALTIME: batch_not_realtime,
    Kind.RIGHT_SIZE_SERVING: right_size_serving,
    Kind.SMALLER_MODEL: smaller_model,
}


def levers(facts: Facts) -> dict[str, Lever]:
    """The levers that fire for the deployment, by kind."""
    found = {}
    for kind, lever in LEVERS.items():
        result = lever(facts)
        if result is not None and result.saving > 0:
            found[kind] = result
    return found


# -- Reading the facts ----------------------------------------------------------------------------


def smaller_comparable(api: ModelApiPrice, rows: list[ModelApiPrice]) -> ModelApiPrice | None:
    """The dearest API model of the same provider and mode priced under `api` (dearer on
    neither input nor output tokens): the next smaller one."""
    cheaper = [
        row
        for row in rows
        if row.name != api.name
        and row.provider == api.provider
        and row.mode == api.mode
        and row.currency == api.currency
        and row.input_per_token is not None
        and row.output_per_token is not None
        and row.input_per_token <= api.input_per_token
        and row.output_per_token <= api.output_per_token
        # Cheaper on the whole (an embedding model's output tokens cost 0 on both sides).
        and row.input_per_token + row.output_per_token < api.input_per_token + api.output_per_token
    ]
    if not cheaper:
        return None
    return max(cheaper, key=lambda row: (row.input_per_token + row.output_per_token, row.name))


def _api_model(row: ModelApiPrice | None) -> ApiModel | None:
    if row is None or row.input_per_token is None or row.output_per_token is None:
        return None
    return ApiModel(
        name=row.name,
        input_per_token=row.input_per_token,
        output_per_token=row.output_per_token,
        batch_input_per_token=row.batch_input_per_token,
        batch_output_per_token=row.batch_output_per_token,
    )


def deployment_facts() -> dict[int, tuple[Facts, str, tuple]]:
    """deployment id -> (its facts, the subject key, the owner) for every deployment billed in
    the last 30 days of the bill; a handful of grouped reads in all."""
    window = _lever_window()
    if window is None:
        return {}
    low, high = window
    low = low.replace(minute=0, second=0, microsecond=0)
    hours = []
    moment = low
    while moment < high:
        hours.append(moment)
        moment += HOUR
    spend: dict[int, dict[str, dict[datetime, Decimal]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(Decimal))
    )
    by_resource: dict[int, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    lines = CostLineItem.objects.filter(
        deployment_id__isnull=False, charge_period_end__gt=low, charge_period_start__lt=high
    )
    # One grouped read per deployment, currency and charge period (an hourly bill: per
    # deployment and hour), spread over its UTC hours in Python; the lines of one period are
    # spread as their sum (the last hour takes the rounding, as a line's would).
    for row in (
        lines.values(
            "deployment_id", "billing_currency", "charge_period_start", "charge_period_end"
        )
        .annotate(cost=Sum("effective_cost"))
        .order_by()
        .iterator(chunk_size=20_000)
    ):
        line_hours = _hours_of(row["charge_period_start"], row["charge_period_end"])
        part = (row["cost"] / len(line_hours)).quantize(PLACES, rounding=ROUND_DOWN)
        last = row["cost"] - part * (len(line_hours) - 1)
        per = spend[row["deployment_id"]][row["billing_currency"]]
        for number, hour in enumerate(line_hours, start=1):
            if low <= hour < high:
                per[hour] += last if number == len(line_hours) else part
    for deployment_id, resource_id, cost in (
        lines.exclude(resource_id="")
        .values("deployment_id", "resource_id")
        .annotate(cost=Sum("effective_cost"))
        .values_list("deployment_id", "resource_id", "cost")
        .order_by()
    ):
        by_resource[deployment_id][resource_id] += cost
    if not spend:
        return {}
    deployments = Deployment.objects.filter(pk__in=list(spend)).in_bulk()
    traffic: dict[int, dict[datetime, Traffic]] = defaultdict(dict)
    for row in TrafficHour.objects.filter(
        deployment_id__in=list(spend), hour__gte=low, hour__lt=high
    ).values(
        "deployment_id",
        "hour",
        "requests",
        "duplicate_requests",
        "tokens_in",
        "tokens_out",
        "latency_p95_ms",
    ):
        traffic[row["deployment_id"]][row["hour"]] = Traffic(
            requests=row["requests"],
            duplicates=row["duplicate_requests"],
            tokens_in=row["tokens_in"],
            tokens_out=row["tokens_out"],
            latency_p95_ms=row["latency_p95_ms"],
        )
    # The GPUs behind each deployment's resources (registered and billed).
    resources: dict[int, set[str]] = defaultdict(set)
    for deployment_id, resource_id in DeploymentResource.objects.filter(
        deployment_id__in=list(spend)
    ).values_list("deployment_id", "resource_id"):
        resources[deployment_id].add(resource_id)
    for deployment_id, spent in by_resource.items():
        resources[deployment_id].update(spent)
    gpus_of = gpus_by_resource()
    gpus: dict[int, set[int]] = {
        deployment_id: {gpu for resource in ids for gpu in gpus_named_by(gpus_of, resource)}
        for deployment_id, ids in resources.items()
    }
    deployment_of_gpu = {gpu: pk for pk, ids in gpus.items() for gpu in ids}
    util_sums: dict[int, dict[datetime, list[Decimal]]] = defaultdict(dict)
    peaks: dict[int, list] = {}
    for gpu_id, hour, util, samples, used, used_max in (
        GpuHour.objects.filter(gpu_id__in=list(deployment_of_gpu), hour__gte=low, hour__lt=high)
        .values_list(
            "gpu_id", "hour", "util_mean", "util_samples", "memory_used_mib", "memory_used_max_mib"
        )
        .iterator(chunk_size=20_000)
    ):
        pk = deployment_of_gpu[gpu_id]
        peak = peaks.setdefault(pk, [None, None])
        if util is not None and samples:
            weighted = util_sums[pk].setdefault(hour, [ZERO, ZERO])
            weighted[0] += Decimal(str(util)) * samples
            weighted[1] += samples
            peak[1] = max(peak[1] or ZERO, Decimal(str(round(util, 4))))
        memory = max(used or 0.0, used_max or 0.0)
        if memory:
            peak[0] = max(peak[0] or ZERO, Decimal(str(memory)) * MIB_IN_GB)
    # What each runs on (the spot and region levers' grouped read of on-demand GPU compute).
    instances: dict[int, dict[tuple, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for row in lever_rows(training_only=False):
        if row["deployment_id"] in spend:
            what = (
                provider_key(row["provider_name"]),
                row["instance_type"],
                row["region_id"],
                row["billing_currency"],
            )
            instances[row["deployment_id"]][what] += row["hours"]
    memory = {row.gpu_type: row.memory_gb for row in GpuTypeMemory.objects.all()}
    catalogue: dict[tuple[str, str], list[GpuInstancePrice]] = defaultdict(list)
    for price in GpuInstancePrice.objects.filter(on_demand_per_hour__isnull=False).exclude(
        instance_type=""
    ):
        catalogue[(price.provider, price.region)].append(price)

    def offer(price: GpuInstancePrice) -> Offer:
        per_gpu = memory.get(price.gpu_type) if price.gpu_count else price.memory_gib
        return Offer(
            instance_type=price.instance_type,
            gpu_type=price.gpu_type if price.gpu_count else "",
            gpu_count=price.gpu_count,
            memory_gb=per_gpu,
            on_demand_per_hour=price.on_demand_per_hour,
            spot_per_hour=price.spot_per_hour,
            source=price.source,
        )

    apis = list(ModelApiPrice.objects.all())
    api_by_name = {row.name: row for row in apis}
    chosen = dict(
        BuildOrCallInputs.objects.filter(deployment_id__in=list(spend))
        .exclude(api_model="")
        .values_list("deployment_id", "api_model")
    )
    settings = BuildOrCallSettings.objects.order_by("pk").first() or BuildOrCallSettings()

    out = {}
    for pk, currencies in spend.items():
        deployment = deployments.get(pk)
        if deployment is None:
            continue
        currency = max(currencies, key=lambda c: (sum(currencies[c].values(), ZERO), c))
        facts = Facts(
            deployment_id=pk,
            name=deployment.name,
            currency=currency,
            hours=hours,
            spend_by_hour=dict(currencies[currency]),
            traffic=traffic.get(pk, {}),
            replicas=deployment.replicas,
            realtime=deployment.serving_pattern == Deployment.ServingPattern.REALTIME,
            latency_objective_ms=deployment.latency_objective_ms,
            cold_start_seconds=deployment.cold_start_seconds,
            utilisation_by_hour={
                hour: total / samples for hour, (total, samples) in util_sums[pk].items()
            },
            steady_variation=settings.steady_variation,
            spiky_idle_share=settings.spiky_idle_share,
        )
        peak_memory, peak_util = peaks.get(pk, (None, None))
        facts.peak_memory_gb, facts.peak_utilisation = peak_memory, peak_util
        runs_on = {what: h for what, h in instances.get(pk, {}).items() if what[3] == currency}
        if runs_on:
            provider, itype, region, _currency = max(
                runs_on, key=lambda what: (runs_on[what], what)
            )
            prices = [
                price
                for price in catalogue.get((provider, region), [])
                if price.currency == currency
            ]
            current = next((price for price in prices if price.instance_type == itype), None)
            if current is not None:
                facts.current = offer(current)
                facts.instance_hours = runs_on[(provider, itype, region, currency)]
                facts.offers = [offer(price) for price in prices if price.pk != current.pk]
        api = api_by_name.get(chosen.get(pk, ""))
        if api is not None and api.currency == currency:
            facts.api = _api_model(api)
            facts.smaller_api = _api_model(smaller_comparable(api, apis))
        spent = by_resource.get(pk)
        key = max(spent, key=lambda r: (spent[r], r)) if spent else f"deployment:{pk}"
        out[pk] = (facts, key, (deployment.project_id, None, pk))
    return out


_SHARED: ContextVar[dict | None] = ContextVar("lever_facts_shared", default=None)


@contextmanager
def facts_shared():
    """Within it (one findings recompute), the six lever kinds share one read of the period:
    deployment_facts() is read once per window, not once per kind. Outside, every call reads."""
    token = _SHARED.set({} if _SHARED.get() is None else _SHARED.get())
    try:
        yield
    finally:
        _SHARED.reset(token)


def shared_deployment_facts() -> dict[int, tuple[Facts, str, tuple]]:
    """deployment_facts(), read once per lever window within facts_shared()."""
    shared = _SHARED.get()
    if shared is None:
        return deployment_facts()
    window = _lever_window()
    if window not in shared:
        shared[window] = deployment_facts()
    return shared[window]


def _kind_hours(kind: str):
    def hours(*, start, end) -> dict[str, SubjectHours]:
        """The lever's findings: savings per month, its reason and evidence; no hours."""
        subjects = {}
        for facts, key, owner in shared_deployment_facts().values():
            lever = LEVERS[kind](facts)
            if lever is None or lever.saving <= 0:
                continue
            subjects[key] = SubjectHours(
                line_key=key,
                resource_id="" if key.startswith("deployment:") else key,
                savings_per_month={facts.currency: lever.saving},
                reason=lever.reason[:500],
                evidence={"deployment": facts.name, **lever.evidence},
                owner=owner,
            )
        return subjects

    hours.__name__ = f"{kind}_hours"
    return hours


KIND_HOURS = {kind: _kind_hours(kind) for kind in LEVERS}


def right_sized_elsewhere() -> set[str]:
    """The resources a deployment's lines are on: right_size_serving speaks for them, so part
    2's right_size leaves them out (one finding per subject, not two)."""
    window = _lever_window()
    if window is None:
        return set()
    low, high = window
    return set(
        CostLineItem.objects.filter(
            ~Q(resource_id=""),
            deployment_id__isnull=False,
            charge_period_end__gt=low,
            charge_period_start__lt=high,
        )
        .values_list("resource_id", flat=True)
        .distinct()
    )
