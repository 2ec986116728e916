"""What the API accepts and answers, as pydantic schemas (django-ninja builds the OpenAPI schema
from them).

Every input is bounded: lengths, counts and ranges match the database columns, so bad input is a
400 naming the field, never a database error. Fields a call leaves out keep their value (or, on
create, their default): a script reporting progress sends only what changed.
"""

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Annotated, Literal

from ninja import Schema
from pydantic import (
    AfterValidator,
    AwareDatetime,
    ConfigDict,
    Field,
    PlainSerializer,
    StringConstraints,
    model_validator,
)
from pydantic_core import PydanticCustomError

from apps.deployments.models import Deployment
from apps.experiments.models import Experiment
from apps.gpu.models import host_name_problem

# The biggest integer the columns (PostgreSQL bigint) and a JavaScript client both hold exactly.
MAX_COUNT = 2**53 - 1
MAX_INT = 2**31 - 1  # PostgreSQL integer: GPU counts, replicas, latency objectives
MAX_RESOURCES = 500
MAX_TAGS = 50
MAX_POINTS = 5000
MAX_METRICS_PER_POINT = 32
MAX_HOURS = 744  # 31 days


def _no_nul(value: str) -> str:
    # PostgreSQL text cannot hold NUL; say so instead of failing in the database.
    if "\x00" in value:
        raise PydanticCustomError("nul_character", "Must not contain the NUL character.")
    return value


def _plausible_time(value: datetime) -> datetime:
    if not 2000 <= value.year <= 2100:
        raise PydanticCustomError("time_range", "Give a time between the years 2000 and 2100.")
    return value.astimezone(UTC)


def _no_space(value: str) -> str:
    if any(ch.isspace() for ch in value):
        raise PydanticCustomError(
            "resource_id_space", "A resource id has no spaces in it; send one id per entry."
        )
    return value


METRIC_NAME_PATTERN = r"^[A-Za-z0-9_.:/@-]+$"
_METRIC_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:/@-")


def _metric_name(value: str) -> str:
    if not set(value) <= _METRIC_NAME_CHARS:
        raise PydanticCustomError(
            "metric_name",
            "A metric name uses letters, digits and _ . : / @ - only (e.g. train/loss).",
        )
    return value


def _bounded_text(max_length: int, min_length: int = 0):
    return Annotated[
        str,
        StringConstraints(strip_whitespace=True, min_length=min_length, max_length=max_length),
        AfterValidator(_no_nul),
    ]


