"""The inference levers on one deployment's facts worked out by hand (no database): ten UTC hours
of 1 March 2025 at 2.00 USD an hour (20.00), 100 requests in each unless a test says otherwise.
Each lever has its hand-computed saving and the case where it must not fire."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from apps.insights import compute_levers
from apps.insights.compute_levers import ApiModel, Facts, Offer, Traffic
from apps.insights.models import Kind, ModelApiPrice

START = datetime(2025, 3, 1, tzinfo=UTC)
HOURS = [START + timedelta(hours=number) for number in range(10)]


def facts(*, per_hour="2.00", requests=(100,) * 10, duplicates=0, **fields) -> Facts:
    """`requests`: one figure per hour (None: the hour was not reported)."""
    traffic = {
        hour: Traffic(
            requests=value,
            duplicates=duplicates if value else 0,
            tokens_in=500 * value,
            tokens_out=100 * value,
        )
        for hour, value in zip(HOURS, requests, strict=True)
        if value is not None
    }
    values = {
        "deployment_id": 1,
        "name": "chat",
        "currency": "USD",
        "hours": HOURS,
        "spend_by_hour": {hour: Decimal(per_hour) for hour in HOURS},
        "traffic": traffic,
    }
    values.update(fields)
    return Facts(**values)


# -- cache_repeats --------------------------------------------------------------------------------


def test_cache_repeats_saves_the_duplicates_at_the_cost_per_request():
    """1,000 requests, 100 of them repeats (10 an hour); 20.00 ÷ 1,000 = 0.02 a request -> 2.00."""
    lever = compute_levers.cache_repeats(facts(duplicates=10))
    assert lever.saving == Decimal("2.00")
    assert lever.evidence["duplicates"] == 100
    assert lever.evidence["cost_per_request"] == "0.02"
    assert lever.evidence["duplicate_percent"] == "10"
    assert lever.reason == (
        "100 of 1,000 requests repeated an earlier one: a cache would save USD 2.00 a month "
        "at USD 20.00 per thousand requests"
    )


def test_cache_repeats_does_not_fire_without_duplicates():
    assert compute_levers.cache_repeats(facts(duplicates=0)) is None


# -- scale_to_zero --------------------------------------------------------------------------------


def test_scale_to_zero_saves_the_billed_hours_without_traffic():
    """Hours 06:00-09:00 served nothing (two reported as 0, two not reported): 4 × 2.00 = 8.00,
    with a 60 s cold start inside the 120,000 ms objective."""
    lever = compute_levers.scale_to_zero(
        facts(
            requests=(100, 100, 100, 100, 100, 100, 0, 0, None, None),
            cold_start_seconds=60,
            latency_objective_ms=120_000,
        )
    )
    assert lever.saving == Decimal("8.00")
    assert lever.evidence["zero_hours"] == 4
    assert lever.evidence["spans"] == [
        {"start": "2025-03-01T06:00:00+00:00", "end": "2025-03-01T10:00:00+00:00", "hours": 4}
    ]
    assert lever.reason == (
        "4 of 10 billed hours served no request: scaling to zero (60 s cold start, within the "
        "120,000 ms objective) would save USD 8.00 a month (that spend is idle GPU waste, "
        "counted there)"
    )


def test_scale_to_zero_does_not_fire_with_traffic_every_hour():
    assert compute_levers.scale_to_zero(facts(cold_start_seconds=60)) is None


def test_scale_to_zero_does_not_fire_when_the_objective_forbids_a_cold_start():
    """A 60 s cold start against a 300 ms objective; and an unknown cold start."""
    quiet = (100, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    forbidden = facts(requests=quiet, cold_start_seconds=60, latency_objective_ms=300)
    assert compute_levers.scale_to_zero(forbidden) is None
    assert compute_levers.scale_to_zero(facts(requests=quiet, cold_start_seconds=None)) is None


def test_scale_to_zero_does_not_fire_without_any_reported_traffic():
    """No traffic reported at all is not ten idle hours: nothing says what it served."""
    silent = facts(requests=(None,) * 10, cold_start_seconds=60)
    assert compute_levers.scale_to_zero(silent) is None


# -- batch_requests -------------------------------------------------------------------------------


def test_batch_requests_frees_the_replicas_a_higher_batch_size_spares():
    """4 replicas 30% busy under steady traffic: ⌈4 × 30 ÷ 80⌉ = 2 replicas; 20.00 × 2 ÷ 4."""
    lever = compute_levers.batch_requests(
        facts(replicas=4, utilisation_by_hour={hour: Decimal(30) for hour in HOURS})
    )
    assert lever.saving == Decimal("10.00")
    assert lever.evidence["replicas_needed"] == 2
    assert lever.evidence["utilisation_percent"] == "30"
    assert lever.reason == (
        "Steady traffic on GPUs 30.0% busy: a higher batch size serves it on 2 of 4 replicas, "
        "USD 10.00 a month less"
    )


def test_batch_requests_does_not_fire_on_busy_gpus_or_spiky_traffic():
    busy = facts(replicas=4, utilisation_by_hour={hour: Decimal(60) for hour in HOURS})
    assert compute_levers.batch_requests(busy) is None
    spiky = facts(
        replicas=4,
        requests=(500, 0, 0, 0, 0, 500, 0, 0, 0, 0),
        utilisation_by_hour={hour: Decimal(30) for hour in HOURS},
    )
    assert compute_levers.batch_requests(spiky) is None
    one = facts(replicas=1, utilisation_by_hour={hour: Decimal(10) for hour in HOURS})
    assert compute_levers.batch_requests(one) is None


# -- batch_not_realtime ---------------------------------------------------------------------------

BIG = Offer("p-big", "A100", Decimal(4), Decimal(80), Decimal("4.00"), Decimal("1.50"))
LARGE_API = ApiModel(
    "hosted/large",
    Decimal("0.00001"),
    Decimal("0.00003"),
    batch_input_per_token=Decimal("0.000005"),
    batch_output_per_token=Decimal("0.000015"),
)


def test_batch_not_realtime_takes_the_larger_of_spot_and_batch_prices():
    """40.00 spent (4.00 an hour). Spot: 10 instance-hours × (4.00 − 1.50) = 25.00. Batch API:
    500,000 tokens in × 0.000005 + 100,000 out × 0.000015 = 4.00 -> 40.00 − 4.00 = 36.00.
    The traffic came only in hours 0–9 of the UTC day: the 8 busiest carry 800 of 1,000."""
    lever = compute_levers.batch_not_realtime(
        facts(
            per_hour="4.00",
            latency_objective_ms=3_600_000,
            current=BIG,
            instance_hours=Decimal(10),
            api=LARGE_API,
        )
    )
    assert lever.saving == Decimal("36.00")
    assert lever.evidence["chosen"] == "api_batch"
    assert [(o["option"], o["saving"]) for o in lever.evidence["options"]] == [
        ("spot", "25"),
        ("api_batch", "36"),
    ]
    assert lever.reason == (
        "Served in real time though its objective allows 1 h and 80% of the requests came in "
        "the 8 busiest hours of the day: hosted/large at its batch prices would save USD 36.00 "
        "a month"
    )
    assert lever.evidence["pattern"]["concentrated"] is True
    assert lever.evidence["pattern"]["bursty"] is False
    assert lever.evidence["pattern"]["busiest_hours"] == [0, 1, 2, 3, 4, 5, 6, 7]


TWO_DAYS = [START + timedelta(hours=number) for number in range(48)]


def two_days(requests: list[int], **fields) -> Facts:
    """48 UTC hours from 1 March 2025 at 4.00 an hour (192.00), on BIG for 48 instance-hours,
    with a one-hour objective: only the traffic pattern decides."""
    values = {
        "deployment_id": 1,
        "name": "embedder",
        "currency": "USD",
        "hours": TWO_DAYS,
        "spend_by_hour": {hour: Decimal("4.00") for hour in TWO_DAYS},
        "traffic": {
            hour: Traffic(requests=value, tokens_in=500 * value, tokens_out=100 * value)
            for hour, value in zip(TWO_DAYS, requests, strict=True)
        },
        "latency_objective_ms": 3_600_000,
        "current": BIG,
        "instance_hours": Decimal(48),
    }
    values.update(fields)
    return Facts(**values)


def test_batch_not_realtime_does_not_fire_on_steady_round_the_clock_traffic():
    """100 requests every hour of two days: the 8 busiest hours of the day carry 1,600 of 4,800
    (33.33%), variation 0, no hour without traffic; its GPUs 60% busy need 24 × 60 ÷ 80 = 18
    hours a day (over the 8-hour window), or their utilisation is unknown: the answers are
    wanted as they come."""
    for utilisation in ({hour: Decimal(60) for hour in TWO_DAYS}, {}):
        steady = two_days([100] * 48, utilisation_by_hour=utilisation)
        assert compute_levers.traffic_pattern(steady) is None
        assert compute_levers.batch_not_realtime(steady) is None


def test_batch_not_realtime_fires_on_steady_traffic_whose_day_fits_a_batch_window():
    """The same steady traffic on GPUs 20% busy (25% the first day, 15% the second): a day's
    requests take 24 × 20 ÷ 80 = 6 hours on them kept 80% busy, within the 8-hour window.
    Spot: 48 instance-hours × (4.00 − 1.50) = 120.00."""
    utilisation = {hour: Decimal(25 if hour.day == 1 else 15) for hour in TWO_DAYS}
    lever = compute_levers.batch_not_realtime(two_days([100] * 48, utilisation_by_hour=utilisation))
    assert lever.saving == Decimal("120.00")
    pattern = lever.evidence["pattern"]
    assert (pattern["concentrated"], pattern["bursty"], pattern["fits_window"]) == (
        False,
        False,
        True,
    )
    assert (pattern["utilisation_percent"], pattern["batch_window_hours"]) == ("20", "6")
    assert lever.reason == (
        "Served in real time though its objective allows 1 h and a day's requests fit a 6-hour "
        "batch window (its GPUs 20% busy, kept 80% busy): p-big on spot capacity would save "
        "USD 120.00 a month"
    )


def test_batch_not_realtime_fires_on_bursty_traffic_spread_over_the_day():
    """200 requests every hour of the first day, none the second: every hour of the day carries
    400 (the busiest 8: 3,200 of 9,600 = 33.33%, not concentrated), but half the billed hours
    served nothing (≥ the 0.25 spiky share) and the variation is 100 ÷ 100 = 1 (> 0.5): bursty.
    Spot: 48 instance-hours × (4.00 − 1.50) = 120.00."""
    lever = compute_levers.batch_not_realtime(two_days([200] * 24 + [0] * 24))
    assert lever.saving == Decimal("120.00")
    pattern = lever.evidence["pattern"]
    assert (pattern["concentrated"], pattern["bursty"]) == (False, True)
    assert pattern["window_share_percent"] == "33.33"
    assert (pattern["variation"], pattern["idle_share"]) == ("1", "0.5")
    assert lever.reason == (
        "Served in real time though its objective allows 1 h and bursty traffic (variation 1, "
        "50% of billed hours without any): p-big on spot capacity would save USD 120.00 a month"
    )


def test_batch_not_realtime_fires_on_traffic_concentrated_in_a_few_hours():
    """500 requests in 09:00–12:59 and 10 in each other hour, two days: a day is 2,000 + 200 =
    2,200; the busiest 8 hours carry 4 × 500 + 4 × 10 = 2,040 a day, 4,080 of 4,400 = 92.73%
    (≥ 80%). Batch API: 2,200,000 tokens in × 0.000005 + 440,000 out × 0.000015 = 17.60;
    192.00 − 17.60 = 174.40 beats spot's 120.00."""
    day = [10] * 9 + [500] * 4 + [10] * 11
    lever = compute_levers.batch_not_realtime(two_days(day * 2, api=LARGE_API))
    assert lever.saving == Decimal("174.40")
    assert lever.evidence["chosen"] == "api_batch"
    pattern = lever.evidence["pattern"]
    assert pattern["concentrated"] is True
    assert pattern["window_share_percent"] == "92.73"
    assert pattern["busiest_hours"] == [0, 1, 2, 3, 9, 10, 11, 12]
    assert pattern["requests_by_hour_of_day"][9:13] == [1000, 1000, 1000, 1000]


