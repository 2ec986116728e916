"""Build or call, computed by hand (apps/insights/build_or_call.py).

The common fixture: one day (24 hours, 24/730 of a month), one replica billed $2 an hour ($48 in
the day: $1,460 a replica-month), 73 engineering hours a month at $10 ($730 a month, $24 in the
day). A request is 500 input and 100 output tokens; the API charges $10 per million input tokens
and $30 per million output tokens: 500 x 0.00001 + 100 x 0.00003 = $0.008 a request.
"""

from datetime import date
from decimal import Decimal

from apps.insights.build_or_call import (
    CALL_API,
    HIGH_AND_STEADY,
    LOW_OR_SPIKY,
    NO_TRAFFIC,
    SELF_HOST,
    SELF_HOST_REQUIRED,
    ApiPrices,
    Inputs,
    break_even,
    compute,
)

D = Decimal
API = ApiPrices(
    name="hosted-model",
    currency="USD",
    input_per_token=D("0.00001"),
    output_per_token=D("0.00003"),
)


def inputs(hourly, **changes) -> Inputs:
    requests = sum(hourly)
    values = {
        "period_start": date(2026, 3, 1),
        "period_end": date(2026, 3, 2),
        "currency": "USD",
        "spend": D("48"),
        "hourly_requests": hourly,
        "duplicate_requests": 0,
        "tokens_in": 500 * requests,
        "tokens_out": 100 * requests,
        "replicas": 1,
        "engineering_hours_per_month": D("73"),
        "hourly_rate": D("10"),
        "api": API,
        "busiest_hour_within_objective": max(hourly) if requests else None,
    }
    values.update(changes)
    return Inputs(**values)


STEADY = [1000] * 24
SPIKY = [100] * 6 + [0] * 18  # 600 requests, 25 an hour on average, 75% of hours idle


def test_a_steady_high_volume_model_is_cheaper_self_hosted():
    result = compute(inputs(STEADY))
    # $48 + $24 = $72 for 24,000 requests.
    assert result.self_hosted_cost == D("72")
    assert result.engineering_cost == D("24")
    assert result.self_hosted_per_request == D("0.003")
    assert result.self_hosted_per_thousand == D("3")
    assert result.self_hosted_per_million_tokens == D("5")  # 72 / 14.4M tokens
    assert result.api_per_request == D("0.008")
    assert result.requests_per_hour == D("1000")
    assert result.verdict == SELF_HOST
    # A month: self-hosted 72 x 730 / 24 = 2,190; the API 0.008 x 1,000 x 730 = 5,840.
    assert result.self_hosted_monthly == D("2190")
    assert result.api_monthly == D("5840")
    assert result.monthly_margin == D("3650")
    # Capacity 1,000 an hour (the busiest hour, one replica), no peak above the mean:
    # a = 730 x 0.008 = 5.84; aC = 5,840 > K = 1,460; m = ceil(6,570 / 4,380) - 1 = 1;
    # break-even (1,460 + 730) / 5.84 = 375.
    assert result.capacity == D("1000")
    assert result.capacity_source == "observed peak per replica"
    assert result.break_even_requests_per_hour == D("375")
    assert result.shape.label == HIGH_AND_STEADY
    assert result.shape.idle_share == D("0")
    assert result.shape.variation == D("0")
    assert result.reasons == [
        "self-hosting costs USD 3,650.00 a month less at 1,000 requests an hour",
        "the API would be cheaper under 375 requests an hour",
        "high and steady: 1,000 requests an hour, peak 1.0x the mean, so replicas stay busy",
    ]


