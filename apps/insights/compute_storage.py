"""Storage and egress findings (issue 18), read from the storage rollup (billing's
DailyStorageCost: a day's byte-seconds stored, bytes moved and spend per bucket or volume, data
class, region pair and owner), never from the line items: a handful of grouped reads whatever
the size of the bill.

Days are whole UTC days before the bill's "data as of" day (`_last_day`: a partial day is left
out); a week is seven such days counted back from the last (week 0 ends on the last day). A
day's bytes held are its byte-seconds ÷ 86,400. A day's money is spread evenly over its 24 UTC
hours (the rollup keeps days, the finding-hours hours), so counted-once totals meet the other
kinds' hours of the same bucket (its line key: the resource id).

- **checkpoints_only_grow** (waste and savings): a checkpoint bucket whose weekly bytes (the mean
  of the week's days) never went down over the last N weeks and went up. Wasted: each day of
  those weeks, its spend × (bytes − the first day's bytes) ÷ bytes (the cost of the growth).
  Savings a month: holding it at today's size, i.e. what a month of that growth adds to each
  month's bill: growth per day (last week − first week, over the days between them) × 30 × the
  bucket's price per byte-day in the last week × 30.
- **storage_of_finished_runs** (waste): storage attributed to a run that succeeded, failed or was
  stopped, on the days from N days after it ended: all of it. Monthly: its last 30 days.
- **data_far_from_gpus** (waste and savings): transfer between regions attributed to a training
  or fine-tuning run, from another region into one where the run's GPUs are billed (the bill's
  GPU compute lines of the run, else the run's registered region). Wasted: that egress; savings
  a month: the egress gone (its last 30 days). The one-off cost of copying the project's data
  held in the source region (its bytes on the last day × the catalogue's inter-region price for
  that pair, in the catalogue's currency only) is shown beside it.
- **vector_db_growth** (savings): a vector database (data class vector-db) whose bytes grew by
  more than the setting's percent in the last 30 days. Savings a month: the bytes above that
  pace × its price per byte-day on the last day × 30. Not waste (the capacity is in use).
- **storage_spike** (waste, one-off): a week of a bucket's storage spend at least the setting's
  factor × its trend (the mean weekly spend of the four weeks before it), in the last N weeks.
  Wasted: each day of that week, its spend above the trend's day (trend ÷ 7).
"""

from collections import defaultdict
from datetime import UTC, date, timedelta
from decimal import Decimal

from django.db.models import F, Max, Min, Q, Sum, Window
from django.db.models.functions import DenseRank, TruncDate

from apps.billing.models import CostKind, CostLineItem, DailyStorageCost
from apps.billing.storage import UNKNOWN, ByteSum, DataClass, UsageClass
from apps.experiments.models import Experiment
from apps.spend.selectors import data_as_of
from apps.spend.templatetags.storage_units import binary_bytes_text

from .compute import PLACES, DayPart, SubjectHours, day_start, is_narrowed
from .compute_part3 import provider_key, run_key
from .models import Finding, InsightsSettings, Kind, StorageEgressPrice

ZERO = Decimal(0)
DAY_SECONDS = Decimal(86400)
TREND_WEEKS = 4  # storage_spike: the trend is the mean of this many weeks before the week
RECENT_DAYS = 30  # vector_db_growth's window
FINISHED = (Experiment.Status.SUCCEEDED, Experiment.Status.FAILED, Experiment.Status.STOPPED)
TRAINING = (Experiment.Kind.TRAINING, Experiment.Kind.FINE_TUNING)
STORAGE = Q(usage_class__in=UsageClass.STORAGE)
EVIDENCE_DAYS = 120  # a finding's chart shows at most this many days
GIB = Decimal(2**30)


def _text(value: Decimal) -> str:
    text = format(value.normalize(), "f")
    return text if text != "-0" else "0"


def _money(amount: Decimal, currency: str) -> str:
    return f"{currency} {amount.quantize(Decimal('0.01')):,}"