def test_batch_not_realtime_does_not_fire_when_the_objective_needs_real_time():
    tight = facts(latency_objective_ms=300, current=BIG, instance_hours=Decimal(10))
    assert compute_levers.batch_not_realtime(tight) is None
    unstated = facts(latency_objective_ms=None, current=BIG, instance_hours=Decimal(10))
    assert compute_levers.batch_not_realtime(unstated) is None
    batch_already = facts(
        latency_objective_ms=3_600_000, realtime=False, current=BIG, instance_hours=Decimal(10)
    )
    assert compute_levers.batch_not_realtime(batch_already) is None


# -- right_size_serving ---------------------------------------------------------------------------

CURRENT = Offer("big", "A100", Decimal(4), Decimal(80), Decimal("20.00"))
MID = Offer("mid", "A10G", Decimal(1), Decimal(24), Decimal("5.00"))
TINY = Offer("tiny", "T4", Decimal(1), Decimal(16), Decimal("2.00"))
CPU = Offer("cpu", "", Decimal(0), Decimal(256), Decimal("1.00"))


def test_right_size_serving_picks_the_cheapest_instance_holding_the_model():
    """Peak 12 GB (× 1.2 = 14.4 ≤ 16) and 20% busy on 4 GPUs (⌈0.8⌉ = 1 GPU): the T4 at 2.00
    instead of 20.00, over 10 instance-hours = 180.00. The CPU instance is for GPUs under 10%."""
    lever = compute_levers.right_size_serving(
        facts(
            current=CURRENT,
            offers=[MID, TINY, CPU],
            instance_hours=Decimal(10),
            peak_memory_gb=Decimal(12),
            peak_utilisation=Decimal(20),
        )
    )
    assert lever.saving == Decimal("180.00")
    assert [row["instance_type"] for row in lever.evidence["candidates"]] == ["tiny", "mid"]
    assert lever.evidence["candidates"][0]["saving_per_month"] == "180"
    assert lever.reason == (
        "Peak 12 GB and 20% busy fit tiny (1 × T4) instead of big (4 × A100): USD 180.00 a "
        "month less"
    )


