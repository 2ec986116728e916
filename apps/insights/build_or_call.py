"""Build or call: is self-hosting a model cheaper than calling a hosted API at its real volume and
shape? Pure computation on exact Decimals; the reads that gather its inputs are in
selectors_build_or_call.py.

The model (README, "Build or call"):
- Self-hosted cost of a period = the deployment's EffectiveCost + engineering hours a month x the
  hourly rate x (hours in the period / 730). Per request: that / the period's requests.
- Hosted API cost per request = mean input tokens x the input price (the duplicate share at the
  cached-input price where the provider has one) + mean output tokens x the output price; a
  batch deployment pays the batch prices where the catalogue has them.
- At another volume V (mean requests an hour) the self-hosted cost a month is
  max(1, ceil(V x peak-to-mean / capacity)) replicas x the replica's monthly cost + engineering:
  replicas are sized for the peak hour of traffic of the same shape. With the observed capacity
  (the busiest hour within the latency objective / replicas) that is exactly the real cost at
  the real volume.
- Break-even: the lowest volume above which self-hosting is never dearer than the API.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import ROUND_CEILING, Decimal

HOURS_PER_MONTH = Decimal(730)
ZERO = Decimal(0)
ONE = Decimal(1)
MILLION = Decimal(1_000_000)

CALL_API = "call_api"
SELF_HOST = "self_host"
SELF_HOST_REQUIRED = "self_host_required"
VERDICT_LABELS = {
    CALL_API: "Call the API",
    SELF_HOST: "Self-host",
    SELF_HOST_REQUIRED: "Self-hosting required",
}

NO_TRAFFIC = "no traffic"
LOW_OR_SPIKY = "low or spiky"
HIGH_AND_STEADY = "high and steady"
MODERATE = "moderate"


@dataclass(frozen=True)
class ApiPrices:
    """A catalogue row's prices per token (None: the catalogue has none)."""

    name: str
    currency: str
    input_per_token: Decimal | None
    output_per_token: Decimal | None
    cached_input_per_token: Decimal | None = None
    batch_input_per_token: Decimal | None = None
    batch_output_per_token: Decimal | None = None


@dataclass(frozen=True)
class Thresholds:
    low_requests_per_hour: Decimal = Decimal("100")
    high_requests_per_hour: Decimal = Decimal("1000")
    spiky_idle_share: Decimal = Decimal("0.25")
    spiky_variation: Decimal = Decimal("1")
    steady_variation: Decimal = Decimal("0.5")


@dataclass(frozen=True)
class Inputs:
    period_start: date
    period_end: date
    currency: str
    spend: Decimal  # EffectiveCost attributed to the deployment, in `currency`
    hourly_requests: Sequence[int]  # one per UTC hour of the period, hours without traffic 0
    duplicate_requests: int
    tokens_in: int
    tokens_out: int
    replicas: int
    engineering_hours_per_month: Decimal
    hourly_rate: Decimal
    api: ApiPrices | None = None
    batch: bool = False
    data_residency: bool = False
    fine_tuned: bool = False
    api_serves_fine_tuned: bool = False
    # The busiest hour's requests among the hours within the latency objective (all hours
    # without an objective or latency figures); None: no traffic.
    busiest_hour_within_objective: int | None = None
    capacity_per_replica_hour: Decimal | None = None  # entered; None: observed
    expected_requests_per_hour: Decimal | None = None  # None: the real volume
    other_currencies: dict[str, Decimal] = field(default_factory=dict)
    thresholds: Thresholds = field(default_factory=Thresholds)
    # The other way (a deployment served by a hosted API): the API's real cost per request (its
    # bill ÷ its requests) instead of the catalogue's prices; `spend` and `replicas` are then the
    # self-hosted alternative's (the replicas the real volume needs, at the catalogue's price).
    billed_api_per_request: Decimal | None = None
    api_served: bool = False
    self_hosted_missing: str = ""  # why the self-hosted alternative has no price (no verdict)
    extra_notes: Sequence[str] = ()


@dataclass(frozen=True)
class Shape:
    mean: Decimal
    peak: int
    peak_to_mean: Decimal | None
    idle_share: Decimal
    variation: Decimal | None  # coefficient of variation of hourly requests
    label: str
    reason: str


