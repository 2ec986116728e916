"""Part 3's kinds: failed runs, runs that stopped converging, big runs not validated small first,
unused commitments (waste), and the spot and region levers (savings). Each function returns
`{subject: SubjectHours}` as compute.py's do; services.py turns them into findings.

Reads are bulk: one grouped SQL read of the line items per kind (runs' lines by experiment id,
the levers' last 30 days grouped by resource, instance type and region, the unused commitment
lines), the runs and their loss points in one query each; nothing is read per subject.

- The run kinds' subject is the run (`run:<id>`); their hours keep each line's resource as the
  line key, so a counted-once total de-duplicates them against the resource's other findings.
- The levers' subject is the resource (its line key), so a spot and a region finding on one
  resource exclude each other in the savings total (the larger counts).
"""

import math
from collections import defaultdict
from datetime import date, datetime, timedelta
from decimal import ROUND_DOWN, Decimal

from django.db.models import DurationField, ExpressionWrapper, F, Q, Sum
from django.db.models.functions import TruncDay

from apps.billing.models import CUR_UNUSED_LINE_TYPES, CostKind, CostLineItem
from apps.experiments.models import Experiment, MetricPoint
from apps.spend.selectors import data_as_of

from .compute import (
    HOURS_TABLE,
    PLACES,
    RUN_KEY_PREFIX,
    HourFigure,
    SubjectHours,
    _hourly_sql,
    _hours_of,
    _lines,
    _owner_rank,
    _spread_sql,
    _window,
    failed_runs_without_finding,
    run_key,
    run_lines_table,
)
from .models import GpuInstancePrice, InsightsSettings, Kind

LEVER_DAYS = 30
# A region counts as cheaper only by at least 1% of the price: the catalogue's transcribed prices
# differ in the last digits between regions of one list price (21.957642 against 21.95764).
MIN_REGION_GAP = Decimal("0.01")
# The CUR carries an unused commitment as the fee line of a reservation (RIFee: its unused
# upfront and recurring fee) or a savings plan (SavingsPlanRecurringFee: commitment − used);
# FOCUS and the Azure export say CommitmentDiscountStatus = Unused.
TRAINING_KINDS = (Experiment.Kind.TRAINING, Experiment.Kind.FINE_TUNING)
# Per-run overrides: experiment tags with these names.
TAG_LOSS_METRIC = "loss_metric"
TAG_INTERRUPTIONS = "spot_interruptions_per_hour"
TAG_CHECKPOINT = "checkpoint_interval_hours"
EVIDENCE_POINTS = 400  # a loss curve drawn with at most this many points


def _line_key(row: dict) -> str:
    return row["resource_id"] or f"{row['billing_account_id']}/{row['service_name']}"


def _spread(
    subject: SubjectHours,
    row: dict,
    window: tuple[datetime | None, datetime | None],
    *,
    since: datetime | None = None,
) -> Decimal:
    """Add the row's hours (all wasted) to the subject, per line key; hours before `since` are
    not counted. Returns what was added (inside and outside the window: the subject's total)."""
    hours = _hours_of(row["charge_period_start"], row["charge_period_end"])
    part = (row["cost"] / len(hours)).quantize(PLACES, rounding=ROUND_DOWN)
    last = row["cost"] - part * (len(hours) - 1)
    owner = (row["project_id"], row["experiment_id"], row["deployment_id"])
    line_key = _line_key(row)
    low, high = window
    total = Decimal("0")
    for number, hour in enumerate(hours, start=1):
        if since is not None and hour < since:
            continue
        per_hour = last if number == len(hours) else part
        total += per_hour
        if (low is not None and hour < low) or (high is not None and hour >= high):
            continue
        key = (hour, row["billing_currency"], line_key)
        figure = subject.hours.get(key)
        if figure is None:
            figure = subject.hours[key] = HourFigure(row["billing_currency"], line_key=line_key)
        figure.spend += per_hour
        figure.wasted += per_hour
        if figure.owner_spend is None or _owner_rank(per_hour, owner) < _owner_rank(
            figure.owner_spend, figure.owner
        ):
            figure.owner, figure.owner_spend = owner, per_hour
    return total