def test_right_size_serving_offers_a_cpu_instance_to_a_barely_used_gpu():
    """Peak 12 GB × 1.2 × 4 GPUs = 57.6 GB ≤ 256 GB of host memory, 5% busy: (20 − 1) × 10."""
    lever = compute_levers.right_size_serving(
        facts(
            current=CURRENT,
            offers=[MID, TINY, CPU],
            instance_hours=Decimal(10),
            peak_memory_gb=Decimal(12),
            peak_utilisation=Decimal(5),
        )
    )
    assert lever.saving == Decimal("190.00")
    assert lever.evidence["candidates"][0]["gpu_type"] == "CPU"


def test_right_size_serving_does_not_fire_on_hardware_already_right_sized():
    """On the T4 already, the dearer instances are no candidates; a 20 GB model fits no T4."""
    sized = facts(
        current=TINY,
        offers=[CURRENT, MID],
        instance_hours=Decimal(10),
        peak_memory_gb=Decimal(12),
        peak_utilisation=Decimal(90),
    )
    assert compute_levers.right_size_serving(sized) is None
    fits_mid_only = compute_levers.right_size_serving(
        facts(
            current=CURRENT,
            offers=[TINY, MID],
            instance_hours=Decimal(10),
            peak_memory_gb=Decimal(20),
            peak_utilisation=Decimal(20),
        )
    )
    assert fits_mid_only.saving == Decimal("150.00")  # (20 − 5) × 10