def test_a_spiky_low_volume_model_is_cheaper_called():
    result = compute(inputs(SPIKY))
    assert result.self_hosted_per_request == D("0.12")  # 72 / 600
    assert result.api_per_request == D("0.008")
    assert result.verdict == CALL_API
    # Self-hosted 2,190 a month; the API 0.008 x 25 x 730 = 146.
    assert result.api_monthly == D("146")
    assert result.monthly_margin == D("2044")
    # Capacity 100 an hour at a peak 4x the mean: a replica carries 25 an hour on average, whose
    # API cost (5.84 x 25 = 146 a month) is under the replica's 1,460: no break-even.
    assert result.shape.peak_to_mean == D("4")
    assert result.break_even_requests_per_hour is None
    assert result.shape.label == LOW_OR_SPIKY
    assert result.shape.idle_share == D("0.75")
    # Variance (6 x 75^2 + 18 x 25^2) / 24 = 1,875; its root / 25 = sqrt(3).
    assert result.shape.variation == D(1875).sqrt() / 25
    assert result.reasons == [
        "the API costs USD 2,044.00 a month less at 25 requests an hour",
        "self-hosting is dearer at every volume",
        "spiky: 75% of hours without traffic and a peak 4.0x the mean, so capacity sits idle",
    ]


def test_a_tie_is_a_call_api_with_no_margin():
    # 400 x 0.000005 + 100 x 0.00001 = 0.003 a request, what self-hosting costs.
    api = ApiPrices("same", "USD", D("0.000005"), D("0.00001"))
    result = compute(inputs(STEADY, api=api, tokens_in=400 * 24000, tokens_out=100 * 24000))
    assert result.api_per_request == result.self_hosted_per_request == D("0.003")
    assert result.verdict == CALL_API
    assert result.monthly_margin == D("0")
    assert result.reasons[0] == "the API costs the same as self-hosting at 1,000 requests an hour"


def test_data_residency_requires_self_hosting_whatever_the_cost():
    result = compute(inputs(SPIKY, data_residency=True))
    assert result.verdict == SELF_HOST_REQUIRED
    # The API would save 2,044 a month: the margin is what the requirement costs.
    assert result.monthly_margin == D("-2044")
    assert result.reasons[:2] == [
        "required whatever the cost: data residency: the data may not leave our own infrastructure",
        "it costs USD 2,044.00 a month more than the API",
    ]


def test_a_fine_tuned_model_the_provider_cannot_serve_requires_self_hosting():
    result = compute(inputs(SPIKY, fine_tuned=True))
    assert result.verdict == SELF_HOST_REQUIRED
    assert result.reasons[0] == (
        "required whatever the cost: a fine-tuned model the chosen provider cannot serve"
    )
    served = compute(inputs(SPIKY, fine_tuned=True, api_serves_fine_tuned=True))
    assert served.verdict == CALL_API
    assert served.monthly_margin == D("2044")


def test_a_volume_between_replica_steps_pays_for_the_next_replica():
    # Capacity 1,000 an hour: 1,000 needs one replica, 1,000.5 and 1,500 need two.
    at_1000 = compute(inputs(STEADY, expected_requests_per_hour=D("1000")))
    assert at_1000.self_hosted_monthly == D("2190")  # 1 x 1,460 + 730
    between = compute(inputs(STEADY, expected_requests_per_hour=D("1500")))
    assert between.self_hosted_monthly == D("3650")  # 2 x 1,460 + 730
    assert between.api_monthly == D("8760")  # 0.008 x 1,500 x 730
    assert between.verdict == SELF_HOST
    assert between.monthly_margin == D("5110")
    assert compute(inputs(STEADY, expected_requests_per_hour=D("1000.5"))).self_hosted_monthly == D(
        "3650"
    )
    # Under the break-even (375) the same model is cheaper called.
    low = compute(inputs(STEADY, expected_requests_per_hour=D("300")))
    assert low.self_hosted_monthly == D("2190")
    assert low.api_monthly == D("1752")
    assert low.verdict == CALL_API
    assert low.monthly_margin == D("438")
    assert low.reasons[-2] == "at an expected 300 requests an hour"


def test_the_break_even_can_fall_in_a_later_replica_step():
    # a = 730 x 0.0025 = 1.825, aC = 1,825, K = 1,460: m = ceil(2,555 / 365) - 1 = 6, and
    # (6 x 1,460 + 730) / 1.825 = 5,200, where the sixth replica's 9,490 a month meets the API.
    even = break_even(
        api_per_request=D("0.0025"),
        replica_monthly=D("1460"),
        engineering_monthly=D("730"),
        capacity=D("1000"),
        replicas=1,
    )
    assert even == D("5200")