def _gib(amount: Decimal) -> str:
    return binary_bytes_text(amount)  # one kind of unit everywhere (binary)


def _last_day() -> date | None:
    """The last whole UTC day of the bill (the day of "data as of" when it ends at midnight)."""
    as_of = data_as_of()
    if as_of is None:
        return None
    return as_of.date() - timedelta(days=1)


def bucket_key(row: dict) -> str:
    """The line key of a rollup row: its bucket or volume, else what the row is."""
    if row["resource_id"]:
        return row["resource_id"]
    return f"storage:{row['provider_name']}/{row['region_id']}/{row['usage_class']}"


class Series:
    """One subject's days: bytes held, spend and the owner with the most spend, per currency."""

    def __init__(self) -> None:
        self.bytes: dict[date, Decimal] = defaultdict(Decimal)
        self.spend: dict[date, Decimal] = defaultdict(Decimal)
        self.owners: dict[date, dict[tuple, Decimal]] = defaultdict(lambda: defaultdict(Decimal))

    def add(self, row: dict) -> None:
        day = row["day"]
        self.bytes[day] += row["stored"] / DAY_SECONDS
        self.spend[day] += row["cost"]
        self.owners[day][(row["project_id"], row["experiment_id"], row["deployment_id"])] += row[
            "cost"
        ]

    def owner(self, day: date) -> tuple:
        spend = self.owners.get(day) or {}
        if not spend:
            return (None, None, None)
        return max(spend, key=lambda o: (spend[o], tuple(-(v or 0) for v in o)))

    def week(self, last: date, number: int) -> tuple[Decimal, Decimal, int]:
        """Week `number` back from `last`: mean bytes held, spend, days with bytes."""
        days = [last - timedelta(days=7 * number + i) for i in range(7)]
        held = [self.bytes[d] for d in days if self.bytes.get(d)]
        return sum(held, ZERO) / 7, sum((self.spend.get(d, ZERO) for d in days), ZERO), len(held)


def _series(condition: Q, *, key=bucket_key, since: date, until: date) -> dict[tuple, Series]:
    """(line key, currency) -> its Series over [since, until], in one grouped read."""
    out: dict[tuple, Series] = defaultdict(Series)
    for row in (
        DailyStorageCost.objects.filter(condition, day__gte=since, day__lte=until)
        .values(
            "day",
            "resource_id",
            "provider_name",
            "region_id",
            "usage_class",
            "billing_currency",
            "project_id",
            "experiment_id",
            "deployment_id",
        )
        .annotate(stored=ByteSum("stored_byte_seconds"), cost=Sum("effective_cost"))
        .order_by()
    ):
        out[(key(row), row["billing_currency"])].add(row)
    return out


def _spread_day(
    subject: SubjectHours,
    *,
    day: date,
    currency: str,
    line_key: str,
    spend: Decimal,
    wasted: Decimal,
    owner: tuple,
    window: tuple[date | None, date | None],
) -> None:
    """The day's spend and wasted, to be spread over its 24 hours where they are stored
    (compute.day_hours: on PostgreSQL in SQL, a million hours not made one by one in Python).
    Days outside the window are left."""
    low, high = window
    if (low is not None and day < low) or (high is not None and day >= high):
        return
    subject.days.setdefault((day, currency, line_key), []).append(DayPart(spend, wasted, owner))


def _days_evidence(series: Series, wasted: dict[date, Decimal], currency: str) -> list[list]:
    days = sorted(set(series.bytes) | set(series.spend))[-EVIDENCE_DAYS:]
    return [
        [
            day.isoformat(),
            currency,
            _text(series.bytes.get(day, ZERO).quantize(Decimal(1))),
            _text(series.spend.get(day, ZERO)),
            _text(wasted.get(day, ZERO)),
        ]
        for day in days
    ]


# -- checkpoints_only_grow ------------------------------------------------------------------------