# -- smaller_model --------------------------------------------------------------------------------

SMALL_API = ApiModel("hosted/small", Decimal("0.000002"), Decimal("0.000006"))


def test_smaller_model_is_an_option_at_the_smaller_models_prices():
    """500,000 tokens in and 100,000 out: 5.00 + 3.00 = 8.00 against 1.00 + 0.60 = 1.60."""
    lever = compute_levers.smaller_model(facts(api=LARGE_API, smaller_api=SMALL_API))
    assert lever.saving == Decimal("6.40")
    assert lever.evidence["option"] is True
    assert lever.reason == (
        "An option, not a verdict: hosted/small would cost USD 6.40 a month less than "
        "hosted/large for the same tokens; whether its answers are good enough is the team's call"
    )


def test_smaller_model_does_not_fire_without_a_smaller_comparable_model():
    assert compute_levers.smaller_model(facts(api=LARGE_API, smaller_api=None)) is None
    assert compute_levers.smaller_model(facts(api=None, smaller_api=SMALL_API)) is None


L40S = Offer("l40s", "L40S", Decimal(1), Decimal(48), Decimal("8.00"))
L4 = Offer("l4", "L4", Decimal(1), Decimal(24), Decimal("3.00"))
A2 = Offer("a2", "A2", Decimal(1), Decimal(20), Decimal("1.50"))