@dataclass(frozen=True)
class Result:
    inputs: Inputs
    hours: int
    requests: int
    engineering_cost: Decimal
    self_hosted_cost: Decimal
    idle_spend: Decimal | None  # the whole self-hosted cost of a period without traffic
    self_hosted_per_request: Decimal | None
    self_hosted_per_thousand: Decimal | None
    self_hosted_per_million_tokens: Decimal | None
    mean_tokens_in: Decimal | None
    mean_tokens_out: Decimal | None
    api_per_request: Decimal | None
    capacity: Decimal | None
    capacity_source: str
    replica_monthly_cost: Decimal
    engineering_monthly_cost: Decimal
    shape: Shape
    requests_per_hour: Decimal  # the real mean volume
    volume: Decimal  # the volume the verdict is at (expected, else real)
    self_hosted_monthly: Decimal
    api_monthly: Decimal | None
    break_even_requests_per_hour: Decimal | None
    verdict: str | None
    monthly_margin: Decimal | None
    reasons: list[str]
    notes: list[str]

    @property
    def verdict_label(self) -> str:
        return VERDICT_LABELS.get(self.verdict, "No verdict")

    @property
    def api_per_thousand(self) -> Decimal | None:
        return None if self.api_per_request is None else self.api_per_request * 1000

    @property
    def monthly_cost(self) -> Decimal:
        """What the deployment costs a month at the verdict's volume, as it is served: self-hosted,
        or for a deployment served by a hosted API (the other way) the API's."""
        if self.inputs.api_served and self.api_monthly is not None:
            return self.api_monthly
        return self.self_hosted_monthly

    def self_hosted_monthly_at(self, volume: Decimal) -> Decimal:
        return self_hosted_monthly_at(
            volume,
            replica_monthly=self.replica_monthly_cost,
            engineering_monthly=self.engineering_monthly_cost,
            capacity=self._effective_capacity,
            replicas=self.inputs.replicas,
        )

    @property
    def _effective_capacity(self) -> Decimal | None:
        return effective_capacity(self.capacity, self.shape.peak_to_mean)


def money(amount: Decimal, currency: str) -> str:
    return f"{currency} {amount.quantize(Decimal('0.01')):,}"


def volume_text(volume: Decimal) -> str:
    rounded = volume.quantize(Decimal("0.01"))
    text = f"{rounded:,}"
    return text[:-3] if text.endswith(".00") else text


def _ceil(value: Decimal) -> Decimal:
    return value.to_integral_value(rounding=ROUND_CEILING)


def shape_of(hourly: Sequence[int], thresholds: Thresholds) -> Shape:
    hours = len(hourly)
    total = sum(hourly)
    idle_share = Decimal(sum(1 for requests in hourly if requests == 0)) / hours if hours else ONE
    if not total:
        return Shape(ZERO, 0, None, idle_share, None, NO_TRAFFIC, "no traffic in the period")
    mean = Decimal(total) / hours
    peak = max(hourly)
    variance = sum((Decimal(requests) - mean) ** 2 for requests in hourly) / hours
    variation = variance.sqrt() / mean
    peak_to_mean = Decimal(peak) / mean
    spiky = idle_share >= thresholds.spiky_idle_share or variation >= thresholds.spiky_variation
    low = mean < thresholds.low_requests_per_hour
    if spiky:
        label = LOW_OR_SPIKY
        reason = (
            f"spiky: {idle_share * 100:.0f}% of hours without traffic and a peak "
            f"{peak_to_mean:.1f}x the mean, so capacity sits idle"
        )
    elif low:
        label = LOW_OR_SPIKY
        reason = f"low: {volume_text(mean)} requests an hour on average, so capacity sits idle"
    elif mean >= thresholds.high_requests_per_hour and variation <= thresholds.steady_variation:
        label = HIGH_AND_STEADY
        reason = (
            f"high and steady: {volume_text(mean)} requests an hour, peak {peak_to_mean:.1f}x "
            "the mean, so replicas stay busy"
        )
    else:
        label = MODERATE
        reason = (
            f"moderate: {volume_text(mean)} requests an hour, peak {peak_to_mean:.1f}x the mean"
        )
    return Shape(mean, peak, peak_to_mean, idle_share, variation, label, reason)


def api_per_request(
    api: ApiPrices, *, batch: bool, mean_in: Decimal, mean_out: Decimal, duplicate_share: Decimal
) -> Decimal | None:
    """None when the catalogue lacks the input or output price."""
    input_price, output_price = api.input_per_token, api.output_per_token
    if batch:
        if api.batch_input_per_token is not None:
            input_price = api.batch_input_per_token
        if api.batch_output_per_token is not None:
            output_price = api.batch_output_per_token
    if input_price is None or output_price is None:
        return None
    cached = api.cached_input_per_token
    # A repeated request's prompt is read from the provider's cache, where it offers one (and
    # where that is cheaper than the price paid otherwise).
    if cached is not None and cached < input_price:
        input_cost = mean_in * ((ONE - duplicate_share) * input_price + duplicate_share * cached)
    else:
        input_cost = mean_in * input_price
    return input_cost + mean_out * output_price