def checkpoints_only_grow_hours(*, start: date | None, end: date | None) -> dict[str, SubjectHours]:
    last = _last_day()
    if last is None:
        return {}
    weeks = InsightsSettings.get().checkpoint_growth_weeks
    first = last - timedelta(days=7 * weeks - 1)
    subjects: dict[str, SubjectHours] = {}
    condition = STORAGE & Q(data_class=DataClass.CHECKPOINTS)
    for (line_key, currency), series in sorted(_series(condition, since=first, until=last).items()):
        means = [series.week(last, n) for n in range(weeks)]  # newest first
        if any(days == 0 for _mean, _spend, days in means):
            continue  # not stored in every week: no N weeks of history
        ordered = [mean for mean, _spend, _days in reversed(means)]  # oldest first
        if any(b < a for a, b in zip(ordered, ordered[1:], strict=False)):
            continue  # a week of decrease
        if ordered[-1] <= ordered[0]:
            continue  # flat: no growth
        base = series.bytes.get(first, ZERO)
        if not base:
            continue
        wasted: dict[date, Decimal] = {}
        for offset in range(7 * weeks):
            day = first + timedelta(days=offset)
            held = series.bytes.get(day, ZERO)
            if held > base:
                wasted[day] = (series.spend.get(day, ZERO) * (held - base) / held).quantize(PLACES)
        if not any(wasted.values()):
            continue
        growth_per_day = (ordered[-1] - ordered[0]) / (7 * (weeks - 1))
        week_spend = means[0][1]
        byte_days = sum((series.bytes.get(last - timedelta(days=i), ZERO) for i in range(7)), ZERO)
        # growth a day × 30 × price a byte-day (the last week's spend ÷ byte-days) × 30, as one
        # fraction (multiplied out before the one division: exact where the figures are).
        saving = (
            (ordered[-1] - ordered[0]) * 900 * week_spend / (7 * (weeks - 1) * byte_days)
        ).quantize(PLACES)
        subject = subjects[line_key] = SubjectHours(
            line_key=line_key,
            resource_id=line_key,
            savings_per_month={currency: saving} if saving > 0 else {},
            owner=series.owner(last),
        )
        for day, amount in sorted(wasted.items()):
            _spread_day(
                subject,
                day=day,
                currency=currency,
                line_key=line_key,
                spend=series.spend.get(day, ZERO),
                wasted=amount,
                owner=series.owner(day),
                window=(start, end),
            )
        subject.evidence = {
            "storage_days": _days_evidence(series, wasted, currency),
            "weeks": weeks,
            "weekly_bytes": [_text(mean.quantize(Decimal(1))) for mean in ordered],
            "growth_bytes_per_month": _text((growth_per_day * 30).quantize(Decimal(1))),
        }
        subject.reason = (
            f"Checkpoints grew every week for {weeks} weeks "
            f"({_gib(ordered[0])} to {_gib(ordered[-1])}, +{_gib(growth_per_day * 30)} a month): "
            f"each month of growth adds {_money(saving, currency)} a month"
        )[:500]
    return subjects


# -- storage_of_finished_runs ---------------------------------------------------------------------


# The columns that make a group of a run's storage rows (a series gathers one or more).
LIFE_GROUP = (
    "experiment_id",
    "resource_id",
    "provider_name",
    "region_id",
    "usage_class",
    "billing_currency",
)


def _sums_by_bucket(days) -> tuple[dict[int, tuple[dict, dict]], dict[tuple, tuple[date, date]]]:
    """Run -> (spend per line key, spend per currency) of these storage days, summed in one
    grouped read; and each group of rows' (LIFE_GROUP) first and last day."""
    sums: dict[int, tuple[dict, dict]] = {}
    spans: dict[tuple, tuple[date, date]] = {}
    for row in (
        days.values(*LIFE_GROUP)
        .annotate(cost=Sum("effective_cost"), first=Min("day"), last=Max("day"))
        .order_by()
    ):
        by_bucket, by_currency = sums.setdefault(
            row["experiment_id"], (defaultdict(Decimal), defaultdict(Decimal))
        )
        by_bucket[bucket_key(row)] += row["cost"]
        by_currency[row["billing_currency"]] += row["cost"]
        spans[tuple(row[column] for column in LIFE_GROUP)] = (row["first"], row["last"])
    return sums, spans


