"""The demo's hosted model API spend (issue 26): two teams that call a hosted model rather than
serve one, each key mapped to a deployment, their files through the real importers.

- Document search (language team) answers wiki questions with gpt-4o-mini through the company's
  LiteLLM gateway: the gateway's spend log (one row a request, the CSV of `LiteLLM_SpendLogs`)
  is imported as `litellm_spend_logs`; its LiteLLM team `team-doc-search` maps to the deployment
  `wiki-answers`. gpt-4o-mini is not an open model, so build or call the other way finds no
  self-hosted alternative to it.
- Shelf monitoring (vision team) captions product photos with Llama 3.3 70B on Amazon Bedrock,
  around the clock: the spend is in a CUR (an hourly input and an hourly output token line of its
  application inference profile), imported by the CUR importer; the profile's ARN maps to the
  deployment `shelf-captions`, whose serving stack reports its hourly requests. The model is
  open (4-bit, 40 GB a replica) and busy enough that self-hosting it would pay (`self_host`).

Volumes are kept small for the seed's time: the gateway has a few requests an hour in office
hours (about 6,000 rows over 35 days); Bedrock is two lines an hour.
"""

import csv
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from django.utils import timezone

from apps.billing import services as billing_services
from apps.billing.models import ImportRun, ModelApiKey
from apps.billing.services_model_api_keys import key_mapping_create
from apps.deployments.services import (
    TrafficFigures,
    deployment_create,
    deployment_traffic_record,
    model_create,
)
from apps.insights.selectors_build_or_call import build_or_call_result, default_period
from apps.insights.services_build_or_call import build_or_call_inputs_save
from apps.projects.models import Project

DAYS = 35
SEED = 26
GATEWAY_TEAM = "team-doc-search"
GATEWAY_KEY = "9f3c1e7a5b2d4c6e8f0a1b3c5d7e9f2a4b6c8d0e1f3a5b7c9d1e3f5a7b9c1d3e"
PAYER = "555555555555"  # the Bedrock account's payer: a CUR of its own, beside the FOCUS bill
PROFILE = "arn:aws:bedrock:us-east-1:555555555555:application-inference-profile/shelf-captions"
# Amazon Bedrock's on-demand price of Llama 3.3 70B Instruct in us-east-1, per 1,000 tokens.
LLAMA_70B_PER_1K = Decimal("0.00072")
# gpt-4o-mini's list prices per token (LiteLLM's price map): $0.15 and $0.60 a million.
MINI_IN, MINI_OUT = Decimal("0.00000015"), Decimal("0.0000006")

