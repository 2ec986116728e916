"""What each finding kind counts, hour by hour, read in bulk from the line items and the hourly
GPU rollup. Each `*_hours` function returns the hours of every subject it finds:
`{subject: SubjectHours}`, spread over hours in Python (SQLite, and the reference); each `*_sql`
function computes the same into a temporary table in SQL (PostgreSQL). services.py turns either
into findings.

A line is spread evenly over the UTC hours its charge period touches (a daily line over 24,
an hourly line over its one hour), so every kind and every counted-once total speaks of the
same line-hours.
"""

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import ROUND_DOWN, Decimal
from typing import NamedTuple

from django.db import connection
from django.db.models import F, Q, QuerySet

# Spend reads: the one place this app reads the bill and the GPU rollup's resolution (the
# integrator points these at apps.spend when it exists).
from apps.billing.models import CostKind, CostLineItem
from apps.experiments.models import Experiment
from apps.gpu.models import GpuHour
from apps.gpu.selectors import gpus_by_resource, gpus_named_by

from .models import Finding, Kind, RecomputeLine

HOUR = timedelta(hours=1)
PLACES = Decimal("1e-15")  # the scale money is stored with


def day_start(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def _window(start: date | None, end: date | None) -> tuple[datetime | None, datetime | None]:
    return (
        day_start(start) if start is not None else None,
        day_start(end) if end is not None else None,
    )


# -- A recompute narrowed to its period (services._recompute) -------------------------------------

# Within it, a kind that reads whole histories whatever the period may read only the subjects
# the period's data reaches: the others' findings are not refreshed (services._narrowed).
_NARROWED: ContextVar[bool] = ContextVar("insights_narrowed", default=False)


@contextmanager
def narrowed(flag: bool) -> Iterator[None]:
    token = _NARROWED.set(flag)
    try:
        yield
    finally:
        _NARROWED.reset(token)


def is_narrowed() -> bool:
    return _NARROWED.get()


# -- One read of the lines for a recompute --------------------------------------------------------


class SharedCopy(NamedTuple):
    """What the shared copy of the lines holds within lines_shared()."""

    low: datetime | None  # its window (None: unbounded)
    high: datetime | None
    runs: frozenset  # the failed runs whose every line it holds
    # The failed runs when it was made, whose every line in its bounded window it holds (empty
    # when the window is unbounded: `runs` are then all of them).
    failed_then: frozenset


_SHARED: ContextVar[SharedCopy | None] = ContextVar("insights_lines_shared", default=None)
SHARED_COLUMNS = tuple(column.column for column in RecomputeLine._meta.concrete_fields)
RUN_KEY_PREFIX = "run:"


def run_key(experiment_id: int) -> str:
    """A run's subject key (failed_run, storage_of_finished_runs)."""
    return f"{RUN_KEY_PREFIX}{experiment_id}"


def failed_runs_without_finding(runs: list[int]) -> list[int]:
    """Of these failed runs, those with no failed_run finding yet: a new finding's resource is
    read from its run's whole life, which lines_shared copies for these only."""
    found = set(
        Finding.objects.filter(
            kind=Kind.FAILED_RUN, subject_key__in=[run_key(pk) for pk in runs]
        ).values_list("subject_key", flat=True)
    )
    return [pk for pk in runs if run_key(pk) not in found]


@contextmanager
def lines_shared(
    *, start: date | None, end: date | None, reach: timedelta = timedelta(0)
) -> Iterator[None]:
    """Within it (one findings recompute, inside its transaction, on PostgreSQL), the kinds that
    read GPU-compute lines or lines with no project read them from one copy: the period's
    (widened by `reach` either side) copied into a temporary table (RecomputeLine) at the start,
    with the failed runs' lines (whose finding is their whole life). Each of those kinds
    scanned the whole line table for its few lines, and the table is wide (about 700 bytes a
    line): five scans of 7 GB at 10M lines. The copy goes when the transaction ends. Elsewhere
    (SQLite) nothing changes: the kinds read the line table.

    A period's copy holds every line of the failed runs in the period, and the whole lives only
    of those with no finding yet (a new finding's resource is read from its run's whole life).
    Copying every failed run's whole life made a month's copy read the history: a run's storage
    is billed every day after it fails, so every failed run has a line in every month, and at
    three years of bills its lives were 1.2M lines over 8 GB of the table (11.7 s, against 0.9
    at one year)."""
    if connection.vendor != "postgresql" or not connection.in_atomic_block:
        yield
        return
    low, high = _window(start, end)
    low = low - reach if low is not None else None
    high = high + reach if high is not None else None
    failed = sorted(
        Experiment.objects.filter(status=Experiment.Status.FAILED).values_list("pk", flat=True)
    )
    table, columns = RecomputeLine._meta.db_table, ", ".join(SHARED_COLUMNS)
    lines = CostLineItem._meta.db_table
    bounded = low is not None and high is not None
    bounds, period_params = ["TRUE"], []
    if low is not None:
        bounds.append("charge_period_end > %s")
        period_params.append(low)
    if high is not None:
        bounds.append("charge_period_start < %s")
        period_params.append(high)
    period = " AND ".join(bounds)
    kinds, runs_of = "cost_kind = %s OR project_id IS NULL", "experiment_id = ANY(%s::bigint[])"
    if bounded:
        # The period's lines only, which its BRIN index of charge periods finds.
        read = f"({kinds} OR {runs_of}) AND {period}"
        read_params = [CostKind.GPU_COMPUTE, failed, *period_params]
    else:
        read = f"(({kinds}) AND {period}) OR {runs_of}"
        read_params = [CostKind.GPU_COMPUTE, *period_params, failed]
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {table}")
        # The scan in parallel: the planner prices passing each of the million lines from the
        # workers high enough to scan alone, which took 5.8 s where two workers take 3.9. The
        # runs as bigint[]: psycopg sends small ids as a smallint[], which PostgreSQL searches
        # element by element against a bigint (hashed only where both sides hash alike).
        cursor.execute("SET LOCAL parallel_tuple_cost = 0")
        cursor.execute(
            f"CREATE TEMPORARY TABLE {table} ON COMMIT DROP AS SELECT {columns}"
            f" FROM {lines} WHERE {read}",
            read_params,
        )
        cursor.execute("SET LOCAL parallel_tuple_cost TO DEFAULT")
        runs = failed
        if bounded:
            # The failed runs in the period with no finding yet: the rest of their lives.
            cursor.execute(
                f"SELECT DISTINCT experiment_id FROM {table}"
                " WHERE experiment_id = ANY(%s::bigint[])",
                [failed],
            )
            reached = sorted(run for (run,) in cursor.fetchall())
            runs = failed_runs_without_finding(reached)
            if runs:
                cursor.execute(
                    f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {lines}"
                    " WHERE experiment_id = ANY(%s::bigint[])"
                    " AND NOT (charge_period_end > %s AND charge_period_start < %s)",
                    [runs, low, high],
                )
        cursor.execute(f"ANALYZE {table}")
    failed_then = frozenset(failed) if bounded else frozenset()
    token = _SHARED.set(SharedCopy(low, high, frozenset(runs), failed_then))
    try:
        yield
    finally:
        _SHARED.reset(token)


def shared_lines(window: tuple[datetime | None, datetime | None]) -> bool:
    """Whether the GPU-compute lines and lines with no project of `window` may be read from the
    shared copy (lines_shared covers the window)."""
    shared = _SHARED.get()
    if shared is None:
        return False
    low, high = window
    return (shared.low is None or (low is not None and low >= shared.low)) and (
        shared.high is None or (high is not None and high <= shared.high)
    )


def run_lines_table(runs, *, window=None) -> str:
    """The table holding every line of `runs` (failed runs), or with `window` every line of
    those that have one in it: the shared copy where it has them all (a run failed since the
    copy was made is not in it)."""
    shared = _SHARED.get()
    if shared is None:
        return CostLineItem._meta.db_table
    if shared.runs.issuperset(runs) or (
        window is not None and shared.failed_then.issuperset(runs) and shared_lines(window)
    ):
        return RecomputeLine._meta.db_table
    return CostLineItem._meta.db_table


def gpu_lines(window: tuple[datetime | None, datetime | None]) -> QuerySet:
    """The GPU-compute lines, to filter to `window`: from the shared copy where it covers it."""
    model = RecomputeLine if shared_lines(window) else CostLineItem
    return model.objects.filter(cost_kind=CostKind.GPU_COMPUTE)


@dataclass
class HourFigure:
    currency: str
    spend: Decimal = Decimal("0")
    wasted: Decimal = Decimal("0")
    measured: bool = True
    idle_share: Decimal | None = None
    owner: tuple = (None, None, None)  # project, experiment, deployment of most of the spend
    owner_spend: Decimal | None = None
    counts: tuple[int, int] | None = None  # idle samples, samples of the GPUs that reported
    line_key: str = ""  # empty: the subject's line key (a run's hours may span resources)


@dataclass(frozen=True)
class DayPart:
    """A day's money, spread over its 24 UTC hours when stored: even parts at the stored scale,
    the remainder on the last hour (the parts add up exactly), one spread per part."""

    spend: Decimal
    wasted: Decimal
    owner: tuple  # project, experiment, deployment


def day_hours(day: date, part: DayPart) -> list[tuple[datetime, Decimal, Decimal]]:
    """(hour, spend, wasted) of the day's 24 hours (services spreads the same in SQL)."""
    spend = (part.spend / 24).quantize(PLACES, rounding=ROUND_DOWN)
    wasted = (part.wasted / 24).quantize(PLACES, rounding=ROUND_DOWN)
    start = day_start(day)
    hours = [(start + HOUR * number, spend, wasted) for number in range(23)]
    hours.append((start + HOUR * 23, part.spend - spend * 23, part.wasted - wasted * 23))
    return hours


@dataclass
class SubjectHours:
    """One subject's hours: (hour, currency) -> figures, and what names the subject."""

    line_key: str
    resource_id: str = ""
    billing_account_id: str = ""
    service_name: str = ""
    hours: dict[tuple, HourFigure] = field(default_factory=dict)  # (hour, currency, ...)
    # Whole UTC days to spread over their 24 hours where the hours are stored (the storage kinds,
    # which read a daily rollup): (day, currency, line key) -> [DayPart, ...]. A subject has
    # hours or days, not both.
    days: dict[tuple, list["DayPart"]] = field(default_factory=dict)
    gpus: int = 0
    # Kinds that say their own figures (part 3): None takes them from the hours.
    savings_per_month: dict[str, Decimal] | None = None
    reason: str = ""
    evidence: dict = field(default_factory=dict)
    owner: tuple = (None, None, None)  # project, experiment, deployment when no hour says it


def _hours_of(start: datetime, end: datetime) -> list[datetime]:
    """The UTC hours a charge period touches (at least the hour it starts in)."""
    first = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    hours = [first]
    moment = first + HOUR
    while moment < end:
        hours.append(moment)
        moment += HOUR
    return hours


def _lines(period: tuple[date | None, date | None], condition: Q, key_fields: tuple[str, ...]):
    """The lines (key, charge period, currency, owner and EffectiveCost as `cost`), each spread
    over its own hours (the SQL path does the same: no grouping before spreading)."""
    # Every line whose charge period overlaps the period (its hours outside it are dropped).
    lines = CostLineItem.objects.filter(condition)
    start, end = period
    if start is not None:
        lines = lines.filter(charge_period_end__gt=day_start(start))
    if end is not None:
        lines = lines.filter(charge_period_start__lt=day_start(end))
    return (
        lines.values(
            *key_fields,
            "charge_period_start",
            "charge_period_end",
            "billing_currency",
            "project_id",
            "experiment_id",
            "deployment_id",
            cost=F("effective_cost"),
        )
        .order_by()
        .iterator(chunk_size=20_000)
    )


def rounded(numerator: int, denominator: int, places: int) -> Decimal:
    """numerator ÷ denominator to `places` decimals, half to even, exactly (integers only:
    the SQL path computes the same, so both give the same figures to the last place)."""
    quotient, remainder = divmod(abs(numerator), denominator)
    if 2 * remainder > denominator or (2 * remainder == denominator and quotient % 2):
        quotient += 1
    return Decimal(-quotient if numerator < 0 else quotient).scaleb(-places)


RANK_CAP = Decimal("9000")  # parts of more an hour rank as equal (SQL ranks them in a bigint)


def _owner_rank(per_hour: Decimal, owner: tuple) -> tuple:
    """The hour's owner: the part with the most money (up to RANK_CAP), ties to the lowest ids
    (nulls last)."""
    return (-max(min(per_hour, RANK_CAP), -RANK_CAP), *((v is None, v or 0) for v in owner))


def _add(
    subject: SubjectHours,
    row: dict,
    share_of: dict[datetime, tuple[int, int]] | None,
    window: tuple[datetime | None, datetime | None],
) -> None:
    hours = _hours_of(row["charge_period_start"], row["charge_period_end"])
    # Even parts at the stored scale, the remainder on the last hour: the parts add up exactly.
    part = (row["cost"] / len(hours)).quantize(PLACES, rounding=ROUND_DOWN)
    last = row["cost"] - part * (len(hours) - 1)
    owner = (row["project_id"], row["experiment_id"], row["deployment_id"])
    low, high = window
    for number, hour in enumerate(hours, start=1):
        if (low is not None and hour < low) or (high is not None and hour >= high):
            continue
        per_hour = last if number == len(hours) else part
        figure = subject.hours.get((hour, row["billing_currency"]))
        if figure is None:
            figure = subject.hours[(hour, row["billing_currency"])] = HourFigure(
                row["billing_currency"]
            )
            if share_of is not None:
                counts = share_of.get(hour)
                if counts is None:
                    figure.measured = False
                else:
                    figure.counts = counts
                    figure.idle_share = rounded(counts[0] * 10**10, counts[1], 10)
        figure.spend += per_hour
        if figure.owner_spend is None or _owner_rank(per_hour, owner) < _owner_rank(
            figure.owner_spend, figure.owner
        ):
            figure.owner, figure.owner_spend = owner, per_hour


def _settle(subjects: dict[str, SubjectHours], *, all_wasted: bool) -> dict[str, SubjectHours]:
    """Each hour's wasted from its whole spend: all of it (unattributed), or spend × idle
    samples ÷ samples rounded once (half to even at the stored scale)."""
    for subject in subjects.values():
        for figure in subject.hours.values():
            if all_wasted:
                figure.wasted = figure.spend
            elif figure.counts is not None:
                idle, samples = figure.counts
                figure.wasted = rounded(int(figure.spend.scaleb(15)) * idle, samples, 15)
    return subjects


def idle_gpu_hours(*, start: date | None, end: date | None) -> dict[str, SubjectHours]:
    """Per billed resource whose GPUs report metrics: per UTC hour, its GPU-compute lines'
    EffectiveCost in the hour × (samples under the idle threshold ÷ utilisation samples) of its
    GPUs that reported that hour. Hours none of them reported are unmeasured (no waste)."""
    gpus_of = gpus_by_resource()
    if not gpus_of:
        return {}
    gpu_hours = GpuHour.objects.filter(
        gpu_id__in={gpu for gpus in gpus_of.values() for gpu in gpus}, util_samples__gt=0
    )
    window = _window(start, end)
    if window[0] is not None:
        gpu_hours = gpu_hours.filter(hour__gte=window[0])
    if window[1] is not None:
        gpu_hours = gpu_hours.filter(hour__lt=window[1])
    # Idle samples are idle_share × util_samples (the rollup keeps the share of a whole count).
    by_gpu: dict[int, dict[datetime, tuple[int, int]]] = defaultdict(dict)
    for gpu_id, hour, samples, share in gpu_hours.values_list(
        "gpu_id", "hour", "util_samples", "idle_share"
    ).iterator(chunk_size=20_000):
        by_gpu[gpu_id][hour] = (round((share or 0.0) * samples), samples)

    subjects: dict[str, SubjectHours] = {}
    shares: dict[str, dict[datetime, tuple[int, int]]] = {}
    condition = Q(cost_kind=CostKind.GPU_COMPUTE, resource_id__in=list(gpus_of))
    for row in _lines((start, end), condition, ("resource_id",)):
        resource = row["resource_id"]
        if resource not in shares:
            gpus = gpus_named_by(gpus_of, resource)
            merged: dict[datetime, list[int]] = {}
            for gpu in gpus:
                for hour, (idle, samples) in by_gpu.get(gpu, {}).items():
                    pair = merged.setdefault(hour, [0, 0])
                    pair[0] += idle
                    pair[1] += samples
            shares[resource] = {hour: (pair[0], pair[1]) for hour, pair in merged.items()}
            subjects[resource] = SubjectHours(
                line_key=resource, resource_id=resource, gpus=len(gpus)
            )
        _add(subjects[resource], row, shares[resource], window)
    return _settle(subjects, all_wasted=False)


def unattributed_hours(*, start: date | None, end: date | None) -> dict[str, SubjectHours]:
    """Per resource (or per account and service, for lines without a resource id) the
    EffectiveCost of its lines with no project, hour by hour."""
    subjects: dict[str, SubjectHours] = {}
    window = _window(start, end)
    for row in _lines(
        (start, end),
        Q(project_id__isnull=True),
        ("resource_id", "billing_account_id", "service_name"),
    ):
        resource = row["resource_id"]
        key = resource or f"{row['billing_account_id']}/{row['service_name']}"
        subject = subjects.get(key)
        if subject is None:
            subject = subjects[key] = SubjectHours(
                line_key=key,
                resource_id=resource,
                billing_account_id=row["billing_account_id"] if not resource else "",
                service_name=row["service_name"] if not resource else "",
            )
        _add(subject, row, None, window)
    return _settle(subjects, all_wasted=True)


# -- The same in SQL (PostgreSQL) ---------------------------------------------------------------
#
# On PostgreSQL the kinds above are computed where the lines are: each line is spread over its
# hours (a series, for the lines of more than one), the GPU rollup is summed per resource and hour
# through a temporary table of the GPU-to-resource resolution, and the hours land in a temporary
# table (HOURS_TABLE) that services.py turns into findings and FindingHour rows (INSERT ... SELECT).
# The figures are those of the Python path above to the last place (tests/insights/test_sql.py):
# even parts truncated at the stored scale with the remainder on the last hour, an hour's wasted
# its whole spend × idle samples ÷ samples rounded once, half to even.

HOURS_TABLE = "insights_hours_tmp"
RESOLUTION_TABLE = "insights_resolution_tmp"
SCALE = 15


def hours_table_create(cursor) -> None:
    """A fresh temporary table of a kind's hours, one row per subject, line key, hour and
    currency (the subject is the line key where subject_key is null)."""
    cursor.execute(f"DROP TABLE IF EXISTS {HOURS_TABLE}")
    cursor.execute(
        f"""CREATE TEMPORARY TABLE {HOURS_TABLE} (
            line_key varchar(1500) NOT NULL,
            resource_id varchar(1000) NOT NULL,
            billing_account_id varchar(200) NOT NULL,
            service_name varchar(200) NOT NULL,
            hour timestamptz NOT NULL,
            currency varchar(10) NOT NULL,
            wasted numeric(38, 15) NOT NULL,
            spend numeric(38, 15) NOT NULL,
            measured boolean NOT NULL,
            idle_share numeric(12, 10),
            project_id bigint,
            experiment_id bigint,
            deployment_id bigint,
            -- The finding's subject where it is not the line key (a run, on several resources).
            subject_key varchar(1500)
        )"""
    )


def _spread_sql(
    condition: str,
    keys: tuple[str, ...],
    window: tuple[datetime | None, datetime | None],
    *,
    table: str | None = None,
) -> tuple[str, list]:
    """SQL of the lines' parts, one row per line and hour in the window: the keys,
    billing_currency, the owner, hour and per_hour (as `_lines` and `_add`: even parts truncated
    at the stored scale, the remainder on the last hour). `table` holds the lines (by default:
    `condition` selects GPU-compute lines or lines with no project, read from the shared copy
    within lines_shared())."""
    low, high = window
    where, hour_where = [condition], ["TRUE"]
    if low is not None:
        where.append("charge_period_end > %s")
        hour_where.append("parts.hour >= %s")
    if high is not None:
        where.append("charge_period_start < %s")
        hour_where.append("parts.hour < %s")
    params = [moment for moment in window if moment is not None] * 2
    columns = ", ".join(keys)
    if table is None:
        table = (RecomputeLine if shared_lines(window) else CostLineItem)._meta.db_table
    sql = f"""
        SELECT parts.*,
               CASE WHEN parts.k = parts.n - 1 THEN parts.cost - parts.part * (parts.n - 1)
                    ELSE parts.part END AS per_hour
        FROM (
            SELECT spread.*, spread.first + spread.k * interval '1 hour' AS hour,
                   CASE WHEN spread.n = 1 THEN spread.cost
                        ELSE div(spread.cost * 1e{SCALE}, spread.n) * 1e-{SCALE} END AS part
            FROM (
                -- An hourly line (most of them) needs no series; unnest() is estimated at ten
                -- rows a line where a generate_series would be at a thousand (and the plan
                -- sized so). In the select list, not a lateral join: that ran a function scan
                -- per line, twice the time of the whole spread (950,000 lines: 2.1 s, 1.1 s).
                SELECT lines.*, unnest(CASE WHEN lines.n = 1 THEN ARRAY[0]
                    ELSE ARRAY(SELECT generate_series(0, lines.n - 1)) END) AS k
                FROM (
                    SELECT {columns}, billing_currency, project_id, experiment_id, deployment_id,
                           effective_cost AS cost,
                           date_trunc('hour', charge_period_start, 'UTC') AS first,
                           greatest(1, ceil(extract(epoch FROM charge_period_end
                               - date_trunc('hour', charge_period_start, 'UTC')) / 3600))::int
                               AS n
                    FROM {table}
                    WHERE {" AND ".join(where)}
                ) AS lines
            ) AS spread
        ) AS parts
        WHERE {" AND ".join(hour_where)}
    """
    return sql, params


NO_ID = 9223372036854775807  # stands for a null id in the owner's ranking: nulls last


def _hourly_sql(spread: str, keys: dict[str, str]) -> str:
    """SQL of the parts summed per keys (alias -> expression), hour and currency, with the owner
    of the part with the most money, ties to the lowest ids, nulls last (`_owner_rank`): the
    least of [-money in units of the stored scale, ids] bigint arrays, so one hash aggregate does
    it, no sort."""
    columns = ", ".join(f"{expression} AS {alias}" for alias, expression in keys.items())
    rank = ", ".join(
        [f"-(greatest(least(parts.per_hour, {RANK_CAP}), -{RANK_CAP}) * 1e{SCALE})::bigint"]
        + [
            f"coalesce(parts.{column}, {NO_ID})"
            for column in ("project_id", "experiment_id", "deployment_id")
        ]
    )
    owner = ", ".join(
        f"nullif(hourly.owner[{place}], {NO_ID}) AS {column}"
        for place, column in ((2, "project_id"), (3, "experiment_id"), (4, "deployment_id"))
    )
    return f"""
        SELECT hourly.*, {owner}
        FROM (
            SELECT {columns}, parts.hour, parts.billing_currency AS currency,
                   sum(parts.per_hour) AS spend, min(ARRAY[{rank}]) AS owner
            FROM ({spread}) AS parts
            GROUP BY {", ".join(keys.values())}, parts.hour, parts.billing_currency
        ) AS hourly
    """


def idle_gpu_sql(cursor, *, start: date | None, end: date | None) -> dict[str, dict]:
    """idle_gpu_hours into HOURS_TABLE; returns each subject's evidence (its GPUs)."""
    gpus_of = gpus_by_resource()
    # A line's resource is one of the keys; its GPUs are those of the key and of its tail.
    resolution = {resource: gpus_named_by(gpus_of, resource) for resource in gpus_of}
    cursor.execute(f"DROP TABLE IF EXISTS {RESOLUTION_TABLE}")
    cursor.execute(
        f"CREATE TEMPORARY TABLE {RESOLUTION_TABLE} "
        "(resource_id varchar(1000) NOT NULL, gpu_id bigint NOT NULL)"
    )
    with cursor.copy(f"COPY {RESOLUTION_TABLE} (resource_id, gpu_id) FROM STDIN") as copy:
        for resource, gpus in resolution.items():
            for gpu in gpus:
                copy.write_row((resource, gpu))
    window = _window(start, end)
    if shared_lines(window):
        # Only the keys the bill names: a GPU resolves under its instance's ARN and its tail,
        # and summing the rollup under both doubled the statement's largest hash.
        cursor.execute(
            f"""DELETE FROM {RESOLUTION_TABLE} AS resolution WHERE NOT EXISTS (
                    SELECT 1 FROM {RecomputeLine._meta.db_table} AS line
                    WHERE line.cost_kind = %s AND line.resource_id = resolution.resource_id)""",
            [CostKind.GPU_COMPUTE],
        )
    gpu_where, gpu_params = ["hours.util_samples > 0"], []
    if window[0] is not None:
        gpu_where.append("hours.hour >= %s")
        gpu_params.append(window[0])
    if window[1] is not None:
        gpu_where.append("hours.hour < %s")
        gpu_params.append(window[1])
    # Only resources that can have idle dollars: some GPU of theirs reported an idle sample in
    # the period, or they have a finding already (its hours of the period are computed again).
    # A GPU never idle makes every hour of its resource 0 wasted: no finding, nothing to store
    # (the benchmark organisation: 187 of 10,701 GPUs ever idle, a tenth of the GPU lines).
    cursor.execute(
        f"""DELETE FROM {RESOLUTION_TABLE} AS resolution
            WHERE resolution.resource_id NOT IN (
                SELECT mine.resource_id FROM {RESOLUTION_TABLE} AS mine
                WHERE mine.gpu_id IN (
                    SELECT hours.gpu_id FROM {GpuHour._meta.db_table} AS hours
                    WHERE {" AND ".join(gpu_where)}
                      AND round(coalesce(hours.idle_share, 0) * hours.util_samples) > 0))
              AND resolution.resource_id NOT IN (
                SELECT subject_key FROM {Finding._meta.db_table} WHERE kind = %s)""",
        [*gpu_params, Kind.IDLE_GPU],
    )
    cursor.execute(f"ANALYZE {RESOLUTION_TABLE}")
    spread, spread_params = _spread_sql(
        f"cost_kind = '{CostKind.GPU_COMPUTE}' AND resource_id IN "
        f"(SELECT resource_id FROM {RESOLUTION_TABLE})",
        ("resource_id",),
        window,
    )
    # wasted = spend × idle ÷ samples and idle_share = idle ÷ samples, half to even at 15 and 10
    # places (`rounded`): the quotient and remainder of whole numbers, each computed once (OFFSET
    # 0 keeps the planner from copying the expressions into every use).
    cursor.execute(
        f"""
        INSERT INTO {HOURS_TABLE}
        SELECT divided.resource_id, divided.resource_id, '', '', divided.hour, divided.currency,
               CASE WHEN divided.samples IS NULL THEN 0
                    ELSE (divided.quotient + CASE
                        WHEN 2 * abs(divided.remainder) > divided.samples
                          OR (2 * abs(divided.remainder) = divided.samples
                              AND mod(divided.quotient, 2) <> 0)
                        THEN sign(divided.remainder) ELSE 0 END) * 1e-{SCALE} END,
               divided.spend, divided.samples IS NOT NULL,
               CASE WHEN divided.samples IS NULL THEN NULL
                    ELSE (divided.share_quotient + CASE
                        WHEN 2 * divided.share_remainder > divided.samples
                          OR (2 * divided.share_remainder = divided.samples
                              AND mod(divided.share_quotient, 2) = 1)
                        THEN 1 ELSE 0 END) * 1e-10 END,
               divided.project_id, divided.experiment_id, divided.deployment_id
        FROM (
            SELECT quotients.*,
                   quotients.numerator - quotients.quotient * quotients.samples AS remainder
            FROM (
                SELECT joined.*, div(joined.numerator, joined.samples) AS quotient,
                       joined.idle * 10000000000 / joined.samples AS share_quotient,
                       mod(joined.idle * 10000000000, joined.samples) AS share_remainder
                FROM (
                    SELECT spent.*, shares.idle, shares.samples,
                           spent.spend * 1e{SCALE} * shares.idle AS numerator
                    FROM ({_hourly_sql(spread, {"resource_id": "parts.resource_id"})}) AS spent
                    LEFT JOIN (
                        SELECT resolution.resource_id, hours.hour,
                               sum(round(coalesce(hours.idle_share, 0) * hours.util_samples))
                                   ::bigint AS idle,
                               sum(hours.util_samples)::bigint AS samples
                        FROM {RESOLUTION_TABLE} AS resolution
                        JOIN gpu_gpuhour AS hours ON hours.gpu_id = resolution.gpu_id
                        WHERE {" AND ".join(gpu_where)}
                        GROUP BY resolution.resource_id, hours.hour
                    ) AS shares
                      ON shares.resource_id = spent.resource_id AND shares.hour = spent.hour
                    OFFSET 0
                ) AS joined
                OFFSET 0
            ) AS quotients
            OFFSET 0
        ) AS divided
        """,
        [*spread_params, *gpu_params],
    )
    cursor.execute(f"SELECT DISTINCT line_key FROM {HOURS_TABLE}")
    return {key: {"gpus": len(resolution[key])} for (key,) in cursor.fetchall()}


def unattributed_sql(cursor, *, start: date | None, end: date | None) -> dict[str, dict]:
    """unattributed_hours into HOURS_TABLE (all of an hour's spend is the finding's money)."""
    spread, params = _spread_sql(
        "project_id IS NULL",
        ("resource_id", "billing_account_id", "service_name"),
        _window(start, end),
    )
    # A resource's lines are one subject whatever their account and service (as the Python path).
    subject = {
        "resource_id": "parts.resource_id",
        "account": "CASE WHEN parts.resource_id <> '' THEN '' ELSE parts.billing_account_id END",
        "service": "CASE WHEN parts.resource_id <> '' THEN '' ELSE parts.service_name END",
    }
    cursor.execute(
        f"""
        INSERT INTO {HOURS_TABLE}
        SELECT CASE WHEN spent.resource_id <> '' THEN spent.resource_id
                    ELSE spent.account || '/' || spent.service END,
               spent.resource_id, spent.account, spent.service, spent.hour, spent.currency,
               spent.spend, spent.spend, TRUE, NULL,
               spent.project_id, spent.experiment_id, spent.deployment_id
        FROM ({_hourly_sql(spread, subject)}) AS spent
        """,
        params,
    )
    return {}