def _run_series(days, keep=None) -> dict[int, dict[tuple, Series]]:
    """Run -> (line key, currency) -> its Series of these storage days, in one grouped read
    (`keep`: which rows to keep, a test of each; all of them without it)."""
    grouped: dict[int, dict[tuple, Series]] = defaultdict(lambda: defaultdict(Series))
    for row in (
        days.values(*LIFE_GROUP, "day", "project_id", "deployment_id")
        .annotate(stored=ByteSum("stored_byte_seconds"), cost=Sum("effective_cost"))
        .order_by()
    ):
        if keep is None or keep(row):
            grouped[row["experiment_id"]][(bucket_key(row), row["billing_currency"])].add(row)
    return grouped


def _last_days(days, spans: dict[tuple, tuple[date, date]]) -> dict[int, dict[tuple, Series]]:
    """The last EVIDENCE_DAYS days with storage of each group of rows (LIFE_GROUP) as
    _run_series gives them: a series' last days are among its groups' last days. A group billed
    every day has them in its last EVIDENCE_DAYS calendar days, which are read by the day index
    (ranking each group's days over its whole life read three years of every run's storage, 0.8
    s of a month's recompute at that size); the runs of a group with gaps there are read ranked.
    """
    window = timedelta(days=EVIDENCE_DAYS - 1)
    since = {group: last - window for group, (_first, last) in spans.items()}
    # Each run from its groups' earliest such day, the runs of one day in one condition (most
    # groups end on the last day with storage).
    earliest: dict[int, date] = {}
    for group, day in since.items():
        earliest[group[0]] = min(earliest.get(group[0], day), day)
    by_day: dict[date, list[int]] = defaultdict(list)
    for pk, day in earliest.items():
        by_day[day].append(pk)
    recent = Q(pk__in=[])
    for day, runs in by_day.items():
        recent |= Q(experiment_id__in=sorted(runs), day__gte=day)
    seen: dict[tuple, set[date]] = defaultdict(set)

    def keep(row) -> bool:
        group = tuple(row[column] for column in LIFE_GROUP)
        # (A group with no sums, stored since they were read, is left out of both.)
        if group not in since or row["day"] < since[group]:
            return False
        seen[group].add(row["day"])
        return True

    evidence = _run_series(days.filter(recent), keep)
    gapped = sorted(
        {
            group[0]
            for group, (first, _last) in spans.items()
            if first < since[group] and len(seen[group]) < EVIDENCE_DAYS
        }
    )
    if gapped:
        evidence.update(
            _run_series(
                days.filter(experiment_id__in=gapped)
                .annotate(
                    latest=Window(
                        DenseRank(), partition_by=list(LIFE_GROUP), order_by=F("day").desc()
                    )
                )
                .filter(latest__lte=EVIDENCE_DAYS)
            )
        )
    return evidence