Moment = Annotated[AwareDatetime, AfterValidator(_plausible_time)]
Name = _bounded_text(200, min_length=1)
ExternalId = Annotated[
    str, StringConstraints(min_length=1, max_length=200), AfterValidator(_no_nul)
]
Slug = Annotated[str, StringConstraints(min_length=1, max_length=100), AfterValidator(_no_nul)]
ShortText = _bounded_text(100)
TagKey = _bounded_text(100, min_length=1)
TagValue = _bounded_text(500)
Tags = Annotated[dict[TagKey, TagValue], Field(max_length=MAX_TAGS)]
ResourceId = Annotated[
    str,
    StringConstraints(min_length=1, max_length=1000),
    AfterValidator(_no_nul),
    AfterValidator(_no_space),
]
MetricName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=100),
    Field(json_schema_extra={"pattern": METRIC_NAME_PATTERN}),
    AfterValidator(_metric_name),
]
MetricValue = Annotated[float, Field(allow_inf_nan=False, ge=-1e300, le=1e300)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Milliseconds = Annotated[float, Field(allow_inf_nan=False, ge=0, le=1e9)]


class Input(Schema):
    # A misspelt field must be an error, not silently ignored.
    model_config = ConfigDict(extra="forbid")


# ---- answers shared by every endpoint ----


class Detail(Schema):
    detail: str


class FieldErrors(Schema):
    detail: str
    errors: dict[str, list[str]] = Field(
        description="Messages by field; nested fields are dotted (resources.0.ended_at)."
    )


class Upserted(Schema):
    created: int
    updated: int


# ---- references and resources ----


class ModelRef(Input):
    external_id: ExternalId
    project: Slug | None = Field(
        default=None, description="The model's project slug; leave out for the same project."
    )


class ModelRefOut(Schema):
    project: str
    external_id: str
    name: str


class ResourceUse(Input):
    resource_id: ResourceId
    started_at: Moment | None = Field(
        default=None, description="When it started to be used; leave out for the owner's start."
    )
    ended_at: Moment | None = Field(
        default=None, description="When it stopped being used; leave out for the owner's end."
    )

    @model_validator(mode="after")
    def _ends_after_start(self) -> "ResourceUse":
        if self.started_at and self.ended_at and self.ended_at < self.started_at:
            raise PydanticCustomError("window", "The end must be after the start.")
        return self


def _distinct_uses(uses: list[ResourceUse] | None) -> list[ResourceUse] | None:
    seen = set()
    for use in uses or ():
        key = (use.resource_id, use.started_at)
        if key in seen:
            raise PydanticCustomError(
                "duplicate_resource",
                "The resource “{resource_id}” is given twice with the same start.",
                {"resource_id": use.resource_id},
            )
        seen.add(key)
    return uses


Resources = Annotated[
    list[ResourceUse], Field(max_length=MAX_RESOURCES), AfterValidator(_distinct_uses)
]


class ResourceUseOut(Schema):
    resource_id: str
    started_at: datetime | None
    ended_at: datetime | None


class Hardware(Input):
    instance_type: ShortText = None
    gpu_type: ShortText = None
    gpu_count: Annotated[int, Field(ge=0, le=MAX_INT)] = None
    is_spot: bool = None
    region: ShortText = None


# ---- projects ----


class ProjectOut(Schema):
    slug: str
    name: str
    team: str


# ---- experiments ----


class ExperimentIn(Hardware):
    name: Name = Field(default=None, description="Defaults to the external id on create.")
    kind: Experiment.Kind = None
    status: Experiment.Status = Field(
        default=None,
        description="planned → running, succeeded, failed or stopped; running → succeeded, "
        "failed or stopped; stopped → running (resume). Succeeded and failed are final. "
        "Becoming running stamps started_at, becoming finished stamps ended_at, unless given.",
    )
    started_at: Moment | None = None
    ended_at: Moment | None = None
    model: ModelRef | None = Field(default=None, description="The model this run produces.")
    tags: Tags = None
    resources: Resources = Field(
        default=None,
        description="Replaces the run's resource ids (with when each was used); leave out to keep "
        "them.",
    )


class ExperimentOut(Schema):
    id: int
    url: str
    project: str
    external_id: str
    name: str
    kind: str
    status: str
    started_at: datetime | None
    ended_at: datetime | None
    model: ModelRefOut | None
    instance_type: str
    gpu_type: str
    gpu_count: int
    is_spot: bool
    region: str
    tags: dict[str, str]
    resources: list[ResourceUseOut]


class MetricPointIn(Input):
    step: Annotated[int, Field(ge=0, le=MAX_COUNT)]
    values: Annotated[
        dict[MetricName, MetricValue], Field(min_length=1, max_length=MAX_METRICS_PER_POINT)
    ]
    time: Moment | None = Field(default=None, description="When the values were measured.")


class MetricsIn(Input):
    points: Annotated[list[MetricPointIn], Field(min_length=1, max_length=MAX_POINTS)]


class MetricSummary(Schema):
    name: str
    points: int
    first_step: int
    last_step: int
    last_value: float
    min_value: float
    max_value: float


class MetricsOut(Schema):
    metrics: list[MetricSummary]


# ---- models ----


class ModelIn(Input):
    name: Name = Field(default=None, description="Defaults to the external id on create.")
    description: _bounded_text(10_000) = None


class ModelOut(Schema):
    id: int
    url: str
    project: str
    external_id: str
    name: str
    description: str


# ---- deployments ----


class DeploymentIn(Hardware):
    name: Name = Field(default=None, description="Defaults to the external id on create.")
    model: ModelRef = Field(default=None, description="The model it serves (needed on create).")
    serving_pattern: Deployment.ServingPattern = None
    replicas: Annotated[int, Field(ge=0, le=MAX_INT)] = None
    latency_objective_ms: Annotated[int, Field(ge=1, le=MAX_INT)] | None = None
    cold_start_seconds: Annotated[int, Field(ge=0, le=MAX_INT)] | None = Field(
        default=None,
        description="Seconds a replica takes from zero to its first answer (null: unknown).",
    )
    data_residency: bool = None
    is_fine_tuned: bool = None
    started_at: Moment | None = None
    ended_at: Moment | None = None
    tags: Tags = None
    resources: Resources = Field(
        default=None,
        description="Replaces the deployment's resource ids (with when each was used); leave out "
        "to keep them.",
    )


class DeploymentOut(Schema):
    id: int
    url: str
    project: str
    external_id: str
    name: str
    model: ModelRefOut | None
    serving_pattern: str
    replicas: int
    latency_objective_ms: int | None
    cold_start_seconds: int | None
    data_residency: bool
    is_fine_tuned: bool
    started_at: datetime | None
    ended_at: datetime | None
    instance_type: str
    gpu_type: str
    gpu_count: int
    is_spot: bool
    region: str
    tags: dict[str, str]
    resources: list[ResourceUseOut]


def _start_of_hour(value: datetime) -> datetime:
    if (value.minute, value.second, value.microsecond) != (0, 0, 0):
        raise PydanticCustomError(
            "hour_start",
            "Give the start of an hour (minutes and seconds zero), e.g. 2025-03-01T10:00:00Z.",
        )
    return value


class TrafficHourIn(Input):
    hour: Annotated[Moment, AfterValidator(_start_of_hour)]
    requests: Count
    duplicate_requests: Count = 0
    tokens_in: Count = 0
    tokens_out: Count = 0
    latency_p50_ms: Milliseconds | None = None
    latency_p95_ms: Milliseconds | None = None
    latency_p99_ms: Milliseconds | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "TrafficHourIn":
        if self.duplicate_requests > self.requests:
            raise PydanticCustomError(
                "duplicates", "duplicate_requests cannot be more than requests."
            )
        given = [
            p
            for p in (self.latency_p50_ms, self.latency_p95_ms, self.latency_p99_ms)
            if p is not None
        ]
        if given != sorted(given):
            raise PydanticCustomError(
                "percentiles", "Latency percentiles cannot decrease: p50 ≤ p95 ≤ p99."
            )
        return self


class TrafficIn(Input):
    hours: Annotated[list[TrafficHourIn], Field(min_length=1, max_length=MAX_HOURS)]


class TrafficHourOut(Schema):
    hour: datetime
    requests: int
    duplicate_requests: int
    tokens_in: int
    tokens_out: int
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    latency_p99_ms: float | None


class TrafficOut(Schema):
    hours: list[TrafficHourOut]


# ---- host-to-resource mappings (GPU metrics) ----


def _hostname(value: str) -> str:
    if problem := host_name_problem(value):
        raise PydanticCustomError("host_name", problem)
    return value


Host = Annotated[
    str,
    StringConstraints(min_length=1, max_length=255),
    AfterValidator(_no_nul),
    AfterValidator(_hostname),
]


class HostMappingIn(Input):
    resource_id: ResourceId = Field(description="The billed resource id the host is.")
    note: _bounded_text(500) = ""


class HostMappingOut(Schema):
    host: str
    resource_id: str
    note: str
    editable: bool = Field(description="Whether your token may change or delete it.")


# ---- model API keys ----

ModelApiKeyKind = Literal[
    "api_key", "openai_project", "anthropic_workspace", "litellm_team", "bedrock_profile"
]


class ModelApiKeyIn(Input):
    project: Slug = Field(description="The project whose spend the key's calls are.")
    deployment: ExternalId | None = Field(
        default=None,
        description="The external id of the project's deployment that makes the calls; none: "
        "the project alone.",
    )
    kind: ModelApiKeyKind = "api_key"
    note: _bounded_text(500) = ""


class ModelApiKeyOut(Schema):
    key: str
    kind: str
    project: str = Field(description="The project's slug.")
    deployment: str | None = Field(description="The deployment's external id (else its name).")
    note: str
    editable: bool = Field(description="Whether your token may change or delete it.")


# ---- spend ----


def _plausible_day(value: date) -> date:
    if not 2000 <= value.year <= 2100:
        raise PydanticCustomError("day_range", "Give a day between the years 2000 and 2100.")
    return value


Day = Annotated[date, AfterValidator(_plausible_day)]


def _money(value: Decimal) -> str:
    # Exact, as stored (FOCUS carries 10 or more decimals), without trailing zeros or exponent.
    return format(value.normalize(), "f") if value else "0"


Money = Annotated[Decimal, PlainSerializer(_money, return_type=str)]


class SpendOut(Schema):
    currency: str
    effective_cost: Money = Field(description="Spend: what the usage cost, amortised.")
    billed_cost: Money = Field(description="What the invoice says.")


class WorkloadSpendOut(SpendOut):
    workload: str


class SpendReportOut(Schema):
    start: date
    end: date = Field(description="The first day after the period.")
    totals: list[SpendOut] = Field(description="One per billing currency, never summed across.")
    by_workload: list[WorkloadSpendOut]