def test_smaller_model_offers_the_next_smaller_gpu_of_a_self_hosted_deployment():
    """Peak 30 GB on 4 × A100 (20.00 an hour), 20% busy (⌈0.8⌉ = 1 GPU): the model needs
    30 × 1.2 = 36 GB, a comparable one half its size 18 GB. In [18, 36): mid and l4 (24 GB) and
    a2 (20 GB); l40s (48 GB) holds the model itself (right_size_serving's), tiny (16 GB) holds
    neither. The next step down is the most memory, the cheaper on a tie: l4 at 3.00,
    (20.00 − 3.00) × 10 instance-hours = 170.00, against the smaller API model's 6.40."""
    lever = compute_levers.smaller_model(
        facts(
            current=CURRENT,
            offers=[MID, TINY, L40S, L4, A2],
            instance_hours=Decimal(10),
            peak_memory_gb=Decimal(30),
            peak_utilisation=Decimal(20),
            api=LARGE_API,
            smaller_api=SMALL_API,
        )
    )
    assert lever.saving == Decimal("170.00")
    assert lever.evidence["chosen"] == "gpu"
    assert lever.evidence["options"] == [
        {"option": "api", "what": "hosted/small", "saving": "6.4"},
        {"option": "gpu", "what": "l4", "saving": "170"},
    ]
    gpu = lever.evidence["gpu"]
    assert [row["instance_type"] for row in gpu["candidates"]] == ["l4", "mid", "a2"]
    assert (gpu["peak_memory_gb"], gpu["smaller_memory_gb"]) == ("30", "15")
    assert lever.evidence["smaller_cost"] == "1.6"  # the API option's figures stay shown
    assert lever.reason == (
        "An option, not a verdict: a comparable model half the size (15 GB of 30 GB) fits l4 "
        "(1 × L4, 24 GB) instead of big (4 × A100): USD 170.00 a month less; whether a smaller "
        "model answers well enough is the team's call"
    )


def test_smaller_model_offers_no_gpu_where_none_is_a_step_down():
    """Peak 12 GB (14.4 GB needed, 7.2 GB for a model half the size): the T4's 16 GB holds the
    model itself (right_size_serving's), the dearer ones are no saving; not self-hosted (no
    catalogue instance): no GPU option either."""
    sized = facts(
        current=CURRENT,
        offers=[MID, TINY],
        instance_hours=Decimal(10),
        peak_memory_gb=Decimal(12),
        peak_utilisation=Decimal(20),
    )
    assert compute_levers.smaller_model(sized) is None
    assert compute_levers.smaller_model(facts(peak_memory_gb=Decimal(30))) is None
    busy = facts(
        current=CURRENT,
        offers=[L4],
        instance_hours=Decimal(10),
        peak_memory_gb=Decimal(30),
        peak_utilisation=Decimal(90),  # ⌈3.6⌉ = 4 GPUs needed: one L4 is too few
    )
    assert compute_levers.smaller_model(busy) is None


def test_the_next_smaller_model_is_the_dearest_cheaper_one_of_the_same_provider_and_mode():
    def price(name, provider, mode, inp, out):
        return ModelApiPrice(
            name=name,
            provider=provider,
            mode=mode,
            currency="USD",
            input_per_token=Decimal(inp),
            output_per_token=Decimal(out),
        )

    large = price("hosted/large", "hosted", "chat", "0.00001", "0.00003")
    rows = [
        large,
        price("hosted/medium", "hosted", "chat", "0.000003", "0.000009"),
        price("hosted/small", "hosted", "chat", "0.000002", "0.000006"),
        price("hosted/embed", "hosted", "embedding", "0.000008", "0.00001"),
        price("other/cheap", "other", "chat", "0.000009", "0.00002"),
        price("hosted/odd", "hosted", "chat", "0.000009", "0.00004"),  # dearer output
    ]
    assert compute_levers.smaller_comparable(large, rows).name == "hosted/medium"
    assert compute_levers.smaller_comparable(rows[2], rows) is None


def test_levers_lists_only_those_that_fire():
    found = compute_levers.levers(facts(duplicates=10, api=LARGE_API, smaller_api=SMALL_API))
    assert sorted(found) == sorted([Kind.CACHE_REPEATS, Kind.SMALLER_MODEL])


def test_the_smaller_gpu_option_is_drawn_beside_the_api_one():
    from types import SimpleNamespace

    from django.template.loader import render_to_string

    lever = compute_levers.smaller_model(
        facts(
            current=CURRENT,
            offers=[MID, L4],
            instance_hours=Decimal(10),
            peak_memory_gb=Decimal(30),
            peak_utilisation=Decimal(20),
            api=LARGE_API,
            smaller_api=SMALL_API,
        )
    )
    finding = SimpleNamespace(
        kind=Kind.SMALLER_MODEL, evidence={**lever.evidence, "currency": "USD"}
    )
    html = render_to_string("insights/_evidence_levers.html", {"finding": finding})
    assert 'id="model-comparison"' in html and 'id="gpu-comparison"' in html
    assert "a comparable model half the size (15 GB of its 30 GB peak)" in html
    assert '<tr class="chosen"><td>l4</td>' in html