def storage_of_finished_runs_hours(
    *, start: date | None, end: date | None
) -> dict[str, SubjectHours]:
    last = _last_day()
    if last is None:
        return {}
    grace = timedelta(days=InsightsSettings.get().finished_run_storage_days)
    finished = Experiment.objects.filter(status__in=FINISHED, ended_at__isnull=False)
    if is_narrowed() and start is not None and end is not None:
        # Only the runs with storage in the period, or with hours of a finding there (storage
        # moved away from the run: its finding is refreshed, from its subject): each subject
        # sums its run's whole life.
        finished = finished.filter(
            Q(
                pk__in=DailyStorageCost.objects.filter(STORAGE, day__gte=start, day__lt=end)
                .exclude(experiment_id=None)
                .values("experiment_id")
            )
            | Q(
                pk__in=Finding.objects.filter(
                    kind=Kind.STORAGE_OF_FINISHED_RUNS,
                    hours__hour__gte=day_start(start),
                    hours__hour__lt=day_start(end),
                ).values("experiment_id")
            )
        )
    runs = {run.pk: run for run in finished if run.ended_at + grace <= day_start(last)}
    if not runs:
        return {}
    # The first day counted: the first whole UTC day from N days after the run ended.
    since = {}
    for pk, run in runs.items():
        moment = run.ended_at + grace
        first = moment.date()
        if day_start(first) < moment:
            first += timedelta(days=1)
        since[pk] = first
    # Each run's days from its first counted one. A run's finding is its whole life, but only
    # its sums (per bucket and currency), its last EVIDENCE_DAYS days and the recomputed period's
    # days are needed: read one by one, three years of every finished run's days were 5-7 s and
    # most of a month's recompute at that size (bench/three_years.py).
    # The first counted day in SQL, as `since` has it: the UTC date of the moment grace after
    # the end, rounded up to a whole day (a microsecond short of a day added, then truncated).
    first_counted = TruncDate(
        F("experiment__ended_at") + (grace + timedelta(days=1) - timedelta(microseconds=1)),
        tzinfo=UTC,
    )
    days = DailyStorageCost.objects.filter(
        STORAGE, experiment_id__in=sorted(runs), day__gte=first_counted, day__lte=last
    )
    lives, spans = _sums_by_bucket(days)
    # The last EVIDENCE_DAYS days of each run's series, and the period's days.
    evidence = _last_days(days, spans)
    in_period = Q()
    if start is not None:
        in_period &= Q(day__gte=start)
    if end is not None:
        in_period &= Q(day__lt=end)
    period = _run_series(days.filter(in_period))
    subjects: dict[str, SubjectHours] = {}
    for pk, (spend_by_bucket, totals) in sorted(lives.items()):
        run = runs[pk]
        key = run_key(pk)
        if not any(amount > 0 for amount in totals.values()):
            continue
        subject = SubjectHours(line_key=key, owner=(run.project_id, run.pk, None))
        for (line_key, currency), series in sorted(period.get(pk, {}).items()):
            for day in sorted(series.spend):
                amount = series.spend[day]
                _spread_day(
                    subject,
                    day=day,
                    currency=currency,
                    line_key=line_key,
                    spend=amount,
                    wasted=amount,
                    owner=series.owner(day),
                    window=(start, end),
                )
        # What it still stores: its buckets' bytes on its latest day with storage, per currency
        # (a bucket emptied months before counted with its own last day).
        latest: dict[str, date] = {}
        for (_line_key, currency), series in evidence[pk].items():
            if series.bytes:
                latest[currency] = max(latest.get(currency, date.min), max(series.bytes))
        held: dict[str, Decimal] = defaultdict(Decimal)
        days_rows = []
        for (_line_key, currency), series in sorted(evidence[pk].items()):
            held[currency] += series.bytes.get(latest.get(currency), ZERO)
            days_rows.extend(_days_evidence(series, dict(series.spend), currency))
        subject.resource_id = max(spend_by_bucket, key=lambda b: (spend_by_bucket[b], b))
        merged: dict[tuple, list] = {}
        for day, currency, stored, spend, wasted in days_rows:
            row = merged.setdefault((day, currency), [day, currency, ZERO, ZERO, ZERO])
            row[2] += Decimal(stored)
            row[3] += Decimal(spend)
            row[4] += Decimal(wasted)
        currency = max(totals, key=lambda c: (totals[c], c))
        # The ten that cost most, ties by name (the sums come in the database's order).
        costliest = sorted(spend_by_bucket.items(), key=lambda item: (-item[1], item[0]))[:10]
        subject.evidence = {
            "run": run.name,
            "run_status": run.status,
            "ended_at": run.ended_at.isoformat(),
            "grace_days": grace.days,
            "since": since[pk].isoformat(),
            "buckets": [{"bucket": bucket, "spend": _text(amount)} for bucket, amount in costliest],
            "storage_days": [
                [row[0], row[1], _text(row[2]), _text(row[3]), _text(row[4])]
                for _key, row in sorted(merged.items())
            ][-EVIDENCE_DAYS:],
        }
        subject.reason = (
            f"Run {run.name} {run.get_status_display().lower()} on {run.ended_at:%Y-%m-%d}: "
            f"{_gib(held[currency])} still stored {grace.days} days on, "
            f"{_money(totals[currency], currency)} since {since[pk]:%Y-%m-%d}"
        )[:500]
        subjects[key] = subject
    return subjects