def effective_capacity(capacity: Decimal | None, peak_to_mean: Decimal | None) -> Decimal | None:
    """Mean requests an hour one replica carries when it is sized for the peak hour."""
    if capacity is None:
        return None
    return capacity / (peak_to_mean or ONE)


def self_hosted_monthly_at(
    volume: Decimal,
    *,
    replica_monthly: Decimal,
    engineering_monthly: Decimal,
    capacity: Decimal | None,
    replicas: int,
) -> Decimal:
    """Without a capacity the deployment keeps its replicas whatever the volume."""
    needed = Decimal(replicas) if capacity is None else max(ONE, _ceil(volume / capacity))
    return needed * replica_monthly + engineering_monthly


def break_even(
    *,
    api_per_request: Decimal | None,
    replica_monthly: Decimal,
    engineering_monthly: Decimal,
    capacity: Decimal | None,
    replicas: int,
) -> Decimal | None:
    """The lowest volume V (requests an hour) from which the self-hosted monthly cost is never
    above the API's, None if there is none.

    With n(V) = max(1, ceil(V / C)) replicas of monthly cost K, engineering E and the API's
    monthly cost a x V (a = 730 x its price per request): a step n fails somewhere when
    nK + E > a(n - 1)C, i.e. n(aC - K) < aC + E. If aC <= K every step fails (one more replica
    costs more than the API for the requests it carries): no break-even. Else the last failing
    step is m = ceil((aC + E) / (aC - K)) - 1 and the break-even is (mK + E) / a, inside it.
    """
    if api_per_request is None or api_per_request <= 0:
        return None
    a = HOURS_PER_MONTH * api_per_request
    if capacity is None:
        return (Decimal(replicas) * replica_monthly + engineering_monthly) / a
    slope = a * capacity - replica_monthly
    if slope <= 0:
        return None
    last_failing = max(ONE, _ceil((a * capacity + engineering_monthly) / slope) - 1)
    return (last_failing * replica_monthly + engineering_monthly) / a


def compute(inputs: Inputs) -> Result:
    hours = len(inputs.hourly_requests)
    requests = sum(inputs.hourly_requests)
    months = Decimal(hours) / HOURS_PER_MONTH
    engineering_monthly = inputs.engineering_hours_per_month * inputs.hourly_rate
    engineering_cost = engineering_monthly * months
    self_cost = inputs.spend + engineering_cost
    shape = shape_of(inputs.hourly_requests, inputs.thresholds)
    notes = [
        f"{money(amount, currency)} of lines in {currency} left out (not {inputs.currency})"
        for currency, amount in sorted(inputs.other_currencies.items())
    ]
    notes += inputs.extra_notes
    tokens = inputs.tokens_in + inputs.tokens_out
    mean_in = Decimal(inputs.tokens_in) / requests if requests else None
    mean_out = Decimal(inputs.tokens_out) / requests if requests else None

    price = None
    if inputs.api is None:
        notes.append("No API model picked yet: pick a comparable one to get a verdict.")
    elif inputs.api.currency != inputs.currency:
        notes.append(f"No price in {inputs.currency} for {inputs.api.name}.")
    elif not requests:
        notes.append("No traffic in the period to take the requests' tokens from.")
    elif inputs.billed_api_per_request is not None:
        price = inputs.billed_api_per_request
    elif not tokens:
        notes.append("The traffic reports no tokens: a per-token API cannot be priced.")
    else:
        duplicate_share = Decimal(inputs.duplicate_requests) / requests
        price = api_per_request(
            inputs.api,
            batch=inputs.batch,
            mean_in=mean_in,
            mean_out=mean_out,
            duplicate_share=duplicate_share,
        )
        if price is None:
            notes.append(f"The catalogue has no input and output price for {inputs.api.name}.")

    if inputs.capacity_per_replica_hour is not None:
        capacity, capacity_source = inputs.capacity_per_replica_hour, "entered"
    elif inputs.busiest_hour_within_objective and inputs.replicas:
        capacity = Decimal(inputs.busiest_hour_within_objective) / inputs.replicas
        capacity_source = "observed peak per replica"
    else:
        capacity, capacity_source = None, "unknown"
    replica_monthly = (
        # × 730 before ÷ hours: exact wherever the true figure is (a month of an hourly price).
        inputs.spend * HOURS_PER_MONTH / (hours * inputs.replicas)
        if hours and inputs.replicas
        else ZERO
    )
    step_capacity = effective_capacity(capacity, shape.peak_to_mean)
    even = (
        None
        if inputs.self_hosted_missing
        else break_even(
            api_per_request=price,
            replica_monthly=replica_monthly,
            engineering_monthly=engineering_monthly,
            capacity=step_capacity,
            replicas=inputs.replicas,
        )
    )

    real_volume = Decimal(requests) / hours if hours else ZERO
    expected = inputs.expected_requests_per_hour
    if expected is None:
        volume = real_volume
        # self_cost ÷ months, with the engineering a month as given (no round trip through hours).
        self_monthly = (
            inputs.spend * HOURS_PER_MONTH / hours + engineering_monthly if hours else ZERO
        )
        api_monthly = None if price is None else price * volume * HOURS_PER_MONTH
        if requests == 0 and inputs.api is not None and inputs.api.currency == inputs.currency:
            api_monthly = ZERO  # no requests cost nothing to call
    else:
        volume = expected
        self_monthly = self_hosted_monthly_at(
            volume,
            replica_monthly=replica_monthly,
            engineering_monthly=engineering_monthly,
            capacity=step_capacity,
            replicas=inputs.replicas,
        )
        api_monthly = None if price is None else price * volume * HOURS_PER_MONTH
        if volume == 0 and inputs.api is not None and inputs.api.currency == inputs.currency:
            api_monthly = ZERO

    verdict, margin, reasons = _verdict(
        inputs=inputs,
        self_monthly=self_monthly,
        api_monthly=api_monthly,
        even=even,
        volume=volume,
    )
    if inputs.self_hosted_missing:
        verdict, margin, reasons = None, None, []
        notes.append(inputs.self_hosted_missing)
    if requests == 0:
        reasons.append(
            f"no traffic in the period: {money(self_cost, inputs.currency)} of idle spend"
        )
    if expected is not None:
        reasons.append(f"at an expected {volume_text(expected)} requests an hour")
    if verdict is not None:
        reasons.append(shape.reason)
    return Result(
        inputs=inputs,
        hours=hours,
        requests=requests,
        engineering_cost=engineering_cost,
        self_hosted_cost=self_cost,
        idle_spend=self_cost if requests == 0 else None,
        self_hosted_per_request=self_cost / requests if requests else None,
        self_hosted_per_thousand=self_cost * 1000 / requests if requests else None,
        self_hosted_per_million_tokens=self_cost * MILLION / tokens if tokens else None,
        mean_tokens_in=mean_in,
        mean_tokens_out=mean_out,
        api_per_request=price,
        capacity=capacity,
        capacity_source=capacity_source,
        replica_monthly_cost=replica_monthly,
        engineering_monthly_cost=engineering_monthly,
        shape=shape,
        requests_per_hour=real_volume,
        volume=volume,
        self_hosted_monthly=self_monthly,
        api_monthly=api_monthly,
        break_even_requests_per_hour=even,
        verdict=verdict,
        monthly_margin=margin,
        reasons=reasons,
        notes=notes,
    )