LITELLM_COLUMNS = [
    "request_id",
    "call_type",
    "api_key",
    "spend",
    "total_tokens",
    "prompt_tokens",
    "completion_tokens",
    "startTime",
    "endTime",
    "model",
    "model_group",
    "custom_llm_provider",
    "user",
    "team_id",
    "request_tags",
    "status",
]
CUR_COLUMNS = [
    "identity/LineItemId",
    "bill/PayerAccountId",
    "bill/BillingPeriodStartDate",
    "bill/BillingPeriodEndDate",
    "lineItem/UsageAccountId",
    "lineItem/LineItemType",
    "lineItem/UsageStartDate",
    "lineItem/UsageEndDate",
    "lineItem/ProductCode",
    "lineItem/UsageType",
    "lineItem/Operation",
    "lineItem/ResourceId",
    "lineItem/UsageAmount",
    "lineItem/CurrencyCode",
    "lineItem/UnblendedRate",
    "lineItem/UnblendedCost",
    "lineItem/LineItemDescription",
    "product/ProductName",
    "product/region",
    "pricing/term",
    "pricing/unit",
    "pricing/publicOnDemandCost",
]


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _month_start(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def _next_month(moment: datetime) -> datetime:
    return (moment + timedelta(days=32)).replace(day=1)


def _hours(now: datetime) -> list[datetime]:
    last = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    first = last - timedelta(days=DAYS)
    return [first + timedelta(hours=index) for index in range(DAYS * 24)]


def _by_month(hours: list[datetime]) -> dict[datetime, list[datetime]]:
    months: dict[datetime, list[datetime]] = {}
    for hour in hours:
        months.setdefault(_month_start(hour), []).append(hour)
    return months


def gateway_log_write(directory: Path, hours: list[datetime]) -> tuple[list[Path], list]:
    """The gateway's spend log, one file a month: wiki questions in New York's office hours on
    weekdays, a few a minute at most, about 1,500 tokens in and 250 out each; and the hours'
    requests as the gateway's metrics count them (every hour, none outside office hours).

    A month with no office hour in the window (its last evening and a weekend) writes no file:
    the gateway would have logged nothing, and a log with a header and no rows is refused."""
    rng = random.Random(f"{SEED}-gateway")
    paths, traffic = [], []
    number = 0
    for month, month_hours in _by_month(hours).items():
        rows = []
        for hour in month_hours:
            if hour.weekday() >= 5 or not 13 <= hour.hour < 22:
                traffic.append(TrafficFigures(hour=hour, requests=0))
                continue
            requests, tokens_in, tokens_out = rng.randint(8, 30), 0, 0
            for _ in range(requests):
                number += 1
                start = hour + timedelta(seconds=rng.randrange(3600))
                prompt, completion = rng.randint(900, 2100), rng.randint(120, 380)
                tokens_in, tokens_out = tokens_in + prompt, tokens_out + completion
                spend = prompt * MINI_IN + completion * MINI_OUT
                rows.append(
                    [
                        f"chatcmpl-demo-{number:06d}",
                        "acompletion",
                        GATEWAY_KEY,
                        f"{spend:.10f}",
                        prompt + completion,
                        prompt,
                        completion,
                        _stamp(start),
                        _stamp(start + timedelta(seconds=rng.uniform(0.8, 4.0))),
                        "gpt-4o-mini-2024-07-18",
                        "gpt-4o-mini",
                        "openai",
                        "wiki-bot",
                        GATEWAY_TEAM,
                        '["app:wiki-answers"]',
                        "success",
                    ]
                )
            traffic.append(
                TrafficFigures(
                    hour=hour, requests=requests, tokens_in=tokens_in, tokens_out=tokens_out
                )
            )
        if not rows:
            continue
        path = directory / f"litellm-spend-logs-{month:%Y-%m}.csv"
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(LITELLM_COLUMNS)
            writer.writerows(rows)
        paths.append(path)
    return paths, traffic


def captions_requests(hour: datetime, rng: random.Random) -> int:
    """Photos captioned as the stores upload them: a little busier in the US day."""
    return int(2400 * (1.1 if 13 <= hour.hour < 23 else 0.9) * rng.uniform(0.95, 1.05))


CAPTION_TOKENS_IN, CAPTION_TOKENS_OUT = 6000, 600


def bedrock_cur_write(directory: Path, hours: list[datetime]) -> tuple[list[Path], list]:
    """The Bedrock account's CUR, one file a month (legacy CSV): an input and an output token
    line an hour of the application inference profile; and the hours' requests."""
    rng = random.Random(f"{SEED}-bedrock")
    paths, traffic = [], []
    number = 0
    for month, month_hours in _by_month(hours).items():
        path = directory / f"bedrock-cur-{month:%Y-%m}.csv"
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(CUR_COLUMNS)
            for hour in month_hours:
                requests = captions_requests(hour, rng)
                traffic.append(
                    TrafficFigures(
                        hour=hour,
                        requests=requests,
                        tokens_in=requests * CAPTION_TOKENS_IN,
                        tokens_out=requests * CAPTION_TOKENS_OUT,
                        latency_p50_ms=rng.uniform(900, 1200),
                        latency_p95_ms=rng.uniform(1800, 2600),
                    )
                )
                for direction, tokens in (
                    ("input", requests * CAPTION_TOKENS_IN),
                    ("output", requests * CAPTION_TOKENS_OUT),
                ):
                    number += 1
                    thousands = Decimal(tokens) / 1000
                    cost = thousands * LLAMA_70B_PER_1K
                    writer.writerow(
                        [
                            f"bedrock-demo-{number:06d}",
                            PAYER,
                            _stamp(month),
                            _stamp(_next_month(month)),
                            PAYER,
                            "Usage",
                            _stamp(hour),
                            _stamp(hour + timedelta(hours=1)),
                            "AmazonBedrock",
                            f"USE1-Llama3-3-70B-{direction}-tokens",
                            "InvokeModelInference",
                            PROFILE,
                            f"{thousands}",
                            "USD",
                            f"{LLAMA_70B_PER_1K}",
                            f"{cost}",
                            f"Llama 3.3 70B Instruct {direction} tokens",
                            "Amazon Bedrock",
                            "us-east-1",
                            "OnDemand",
                            "1K tokens",
                            f"{cost}",
                        ]
                    )
        paths.append(path)
    return paths, traffic


def _deployment(project: Project, *, model: str, name: str, started_at: datetime):
    return deployment_create(
        project=project,
        model=model_create(
            project=project,
            name=model,
            external_id=name + "-model",
            description="Called from a hosted API.",
        ),
        name=name,
        external_id=name,
        replicas=1,
        latency_objective_ms=3000,
        started_at=started_at,
        tags={"project": project.slug, "env": "prod"},
    )


def demo_model_api_load(*, directory: Path, small: bool, log: Callable[[str], None]) -> None:
    """The seed_demo step: the two teams' deployments, their keys mapped, their files imported."""
    docs = Project.objects.filter(slug="doc-search").first()
    shelves = Project.objects.filter(slug="retail-shelf-vision").first()
    if docs is None or shelves is None:
        return
    # Both started when their traffic and bills begin: every hour of their lives is reported.
    hours = _hours(timezone.now())
    wiki = _deployment(docs, model="gpt-4o-mini", name="wiki-answers", started_at=hours[0])
    captions = _deployment(
        shelves, model="llama-3.3-70b-instruct", name="shelf-captions", started_at=hours[0]
    )
    # Mapped before the files arrive: the import attributes them at once.
    key_mapping_create(
        key=GATEWAY_TEAM,
        kind=ModelApiKey.Kind.LITELLM_TEAM,
        project=docs,
        deployment=wiki,
        note="The wiki bot's team on the LiteLLM gateway",
    )
    key_mapping_create(
        key=PROFILE,
        kind=ModelApiKey.Kind.BEDROCK_PROFILE,
        project=shelves,
        deployment=captions,
        note="Application inference profile of the captioning service",
    )
    directory.mkdir(parents=True, exist_ok=True)
    gateway, questions = gateway_log_write(directory, hours)
    deployment_traffic_record(deployment=wiki, hours=questions)
    bedrock, traffic = bedrock_cur_write(directory, hours)
    deployment_traffic_record(deployment=captions, hours=traffic)
    for path in [*gateway, *bedrock]:
        run = billing_services.import_run_execute(
            import_run=billing_services.import_run_create(paths=[str(path)])
        )
        if run.status != ImportRun.Status.SUCCEEDED:
            raise RuntimeError(f"{path.name}: {run.error}")
    build_or_call_inputs_save(deployment=wiki, by=None, open_weights=False)
    build_or_call_inputs_save(
        deployment=captions,
        by=None,
        open_weights=True,
        model_memory_gb=Decimal("40"),
        capacity_per_replica_hour=Decimal("1500"),
    )
    start, end = default_period()
    for deployment in (wiki, captions):
        result = build_or_call_result(deployment=deployment, start=start, end=end)
        log(
            f"  {deployment.name}: API {result.api_monthly or Decimal(0):.2f} a month, "
            f"verdict {result.verdict} (margin {result.monthly_margin or Decimal(0):.2f})"
        )