# -- data_far_from_gpus ---------------------------------------------------------------------------


def _gpu_regions(runs: dict[int, Experiment]) -> dict[int, set[str]]:
    """The regions a run's GPU compute is billed in (one grouped read), else its own region."""
    regions: dict[int, set[str]] = defaultdict(set)
    for experiment_id, region in (
        CostLineItem.objects.filter(experiment_id__in=list(runs), cost_kind=CostKind.GPU_COMPUTE)
        .exclude(region_id="")
        .values_list("experiment_id", "region_id")
        .distinct()
        .order_by()
    ):
        regions[experiment_id].add(region)
    for pk, run in runs.items():
        if not regions.get(pk) and run.region:
            regions[pk].add(run.region)
    return regions


def _egress_price(provider: str, source: str, target: str) -> StorageEgressPrice | None:
    names = [f"{source} -> {target}", f"{source} <-> {target}", f"{target} <-> {source}"]
    return (
        StorageEgressPrice.objects.filter(
            provider=provider_key(provider), item="egress_inter_region", region__in=names
        )
        .order_by("price", "pk")
        .first()
    )


def _held_in(project_id: int | None, region: str, currency: str, day: date) -> Decimal:
    """The bytes the project holds in `region` on `day` (its data there to copy)."""
    stored = DailyStorageCost.objects.filter(
        STORAGE, project_id=project_id, region_id=region, billing_currency=currency, day=day
    ).aggregate(stored=ByteSum("stored_byte_seconds"))["stored"]
    return (stored or ZERO) / DAY_SECONDS