def test_an_entered_capacity_replaces_the_observed_one():
    result = compute(inputs(STEADY, capacity_per_replica_hour=D("500")))
    assert result.capacity == D("500")
    assert result.capacity_source == "entered"
    # aC = 2,920, slope 1,460: m = ceil(3,650 / 1,460) - 1 = 2; (2 x 1,460 + 730) / 5.84 = 625.
    assert result.break_even_requests_per_hour == D("625")


def test_a_period_without_traffic_is_idle_spend_not_a_division_by_zero():
    result = compute(inputs([0] * 24))
    assert result.requests == 0
    assert result.self_hosted_per_request is None
    assert result.self_hosted_per_thousand is None
    assert result.idle_spend == D("72")
    assert result.api_per_request is None
    assert result.break_even_requests_per_hour is None
    assert result.shape.label == NO_TRAFFIC
    # Calling an API for no requests costs nothing.
    assert result.verdict == CALL_API
    assert result.monthly_margin == D("2190")
    assert "no traffic in the period: USD 72.00 of idle spend" in result.reasons
    assert "No traffic in the period to take the requests' tokens from." in result.notes


def test_no_verdict_until_an_api_model_is_picked():
    result = compute(inputs(STEADY, api=None))
    assert result.verdict is None
    assert result.monthly_margin is None
    assert result.notes == ["No API model picked yet: pick a comparable one to get a verdict."]


def test_cached_input_prices_apply_to_the_duplicate_share():
    api = ApiPrices("cached", "USD", D("0.00001"), D("0.00003"), cached_input_per_token=D("2.5E-6"))
    result = compute(inputs(STEADY, api=api, duplicate_requests=12000))
    # 500 x (0.5 x 0.00001 + 0.5 x 0.0000025) + 100 x 0.00003 = 0.003125 + 0.003.
    assert result.api_per_request == D("0.006125")


def test_a_batch_deployment_pays_the_batch_prices():
    api = ApiPrices(
        "batched",
        "USD",
        D("0.00001"),
        D("0.00003"),
        batch_input_per_token=D("0.000005"),
        batch_output_per_token=D("0.000015"),
    )
    assert compute(inputs(STEADY, api=api, batch=True)).api_per_request == D("0.004")
    assert compute(inputs(STEADY, api=api)).api_per_request == D("0.008")


def test_an_api_priced_in_another_currency_gives_no_price():
    result = compute(inputs(STEADY, currency="EUR"))
    assert result.api_per_request is None
    assert result.verdict is None
    assert "No price in EUR for hosted-model." in result.notes


def test_lines_in_another_currency_are_left_out_and_said_so():
    result = compute(inputs(STEADY, other_currencies={"EUR": D("12.5")}))
    assert result.self_hosted_cost == D("72")
    assert result.notes[0] == "EUR 12.50 of lines in EUR left out (not USD)"


def test_the_chart_draws_replica_steps_the_api_line_and_the_break_even():
    from apps.insights.charts_build_or_call import build_or_call_chart

    figure = build_or_call_chart(result=compute(inputs(STEADY))).figure
    self_hosted, api, real = figure["data"]
    # Axis to 3,000 (three times the real volume): a step up at each 1,000.
    assert self_hosted["x"] == [0.0, 1000.0, 1000.0, 2000.0, 2000.0, 3000.0]
    assert self_hosted["y"] == [2190.0, 2190.0, 3650.0, 3650.0, 5110.0, 5110.0]
    assert api["y"] == [0.0, 17520.0]  # 0.008 x 3,000 x 730
    assert real["x"] == [1000.0] and real["y"] == [2190.0]
    lines = [shape for shape in figure["layout"]["shapes"] if shape["type"] == "line"]
    assert [line["x0"] for line in lines] == [375.0]