def _run_lines(ids):
    """The lines of the runs `ids`, all of their history (a run's figures are its whole life;
    the window only says which hours are written)."""
    if not ids:
        return []
    return _lines(
        (None, None),
        Q(experiment_id__in=list(ids)),
        ("resource_id", "billing_account_id", "service_name"),
    )


def _run_subjects(
    runs: dict[int, Experiment],
    *,
    start: date | None,
    end: date | None,
    since: dict[int, datetime] | None = None,
) -> tuple[dict[str, SubjectHours], dict[int, dict[str, Decimal]]]:
    window = _window(start, end)
    subjects: dict[str, SubjectHours] = {}
    totals: dict[int, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    by_resource: dict[int, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for row in _run_lines(runs if since is None else since):
        run = runs[row["experiment_id"]]
        key = run_key(run.pk)
        subject = subjects.get(key)
        if subject is None:
            subject = subjects[key] = SubjectHours(
                line_key=key, owner=(run.project_id, run.pk, None)
            )
        added = _spread(subject, row, window, since=(since or {}).get(run.pk))
        totals[run.pk][row["billing_currency"]] += added
        if row["resource_id"]:
            by_resource[run.pk][row["resource_id"]] += added
    for run_id, spend in by_resource.items():
        # The finding names the resource most of the run's money went to.
        subjects[run_key(run_id)].resource_id = max(spend, key=lambda r: (spend[r], r))
    return subjects, totals


# -- failed_run and no_small_run ------------------------------------------------------------------


def failed_run_hours(*, start: date | None, end: date | None) -> dict[str, SubjectHours]:
    """Each failed run's full spend: failed runs cost exactly as much as successful ones."""
    runs = Experiment.objects.filter(status=Experiment.Status.FAILED).in_bulk()
    subjects, _totals = _run_subjects(runs, start=start, end=end)
    for subject in subjects.values():
        run = runs[subject.owner[1]]
        subject.evidence = _run_evidence(run)
    return subjects


def failed_run_sql(cursor, *, start: date | None, end: date | None) -> dict[str, dict]:
    """failed_run_hours into HOURS_TABLE: per run (its subject_key) and line key, every hour of
    its lines, all wasted; the run's resource is the one most of its money went to over its
    whole life (ties to the greatest id, as in Python). Returns each failed run's evidence."""
    runs = Experiment.objects.filter(status=Experiment.Status.FAILED).in_bulk()
    if not runs:
        return {}
    ids = sorted(runs)
    # Only the runs with a line in the period add hours; a new finding's resource is read from
    # its run's whole life, which the shared copy holds for those runs.
    table = run_lines_table(ids, window=_window(start, end))
    spread, params = _spread_sql(
        "experiment_id = ANY(%s::bigint[])",
        ("resource_id", "billing_account_id", "service_name"),
        _window(start, end),
        table=table,
    )
    keys = {
        "subject": f"'{RUN_KEY_PREFIX}' || parts.experiment_id",
        "line": "CASE WHEN parts.resource_id <> '' THEN parts.resource_id"
        " ELSE parts.billing_account_id || '/' || parts.service_name END",
    }
    # The resource names a new finding only (an existing one keeps its own): read for the runs
    # with no finding yet, none on the nightly recompute.
    new = failed_runs_without_finding(ids)
    main, main_params = "(SELECT NULL::text AS subject, NULL::text AS resource_id)", []
    if new:
        main = f"""(
            SELECT DISTINCT ON (totals.experiment_id)
                   '{RUN_KEY_PREFIX}' || totals.experiment_id AS subject, totals.resource_id
            FROM (
                SELECT experiment_id, resource_id, sum(effective_cost) AS spend
                FROM {table}
                WHERE experiment_id = ANY(%s::bigint[]) AND resource_id <> ''
                GROUP BY 1, 2
            ) AS totals
            ORDER BY totals.experiment_id, totals.spend DESC, totals.resource_id COLLATE "C" DESC
        )"""
        main_params = [new]
    cursor.execute(
        f"""
        INSERT INTO {HOURS_TABLE} (subject_key, line_key, resource_id, billing_account_id,
            service_name, hour, currency, wasted, spend, measured, idle_share, project_id,
            experiment_id, deployment_id)
        SELECT spent.subject, spent.line, coalesce(main.resource_id, ''), '', '', spent.hour,
               spent.currency, spent.spend, spent.spend, TRUE, NULL, spent.project_id,
               spent.experiment_id, spent.deployment_id
        FROM ({_hourly_sql(spread, keys)}) AS spent
        LEFT JOIN {main} AS main ON main.subject = spent.subject
        """,
        [ids, *params, *main_params],
    )
    return {run_key(pk): _run_evidence(run) for pk, run in runs.items()}


def _run_evidence(run: Experiment) -> dict:
    return {
        "run": run.name,
        "run_status": run.status,
        "gpus": run.gpu_count,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "ended_at": run.ended_at.isoformat() if run.ended_at else None,
    }


def no_small_run_candidates(*, settings: InsightsSettings) -> dict[int, Experiment]:
    """Failed or stopped runs on 8 or more GPUs that ended within their first `small_run_hours`
    with no smaller run of the same project and model started in the week before them."""
    limit = timedelta(hours=float(settings.small_run_hours))
    runs = list(
        Experiment.objects.filter(started_at__isnull=False).only(
            "pk", "project_id", "model_id", "gpu_count", "started_at", "ended_at", "status", "name"
        )
    )
    started: dict[tuple, list[tuple[datetime, int]]] = defaultdict(list)
    for run in runs:
        started[(run.project_id, run.model_id)].append((run.started_at, run.gpu_count))
    candidates = {}
    for run in runs:
        if (
            run.status not in {Experiment.Status.FAILED, Experiment.Status.STOPPED}
            or run.gpu_count < 8
            or run.ended_at is None
            or run.ended_at - run.started_at > limit
        ):
            continue
        week = run.started_at - timedelta(days=7)
        if any(
            week <= moment < run.started_at and gpus < run.gpu_count
            for moment, gpus in started[(run.project_id, run.model_id)]
        ):
            continue
        candidates[run.pk] = run
    return candidates


def no_small_run_hours(*, start: date | None, end: date | None) -> dict[str, SubjectHours]:
    """The spend of each big run that failed or stopped early with no smaller run before it: the
    cost of not validating on a subset (one-off; counted once with failed_run)."""
    settings = InsightsSettings.get()
    runs = no_small_run_candidates(settings=settings)
    subjects, _totals = _run_subjects(runs, start=start, end=end)
    for subject in subjects.values():
        run = runs[subject.owner[1]]
        subject.evidence = {
            **_run_evidence(run),
            "hours_run": _hours_text(run.ended_at - run.started_at),
            "small_run_hours": str(settings.small_run_hours.normalize()),
        }
    return subjects


def _hours_text(span: timedelta) -> str:
    return format((Decimal(int(span.total_seconds())) / 3600).quantize(Decimal("0.01")), "f")


# -- stalled_run ----------------------------------------------------------------------------------


def stall(values: list[float], *, threshold: Decimal) -> tuple[int, Decimal] | None:
    """(index the plateau starts at, improvement % at the standard split) when the run is
    stalled, else None.

    The tail is the last max(10, ⌈0.2 n⌉) points; the run is stalled when (min before the
    tail − min in the tail) ÷ |min before the tail| is under the threshold (a share, 0.01 for
    1%). The plateau starts at the earliest point k from which that still holds: the split at
    every point from k to the tail's start passes the same test.
    """
    n = len(values)
    tail = max(10, math.ceil(0.2 * n))
    split = n - tail
    if split < 1:
        return None
    prefix = [0.0] * (n + 1)  # prefix[k] = min(values[:k])
    prefix[0] = math.inf
    for i, value in enumerate(values):
        prefix[i + 1] = min(prefix[i], value)
    suffix = [math.inf] * (n + 1)  # suffix[k] = min(values[k:])
    for i in range(n - 1, -1, -1):
        suffix[i] = min(suffix[i + 1], values[i])

    def improvement(k: int) -> Decimal | None:
        before = Decimal(repr(prefix[k]))
        if before == 0:
            return None
        return (before - Decimal(repr(suffix[k]))) / abs(before)

    at_split = improvement(split)
    if at_split is None or at_split >= threshold:
        return None
    k = split
    while k > 1:
        share = improvement(k - 1)
        if share is None or share >= threshold:
            break
        k -= 1
    return k, (at_split * 100).quantize(Decimal("0.001"))


def stalled_runs(*, settings: InsightsSettings) -> dict[int, dict]:
    """Runs whose tracked loss stopped converging: their plateau's step and moment, from one read
    of the training runs and one of their loss points."""
    runs = Experiment.objects.filter(kind__in=TRAINING_KINDS).in_bulk()
    metric_of = {
        pk: str((run.tags or {}).get(TAG_LOSS_METRIC) or settings.loss_metric)
        for pk, run in runs.items()
    }
    series: dict[int, list[tuple[int, float, datetime | None]]] = defaultdict(list)
    points = MetricPoint.objects.filter(
        experiment_id__in=list(runs), name__in=set(metric_of.values())
    ).order_by("experiment_id", "step")
    for experiment_id, name, step, value, recorded_at in points.values_list(
        "experiment_id", "name", "step", "value", "recorded_at"
    ).iterator(chunk_size=20_000):
        if name == metric_of[experiment_id]:
            series[experiment_id].append((step, value, recorded_at))
    threshold = settings.stall_threshold_percent / 100
    found = {}
    for experiment_id, rows in series.items():
        result = stall([value for _step, value, _at in rows], threshold=threshold)
        if result is None:
            continue
        index, improvement = result
        plateau_at = rows[index][2]
        if plateau_at is None:
            continue  # a plateau not placed in time has no spend after it
        found[experiment_id] = {
            "run": runs[experiment_id],
            "metric": metric_of[experiment_id],
            "rows": rows,
            "index": index,
            "plateau_at": plateau_at,
            "improvement_percent": improvement,
        }
    return found


def _first_hour_from(moment: datetime) -> datetime:
    """The first whole UTC hour at or after `moment` (spend after the plateau's start)."""
    floor = moment.replace(minute=0, second=0, microsecond=0)
    return floor if floor == moment else floor + timedelta(hours=1)


def stalled_run_hours(*, start: date | None, end: date | None) -> dict[str, SubjectHours]:
    """A stalled run's spend from the first whole hour of its plateau on; for a run still going,
    savings per month = its spend per day since the plateau × 30."""
    settings = InsightsSettings.get()
    found = stalled_runs(settings=settings)
    runs = {pk: info["run"] for pk, info in found.items()}
    since = {pk: _first_hour_from(info["plateau_at"]) for pk, info in found.items()}
    subjects, totals = _run_subjects(runs, start=start, end=end, since=since)
    as_of = data_as_of()
    for subject in subjects.values():
        info = found[subject.owner[1]]
        run = info["run"]
        rows = info["rows"]
        stride = max(1, math.ceil(len(rows) / EVIDENCE_POINTS))
        drawn = [(step, value) for step, value, _at in rows[::stride]]
        subject.evidence = {
            **_run_evidence(run),
            "metric": info["metric"],
            "points": [list(point) for point in drawn],
            "point_count": len(rows),
            "plateau_step": rows[info["index"]][0],
            "plateau_at": info["plateau_at"].isoformat(),
            "improvement_percent": str(info["improvement_percent"]),
            "threshold_percent": str(settings.stall_threshold_percent.normalize()),
        }
        subject.savings_per_month = {}
        if run.status == Experiment.Status.RUNNING and as_of is not None:
            seconds = int((as_of - since[run.pk]).total_seconds())
            if seconds > 0:
                # Spend per day since the plateau × 30 (in that order of exact operations).
                subject.savings_per_month = {
                    currency: amount * 30 * 86400 / seconds
                    for currency, amount in totals[run.pk].items()
                    if amount > 0
                }
    return subjects


# -- unused_commitment ----------------------------------------------------------------------------


def _unused_condition() -> Q:
    return Q(commitment_discount_status="Unused") | Q(
        extra__x_LineItemType__in=CUR_UNUSED_LINE_TYPES, effective_cost__gt=0
    )


def unused_commitment_hours(*, start: date | None, end: date | None) -> dict[str, SubjectHours]:
    """Per commitment (its CommitmentDiscountId; a CUR fee line's reservation or savings plan
    ARN, its resource id), the EffectiveCost of its unused part, hour by hour; the evidence is
    its use over time (used and unused per day)."""
    window = _window(start, end)
    subjects: dict[str, SubjectHours] = {}
    for row in _lines(
        (start, end),
        _unused_condition(),
        ("resource_id", "billing_account_id", "service_name", "commitment_discount_id"),
    ):
        key = row["commitment_discount_id"] or row["resource_id"] or _line_key(row)
        subject = subjects.get(key)
        if subject is None:
            subject = subjects[key] = SubjectHours(line_key=key, resource_id=key)
        _spread(subject, row, window)
    if subjects:
        use = commitment_use(ids=list(subjects))
        for key, subject in subjects.items():
            subject.evidence = {"use": use.get(key, [])}
    return subjects


def commitment_use(*, ids: list[str]) -> dict[str, list[list[str]]]:
    """Per commitment, per UTC day: [day, currency, used, unused] EffectiveCost (exact strings),
    in one grouped read."""
    used: dict[tuple, Decimal] = defaultdict(Decimal)
    unused: dict[tuple, Decimal] = defaultdict(Decimal)
    lines = CostLineItem.objects.filter(
        Q(commitment_discount_id__in=ids)
        | Q(resource_id__in=ids, extra__x_LineItemType__in=CUR_UNUSED_LINE_TYPES)
    )
    for row in (
        lines.annotate(day=TruncDay("charge_period_start"), line_type=F("extra__x_LineItemType"))
        .values(
            "day",
            "billing_currency",
            "commitment_discount_id",
            "resource_id",
            "commitment_discount_status",
            "line_type",
        )
        .annotate(cost=Sum("effective_cost"))
        .order_by()
    ):
        key = row["commitment_discount_id"] or row["resource_id"]
        if key not in ids:
            continue
        is_unused = row["commitment_discount_status"] == "Unused" or (
            row["line_type"] in CUR_UNUSED_LINE_TYPES and row["cost"] > 0
        )
        target = unused if is_unused else used
        target[(key, row["day"].date(), row["billing_currency"])] += row["cost"]
    out: dict[str, list[list[str]]] = defaultdict(list)
    for key, day, currency in sorted(set(used) | set(unused)):
        out[key].append(
            [
                day.isoformat(),
                currency,
                _text(used.get((key, day, currency), Decimal("0"))),
                _text(unused.get((key, day, currency), Decimal("0"))),
            ]
        )
    return dict(out)


def _text(value: Decimal) -> str:
    text = format(value.normalize(), "f")
    return text if text != "-0" else "0"


# -- The levers: spot_candidate and cheaper_region ------------------------------------------------


def provider_key(name: str) -> str:
    """A bill's ProviderName as the catalogue spells its cloud."""
    lowered = name.lower()
    for needle, cloud in (
        ("aws", "aws"),
        ("amazon", "aws"),
        ("google", "gcp"),
        ("gcp", "gcp"),
        ("azure", "azure"),
        ("microsoft", "azure"),
    ):
        if needle in lowered:
            return cloud
    return lowered


def _prices() -> dict[tuple[str, str], dict[str, GpuInstancePrice]]:
    """(provider, instance type) -> region -> the catalogue's price row."""
    prices: dict[tuple[str, str], dict[str, GpuInstancePrice]] = defaultdict(dict)
    for price in GpuInstancePrice.objects.exclude(instance_type="").order_by("pk"):
        prices[(price.provider, price.instance_type)].setdefault(price.region, price)
    return prices


def _lever_window() -> tuple[datetime, datetime] | None:
    as_of = data_as_of()
    if as_of is None:
        return None
    return as_of - timedelta(days=LEVER_DAYS), as_of


def lever_rows(*, training_only: bool) -> list[dict]:
    """On-demand GPU compute not covered by a commitment in the last 30 days of the bill, per
    resource, run, instance type, region and currency: its spend and instance-hours (usage
    quantity in hours where the line says so, else its charge period), in one grouped read."""
    window = _lever_window()
    if window is None:
        return []
    low, high = window
    lines = CostLineItem.objects.filter(
        cost_kind=CostKind.GPU_COMPUTE,
        pricing_category="Standard",
        commitment_discount_id="",
        charge_period_start__gte=low,
        charge_period_start__lt=high,
    ).exclude(Q(resource_id="") | Q(instance_type=""))
    if training_only:
        lines = lines.filter(deployment_id__isnull=True, workload__in=["training", "fine_tuning"])
    hourly = Q(consumed_unit__iregex=r"^(hour|hours|hrs|hr)$", consumed_quantity__isnull=False)
    span = ExpressionWrapper(
        F("charge_period_end") - F("charge_period_start"), output_field=DurationField()
    )
    rows = []
    for row in (
        lines.values(
            "resource_id",
            "project_id",
            "experiment_id",
            "deployment_id",
            "provider_name",
            "region_id",
            "instance_type",
            "billing_currency",
        )
        .annotate(
            cost=Sum("effective_cost"),
            quantity=Sum("consumed_quantity", filter=hourly),
            span=Sum(span, filter=~hourly),
        )
        .order_by()
    ):
        hours = row["quantity"] or Decimal("0")
        if row["span"]:
            hours += Decimal(int(row["span"].total_seconds())) / 3600
        row["hours"] = hours
        rows.append(row)
    return rows


def _setting(tags: dict, name: str, default: Decimal) -> tuple[Decimal, bool]:
    """A run's override from its tags (a number, not negative), else the organisation's."""
    value = (tags or {}).get(name)
    if value in (None, ""):
        return default, False
    try:
        number = Decimal(str(value))
    except ArithmeticError:
        return default, False
    if not number.is_finite() or number < 0:
        return default, False
    return number, True


def _money(amount: Decimal, currency: str) -> str:
    return f"{currency} {amount.quantize(Decimal('0.01')):,}"


def _owner_of(spend: dict[tuple, Decimal]) -> tuple:
    return max(spend, key=lambda owner: (spend[owner], tuple(str(v) for v in owner)))


def spot_candidate_hours(*, start: date | None, end: date | None) -> dict[str, SubjectHours]:
    """Training on on-demand capacity not covered by a commitment, in the last 30 days, whose
    instance type has a spot price in the catalogue (in the bill's currency): savings per month
    = spend − hours × spot − rework, where rework = hours × interruptions per instance-hour ×
    checkpoint interval ÷ 2 instance-hours, re-run at the spot price. Not waste."""
    settings = InsightsSettings.get()
    prices = _prices()
    rows = lever_rows(training_only=True)
    runs = Experiment.objects.filter(
        pk__in={row["experiment_id"] for row in rows if row["experiment_id"]}
    ).in_bulk()
    subjects: dict[str, SubjectHours] = {}
    owners: dict[str, dict[tuple, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for row in rows:
        run = runs.get(row["experiment_id"])
        if run is not None and run.is_spot:
            continue
        price = prices.get((provider_key(row["provider_name"]), row["instance_type"]), {}).get(
            row["region_id"]
        )
        if (
            price is None
            or price.spot_per_hour is None
            or price.currency != row["billing_currency"]
        ):
            continue
        tags = run.tags if run is not None else {}
        rate, rate_own = _setting(tags, TAG_INTERRUPTIONS, settings.spot_interruptions_per_hour)
        every, every_own = _setting(tags, TAG_CHECKPOINT, settings.checkpoint_interval_hours)
        hours = row["hours"]
        spot_cost = hours * price.spot_per_hour
        rework_hours = hours * rate * every / 2
        rework = rework_hours * price.spot_per_hour
        saving = row["cost"] - spot_cost - rework
        key = row["resource_id"]
        subject = subjects.get(key)
        if subject is None:
            subject = subjects[key] = SubjectHours(
                line_key=key, resource_id=key, savings_per_month={}, evidence={"prices": []}
            )
        currency = row["billing_currency"]
        subject.savings_per_month[currency] = (
            subject.savings_per_month.get(currency, Decimal("0")) + saving
        )
        owners[key][(row["project_id"], row["experiment_id"], row["deployment_id"])] += row["cost"]
        subject.evidence["prices"].append(
            {
                "run": run.name if run is not None else "",
                "instance_type": row["instance_type"],
                "region": row["region_id"],
                "currency": currency,
                "hours": _text(hours),
                "spend": _text(row["cost"]),
                "on_demand_per_hour": _text(price.on_demand_per_hour or Decimal("0")),
                "spot_per_hour": _text(price.spot_per_hour),
                "spot_cost": _text(spot_cost),
                "interruptions_per_hour": _text(rate),
                "interruptions_from": "run" if rate_own else "organisation",
                "checkpoint_interval_hours": _text(every),
                "checkpoint_from": "run" if every_own else "organisation",
                "rework_hours": _text(rework_hours),
                "rework_cost": _text(rework),
                "saving": _text(saving),
                "source": price.source,
            }
        )
    for key, subject in list(subjects.items()):
        if not any(amount > 0 for amount in subject.savings_per_month.values()):
            subject.savings_per_month = {}
            continue
        subject.owner = _owner_of(owners[key])
        currency, amount = max(subject.savings_per_month.items(), key=lambda item: item[1])
        first = subject.evidence["prices"][0]
        subject.reason = (
            f"On-demand {first['instance_type']} in {first['region']}: spot would save "
            f"{_money(amount, currency)} a month after rework"
        )[:500]
    return subjects


def cheaper_region_hours(*, start: date | None, end: date | None) -> dict[str, SubjectHours]:
    """On-demand GPU compute whose instance type is cheaper in another region of the same
    provider (the catalogue's on-demand prices, in the bill's currency, by 1% of the price or
    more): savings per month =
    its instance-hours in the last 30 days × (the price here − the cheapest other region's).
    The evidence warns where the project's data sits in the current region (its storage lines
    there in the same 30 days): moving it costs egress. Not waste."""
    prices = _prices()
    rows = lever_rows(training_only=False)
    storage = _storage_by_project_region()
    subjects: dict[str, SubjectHours] = {}
    owners: dict[str, dict[tuple, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for row in rows:
        regions = prices.get((provider_key(row["provider_name"]), row["instance_type"]), {})
        here = regions.get(row["region_id"])
        if (
            here is None
            or here.on_demand_per_hour is None
            or here.currency != row["billing_currency"]
        ):
            continue
        others = sorted(
            (
                price
                for region, price in regions.items()
                if region != row["region_id"]
                and price.on_demand_per_hour is not None
                and price.currency == here.currency
                and price.on_demand_per_hour * (1 + MIN_REGION_GAP) <= here.on_demand_per_hour
            ),
            key=lambda price: (price.on_demand_per_hour, price.region),
        )
        if not others:
            continue  # already in the cheapest region
        best = others[0]
        saving = row["hours"] * (here.on_demand_per_hour - best.on_demand_per_hour)
        key = row["resource_id"]
        currency = row["billing_currency"]
        subject = subjects.get(key)
        if subject is None:
            subject = subjects[key] = SubjectHours(
                line_key=key, resource_id=key, savings_per_month={}, evidence={"prices": []}
            )
        subject.savings_per_month[currency] = (
            subject.savings_per_month.get(currency, Decimal("0")) + saving
        )
        owners[key][(row["project_id"], row["experiment_id"], row["deployment_id"])] += row["cost"]
        data_here = storage.get((row["project_id"], row["region_id"], currency))
        subject.evidence["prices"].append(
            {
                "instance_type": row["instance_type"],
                "region": row["region_id"],
                "currency": currency,
                "hours": _text(row["hours"]),
                "spend": _text(row["cost"]),
                "on_demand_per_hour": _text(here.on_demand_per_hour),
                "regions": [
                    {"region": price.region, "on_demand_per_hour": _text(price.on_demand_per_hour)}
                    for price in others[:5]
                ],
                "cheapest_region": best.region,
                "cheapest_per_hour": _text(best.on_demand_per_hour),
                "saving": _text(saving),
                "storage_here": _text(data_here) if data_here else None,
                "source": f"{here.source}; {best.source}",
            }
        )
        if data_here:
            subject.evidence["warning"] = (
                f"The project's data sits in {row['region_id']} "
                f"({_money(data_here, currency)} of storage in the last {LEVER_DAYS} days): "
                "moving the work costs egress."
            )
    for key, subject in subjects.items():
        subject.owner = _owner_of(owners[key])
        currency, amount = max(subject.savings_per_month.items(), key=lambda item: item[1])
        first = subject.evidence["prices"][0]
        subject.reason = (
            f"{first['instance_type']} is cheaper in {first['cheapest_region']} than in "
            f"{first['region']}: {_money(amount, currency)} a month"
            + (" (data sits here: egress)" if "warning" in subject.evidence else "")
        )[:500]
    return subjects


def _storage_by_project_region() -> dict[tuple, Decimal]:
    window = _lever_window()
    if window is None:
        return {}
    low, high = window
    return {
        (row["project_id"], row["region_id"], row["billing_currency"]): row["cost"]
        for row in CostLineItem.objects.filter(
            cost_kind=CostKind.STORAGE,
            project_id__isnull=False,
            charge_period_start__gte=low,
            charge_period_start__lt=high,
        )
        .exclude(region_id="")
        .values("project_id", "region_id", "billing_currency")
        .annotate(cost=Sum("effective_cost"))
        .order_by()
        if row["cost"] and row["cost"] > 0
    }


# -- Reasons from a finding's totals --------------------------------------------------------------


def failed_reason(*, finding, currency: str, wasted: Decimal, billed: int) -> str:
    run = finding.evidence.get("run") or finding.subject_key
    return f"Run {run} failed: {_money(wasted, currency)} over {billed} billed hours"


def no_small_reason(*, finding, currency: str, wasted: Decimal, billed: int) -> str:
    evidence = finding.evidence
    return (
        f"{evidence.get('gpus')}-GPU run {evidence.get('run')} ended after "
        f"{evidence.get('hours_run')} h with no smaller run before it: "
        f"{_money(wasted, currency)} not validated on a subset"
    )


def stalled_reason(*, finding, currency: str, wasted: Decimal, billed: int) -> str:
    evidence = finding.evidence
    return (
        f"{evidence.get('metric')} stopped converging: its tail bettered the best before it by "
        f"{evidence.get('improvement_percent')}% (under {evidence.get('threshold_percent')}%): "
        f"{_money(wasted, currency)} spent after the plateau at step {evidence.get('plateau_step')}"
    )


def unused_reason(*, finding, currency: str, wasted: Decimal, billed: int) -> str:
    return f"Commitment unused: {_money(wasted, currency)} paid for nothing over {billed} hours"


REASONS = {
    Kind.FAILED_RUN: failed_reason,
    Kind.NO_SMALL_RUN: no_small_reason,
    Kind.STALLED_RUN: stalled_reason,
    Kind.UNUSED_COMMITMENT: unused_reason,
}

KIND_HOURS = {
    Kind.FAILED_RUN: failed_run_hours,
    Kind.NO_SMALL_RUN: no_small_run_hours,
    Kind.STALLED_RUN: stalled_run_hours,
    Kind.UNUSED_COMMITMENT: unused_commitment_hours,
    Kind.SPOT_CANDIDATE: spot_candidate_hours,
    Kind.CHEAPER_REGION: cheaper_region_hours,
}