def data_far_from_gpus_hours(*, start: date | None, end: date | None) -> dict[str, SubjectHours]:
    last = _last_day()
    if last is None:
        return {}
    rows = list(
        DailyStorageCost.objects.filter(
            usage_class__in=(UsageClass.INTER_REGION, UsageClass.INTER_PROVIDER),
            experiment__isnull=False,
            experiment__kind__in=TRAINING,
            day__lte=last,
        )
        .exclude(transfer_from__in=("", UNKNOWN))
        .exclude(transfer_to__in=("", UNKNOWN))
        .values(
            "day",
            "experiment_id",
            "project_id",
            "deployment_id",
            "resource_id",
            "provider_name",
            "transfer_from",
            "transfer_to",
            "billing_currency",
        )
        .annotate(moved=ByteSum("moved_bytes"), cost=Sum("effective_cost"))
        .order_by()
    )
    if not rows:
        return {}
    runs = Experiment.objects.in_bulk({row["experiment_id"] for row in rows})
    regions = _gpu_regions(runs)
    recent = last - timedelta(days=RECENT_DAYS - 1)
    subjects: dict[str, SubjectHours] = {}
    pairs: dict[str, dict[tuple, dict]] = defaultdict(dict)
    for row in sorted(rows, key=lambda r: (r["experiment_id"], r["day"], r["transfer_from"])):
        source, target = row["transfer_from"], row["transfer_to"]
        pk = row["experiment_id"]
        if source == target or target not in regions.get(pk, set()):
            continue
        run = runs[pk]
        key = run_key(pk)
        subject = subjects.get(key)
        if subject is None:
            subject = subjects[key] = SubjectHours(
                line_key=key, owner=(run.project_id, run.pk, None)
            )
        currency = row["billing_currency"]
        line_key = row["resource_id"] or f"transfer:{source}>{target}"
        owner = (row["project_id"], pk, row["deployment_id"])
        _spread_day(
            subject,
            day=row["day"],
            currency=currency,
            line_key=line_key,
            spend=row["cost"],
            wasted=row["cost"],
            owner=owner,
            window=(start, end),
        )
        pair = pairs[key].setdefault(
            (source, target, currency, row["provider_name"]),
            {"bytes": ZERO, "spend": ZERO, "bytes_30": ZERO, "spend_30": ZERO, "days": {}},
        )
        pair["bytes"] += row["moved"]
        pair["spend"] += row["cost"]
        pair["days"][row["day"]] = pair["days"].get(row["day"], ZERO) + row["cost"]
        if row["day"] >= recent:
            pair["bytes_30"] += row["moved"]
            pair["spend_30"] += row["cost"]
    for key, subject in list(subjects.items()):
        run = runs[int(key.split(":", 1)[1])]
        listed = []
        for (source, target, currency, provider), pair in sorted(
            pairs[key].items(), key=lambda item: -item[1]["spend"]
        ):
            held = _held_in(run.project_id, source, currency, last)
            price = _egress_price(provider, source, target)
            copy: dict = {"bytes": _text(held.quantize(Decimal(1)))}
            if price is None and pair["bytes"] > 0:
                # No catalogue price for the pair: the bill's own rate for it (its egress paid
                # ÷ the bytes it moved), in the bill's currency, and said so.
                copy.update(
                    {
                        "cost": _text((held * pair["spend"] / pair["bytes"]).quantize(PLACES)),
                        "price_per_gb": _text(
                            (pair["spend"] * GIB / pair["bytes"]).quantize(PLACES)
                        ),
                        "source": "the bill's own rate for this pair (no catalogue price)",
                    }
                )
            elif price is None:
                copy["note"] = "no catalogue price for this pair"
            elif price.currency != currency:
                copy["note"] = f"no price in {currency}"
            else:
                # The catalogue prices a GB as the provider's own (2^30 bytes for AWS and GCP).
                cost = held / GIB * price.price
                copy.update(
                    {
                        "price_per_gb": _text(price.price),
                        "cost": _text(cost.quantize(PLACES)),
                        "source": price.source,
                    }
                )
            listed.append(
                {
                    "from": source,
                    "to": target,
                    "currency": currency,
                    "bytes": _text(pair["bytes"].quantize(Decimal(1))),
                    "spend": _text(pair["spend"]),
                    "bytes_last_30_days": _text(pair["bytes_30"].quantize(Decimal(1))),
                    "spend_last_30_days": _text(pair["spend_30"]),
                    "copy": copy,
                }
            )
        subject.resource_id = run.name
        subject.evidence = {
            "run": run.name,
            "gpu_regions": sorted(regions.get(run.pk, set())),
            "pairs": listed,
        }
        top = listed[0]
        copy = top["copy"]
        copy_text = (
            f"copying its {_gib(Decimal(copy['bytes']))} there once: "
            f"{_money(Decimal(copy['cost']), top['currency'])}"
            if "cost" in copy
            else f"copying its data there once: {copy['note']}"
        )
        subject.reason = (
            f"{run.name} trains in {top['to']} on data from {top['from']}: "
            f"{_money(Decimal(top['spend_last_30_days']), top['currency'])} of egress in the last "
            f"{RECENT_DAYS} days; {copy_text}"
        )[:500]
    return subjects


# -- vector_db_growth -----------------------------------------------------------------------------