def _verdict(
    *,
    inputs: Inputs,
    self_monthly: Decimal,
    api_monthly: Decimal | None,
    even: Decimal | None,
    volume: Decimal,
) -> tuple[str | None, Decimal | None, list[str]]:
    """The verdict, its margin a month (what the chosen option saves against the other; for a
    required self-hosting, what the API would cost more, negative when it would cost less) and
    its reasons."""
    currency = inputs.currency
    required = []
    if inputs.data_residency:
        required.append("data residency: the data may not leave our own infrastructure")
    if inputs.fine_tuned and not inputs.api_serves_fine_tuned:
        required.append("a fine-tuned model the chosen provider cannot serve")
    if even is not None:
        flip = f"self-hosting is never dearer from {volume_text(even)} requests an hour"
    elif api_monthly is not None and volume > 0:
        flip = "self-hosting is dearer at every volume"
    else:
        flip = ""
    if required:
        margin = None if api_monthly is None else api_monthly - self_monthly
        reasons = [f"required whatever the cost: {'; '.join(required)}"]
        if margin is not None:
            if margin >= 0:
                reasons.append(f"and it costs {money(margin, currency)} a month less than the API")
            else:
                reasons.append(f"it costs {money(-margin, currency)} a month more than the API")
        if flip:
            reasons.append(flip)
        return SELF_HOST_REQUIRED, margin, reasons
    if api_monthly is None:
        return None, None, []
    at = f"at {volume_text(volume)} requests an hour"
    if api_monthly <= self_monthly:
        margin = self_monthly - api_monthly
        lead = (
            f"the API costs the same as self-hosting {at}"
            if margin == 0
            else f"the API costs {money(margin, currency)} a month less {at}"
        )
        return CALL_API, margin, [lead, flip] if flip else [lead]
    margin = api_monthly - self_monthly
    below = (
        f"the API would be cheaper under {volume_text(even)} requests an hour"
        if even is not None
        else "the API is cheaper at other volumes"
    )
    return (
        SELF_HOST,
        margin,
        [f"self-hosting costs {money(margin, currency)} a month less {at}", below],
    )