def vector_db_growth_hours(*, start: date | None, end: date | None) -> dict[str, SubjectHours]:
    last = _last_day()
    if last is None:
        return {}
    limit = InsightsSettings.get().vector_db_growth_percent_per_month
    first = last - timedelta(days=RECENT_DAYS)
    subjects: dict[str, SubjectHours] = {}
    condition = STORAGE & Q(data_class=DataClass.VECTOR_DB)
    for (line_key, currency), series in sorted(_series(condition, since=first, until=last).items()):
        before, now = series.bytes.get(first, ZERO), series.bytes.get(last, ZERO)
        if not before or not now:
            continue
        growth = (now - before) / before * 100
        if growth <= limit:
            continue
        allowed = before * (1 + limit / 100)
        excess = now - allowed
        # excess × the price a byte-day on the last day (its spend ÷ its bytes) × 30
        saving = (excess * series.spend.get(last, ZERO) * 30 / now).quantize(PLACES)
        if saving <= 0:
            continue
        subjects[line_key] = SubjectHours(
            line_key=line_key,
            resource_id=line_key,
            savings_per_month={currency: saving},
            owner=series.owner(last),
            evidence={
                "storage_days": _days_evidence(series, {}, currency),
                "bytes_before": _text(before.quantize(Decimal(1))),
                "bytes_now": _text(now.quantize(Decimal(1))),
                "growth_percent": str(growth.quantize(Decimal("0.1"))),
                "limit_percent": _text(limit),
                "bytes_above_pace": _text(excess.quantize(Decimal(1))),
            },
            reason=(
                f"Vector database grew {growth.quantize(Decimal('0.1'))}% in {RECENT_DAYS} days "
                f"(limit {_text(limit)}% a month): {_gib(excess)} above that pace cost "
                f"{_money(saving, currency)} a month"
            )[:500],
        )
    return subjects


# -- storage_spike --------------------------------------------------------------------------------


def storage_spike_hours(*, start: date | None, end: date | None) -> dict[str, SubjectHours]:
    last = _last_day()
    if last is None:
        return {}
    settings = InsightsSettings.get()
    weeks, factor = settings.storage_spike_weeks, settings.storage_spike_factor
    first = last - timedelta(days=7 * (weeks + TREND_WEEKS) - 1)
    subjects: dict[str, SubjectHours] = {}
    for (line_key, currency), series in sorted(_series(STORAGE, since=first, until=last).items()):
        spikes = []
        wasted: dict[date, Decimal] = {}
        for number in range(weeks):
            _mean, spend, _days = series.week(last, number)
            before = [series.week(last, number + 1 + n) for n in range(TREND_WEEKS)]
            if any(days == 0 for _m, _s, days in before):
                continue  # no trend to stand on
            trend = sum((s for _m, s, _d in before), ZERO) / TREND_WEEKS
            if trend <= 0 or spend < trend * factor:
                continue
            week_end = last - timedelta(days=7 * number)
            for i in range(7):
                day = week_end - timedelta(days=6 - i)
                above = series.spend.get(day, ZERO) - trend / 7
                if above > 0:
                    wasted[day] = above.quantize(PLACES)
            spikes.append(
                {
                    "week_start": (week_end - timedelta(days=6)).isoformat(),
                    "spend": _text(spend),
                    "trend": _text(trend.quantize(PLACES)),
                    "times_trend": _text((spend / trend).quantize(Decimal("0.01"))),
                }
            )
        if not any(wasted.values()):
            continue
        subject = subjects[line_key] = SubjectHours(
            line_key=line_key, resource_id=line_key, owner=series.owner(last)
        )
        for day, amount in sorted(wasted.items()):
            _spread_day(
                subject,
                day=day,
                currency=currency,
                line_key=line_key,
                spend=series.spend.get(day, ZERO),
                wasted=amount,
                owner=series.owner(day),
                window=(start, end),
            )
        total = sum(wasted.values(), ZERO)
        top = max(spikes, key=lambda s: Decimal(s["times_trend"]))
        subject.evidence = {
            "storage_days": _days_evidence(series, wasted, currency),
            "spikes": spikes,
            "factor": _text(factor),
        }
        subject.reason = (
            f"Storage the week of {top['week_start']} was {top['times_trend']}x its trend: "
            f"{_money(total, currency)} above it"
        )[:500]
    return subjects


KIND_HOURS = {
    Kind.STORAGE_OF_FINISHED_RUNS: storage_of_finished_runs_hours,
    Kind.DATA_FAR_FROM_GPUS: data_far_from_gpus_hours,
    Kind.STORAGE_SPIKE: storage_spike_hours,
    Kind.CHECKPOINTS_ONLY_GROW: checkpoints_only_grow_hours,
    Kind.VECTOR_DB_GROWTH: vector_db_growth_hours,
}
