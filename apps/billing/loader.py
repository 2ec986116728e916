"""Writing line items and rollups in bulk: COPY on PostgreSQL, a portable insert elsewhere.

The COPY runs in a thread of its own fed through a one-slot queue, so the next batch is parsed and
attributed while the server loads this one; at most two batches are in memory.
"""

import contextlib
import json
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from decimal import Decimal
from queue import Queue

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
from django.db import connection, models
from django.db.models import (
    Case,
    Count,
    DecimalField,
    F,
    Max,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce, Lower, TruncDate, TruncMonth

from .model_api_rollup import ModelApiRollup, model_api_rollup_rebuild
from .models import (
    CostLineItem,
    DailyBucketStorage,
    DailyCost,
    DailyModelApiCost,
    DailyProjectCost,
    DailyResourceCost,
    DailyStorageCost,
    DailyStorageSummary,
    DailyStorageTotal,
    Delivery,
    MonthlyCost,
    MonthlyResourceCost,
    MonthlyStorageSummary,
)
from .normalise import DEC, HOUR_UNITS, TEXT_SUFFIX
from .storage import STORAGE_LINE_COLUMNS, ByteSum, StorageFacts, UsageClass, storage_rows
from .storage import group as storage_group

NAIVE = pa.timestamp("us")
SECONDS = pa.timestamp("s")


def _columns(model) -> list[str]:
    return [f.column for f in model._meta.concrete_fields if f.column != "id"]


LINE_COLUMNS = _columns(CostLineItem)
DAILY_COLUMNS = _columns(DailyCost)
RESOURCE_COLUMNS = _columns(DailyResourceCost)
STORAGE_COLUMNS = _columns(DailyStorageCost)
_LINE_FIELDS = {f.column: f for f in CostLineItem._meta.concrete_fields}
# Text columns stored as '' rather than NULL (Django's convention for blank text).
BLANK_TEXT = {
    f.column
    for f in CostLineItem._meta.concrete_fields
    if f.get_internal_type() in {"CharField", "TextField"} and not f.null
}

DAILY_KEYS = [
    "delivery_id",
    "day",
    "project_id",
    "experiment_id",
    "deployment_id",
    "workload",
    "cost_kind",
    "provider_name",
    "region_id",
    "service_name",
    "pricing_category",
    "billing_currency",
]
TEXT_KEYS = {
    "resource_id",
    "resource_name",
    "billing_account_id",
    "sub_account_id",
    "provider_name",
    "service_name",
    "region_id",
    "workload",
    "cost_kind",
    "billing_currency",
    "pricing_category",
}
RESOURCE_KEYS = [
    "delivery_id",
    "day",
    "resource_id",
    "billing_account_id",
    "sub_account_id",
    "provider_name",
    "service_name",
    "region_id",
    "project_id",
    "experiment_id",
    "deployment_id",
    "workload",
    "cost_kind",
    "billing_currency",
]


def lines_for_database(lines: pa.Table) -> pa.Table:
    """The line columns in the table's order and in the forms the database takes."""
    arrays = []
    for column in LINE_COLUMNS:
        array = lines[column]
        if pa.types.is_decimal(array.type) and column + TEXT_SUFFIX in lines.column_names:
            text = lines[column + TEXT_SUFFIX]
            if text.null_count > array.null_count:  # split parts have numbers of their own
                text = pc.coalesce(text, pc.cast(array, pa.string()))
            array = text
        elif pa.types.is_timestamp(array.type):
            # Formatting zone-aware timestamps is slow in Arrow; the session is UTC. Whole
            # seconds (nearly always) are sent without the microseconds.
            array = pc.cast(array, NAIVE)
            with contextlib.suppress(pa.ArrowInvalid):
                array = pc.cast(array, SECONDS)
        elif column in ("tags", "extra"):
            array = pc.fill_null(array, "{}")
        elif column in BLANK_TEXT:
            array = pc.fill_null(array, "")
        arrays.append(array)
    return pa.table(arrays, names=LINE_COLUMNS)


def _csv(table: pa.Table) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    pcsv.write_csv(table, sink, pcsv.WriteOptions(include_header=False, batch_size=16_384))
    return sink.getvalue()


class _CopyFeeder:
    """Feeds one COPY from a thread; the caller keeps working while the server loads."""

    def __init__(self, cursor, sql: str):
        self._context = cursor.copy(sql)
        self._copy = self._context.__enter__()
        self._queue: Queue = Queue(maxsize=1)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="costsite-copy", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (buffer := self._queue.get()) is not None:
            if self._error is None:
                try:
                    self._copy.write(memoryview(buffer))
                except BaseException as exc:  # handed to the caller on its next write
                    self._error = exc

    def write(self, buffer: pa.Buffer) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(buffer)

    def close(self, failure: BaseException | None = None) -> None:
        self._queue.put(None)
        self._thread.join()
        error = failure or self._error
        if error is not None:
            self._context.__exit__(type(error), error, error.__traceback__)
            if failure is None:
                raise error
            return
        self._context.__exit__(None, None, None)


class LineSink:
    """Where line items go. `pause()` before any other statement on the connection."""

    def write(self, lines: pa.Table) -> None:
        raise NotImplementedError

    def pause(self, failure: BaseException | None = None) -> None:
        """Finish what was written (or abandon it on failure); writing again resumes."""

    @staticmethod
    def for_connection() -> "LineSink":
        if connection.vendor == "postgresql":
            return CopyLineSink()
        return InsertLineSink()


class CopyLineSink(LineSink):
    def __init__(self):
        self._feeder: _CopyFeeder | None = None
        self._cursor = None

    def write(self, lines: pa.Table) -> None:
        if self._feeder is None:
            self._cursor = connection.cursor()
            columns = ", ".join(connection.ops.quote_name(c) for c in LINE_COLUMNS)
            self._feeder = _CopyFeeder(
                self._cursor.cursor,
                f"COPY {CostLineItem._meta.db_table} ({columns}) FROM STDIN WITH (FORMAT csv)",
            )
        self._feeder.write(_csv(lines_for_database(lines)))

    def pause(self, failure: BaseException | None = None) -> None:
        if self._feeder is not None:
            feeder, self._feeder = self._feeder, None
            try:
                feeder.close(failure)
            finally:
                self._cursor.close()


class InsertLineSink(LineSink):
    """Plain parameterised INSERTs: SQLite and anything without COPY."""

    def write(self, lines: pa.Table) -> None:
        table = lines_for_database(lines)
        _insert(CostLineItem._meta.db_table, LINE_COLUMNS, _python_rows(table))


def _python_rows(table: pa.Table) -> Iterable[tuple]:
    """Rows as the database adapter takes them (datetimes as Django stores them)."""
    adapt_datetime = connection.ops.adapt_datetimefield_value
    adapt_date = connection.ops.adapt_datefield_value
    adapt_decimal = connection.ops.adapt_decimalfield_value
    converters = []
    for field in table.schema:
        if pa.types.is_timestamp(field.type):
            converters.append(
                lambda v: None if v is None else adapt_datetime(v.replace(tzinfo=UTC))
            )
        elif pa.types.is_date(field.type):
            converters.append(adapt_date)
        elif pa.types.is_decimal(field.type):
            converters.append(lambda v: None if v is None else adapt_decimal(v))
        else:
            converters.append(None)
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    for i, convert in enumerate(converters):
        if convert is not None:
            columns[i] = [convert(v) for v in columns[i]]
    return zip(*columns, strict=True)


def _insert(db_table: str, columns: list[str], rows: Iterable[tuple]) -> None:
    quoted = ", ".join(connection.ops.quote_name(c) for c in columns)
    marks = ", ".join(["%s"] * len(columns))
    with connection.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {db_table} ({quoted}) VALUES ({marks})", list(rows))


def copy_table(db_table: str, table: pa.Table) -> None:
    if not table.num_rows:
        return
    if connection.vendor != "postgresql":
        _insert(db_table, table.column_names, _python_rows(table))
        return
    with connection.cursor() as cursor:
        copy_into(cursor.cursor, db_table, table)


def copy_into(cursor, db_table: str, table: pa.Table) -> None:
    """COPY the table's rows into `db_table` through a psycopg cursor (PostgreSQL)."""
    columns = ", ".join(connection.ops.quote_name(c) for c in table.column_names)
    with cursor.copy(f"COPY {db_table} ({columns}) FROM STDIN WITH (FORMAT csv)") as copy:
        copy.write(memoryview(_csv(table)))


# -- rollups ---------------------------------------------------------------------------------


def line_days(lines: pa.Table) -> pa.Array:
    """The UTC day each line counts on: the day its charge period starts."""
    return pc.cast(pc.cast(lines["charge_period_start"], NAIVE), pa.date32())


def _filled(lines: pa.Table, names: list[str]) -> dict[str, pa.Array]:
    """Key columns as the database holds them ('' for blank text)."""
    out = {}
    for name in names:
        if name == "day":
            out[name] = line_days(lines)
        elif name in BLANK_TEXT:
            out[name] = pc.fill_null(lines[name], "")
        else:
            out[name] = lines[name]
    return out


FINE_KEYS = list(dict.fromkeys([*RESOURCE_KEYS, *DAILY_KEYS, "resource_name"]))
FINE_SUMS = ["effective_cost", "billed_cost", "list_cost", "consumed_hours", "line_items"]


class _Codes:
    """Small integers for a text column's values, the same across batches: the running sums
    hold codes, not strings (a tenth of the memory, and faster to group)."""

    def __init__(self):
        self.values = pa.array([], pa.string())

    def encode(self, array: pa.Array | pa.ChunkedArray) -> pa.Array:
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        codes = pc.index_in(array, value_set=self.values)
        if codes.null_count:
            new = pc.unique(array.filter(pc.is_null(codes)))
            self.values = pa.concat_arrays([self.values, new])
            codes = pc.index_in(array, value_set=self.values)
        return codes

    def decode(self, codes: pa.Array) -> pa.Array:
        return pc.take(self.values, codes)


class RollupAccumulator:
    """Sums of the lines written so far, by day and every key either rollup needs.

    One group-by per batch at the finest grain (day × resource × attribution × service...),
    merged into running sums kept per day: each merge is small, and so is the memory a group-by
    needs (merging all days at once costs 60-100 MB at a few hundred thousand groups). The two
    rollups are cut from the sums when written. Memory stays bounded whatever the file: past
    FLUSH_AT groups the caller writes what it has (`flush`) and the sums start again, so a
    delivery may own several rollup rows for one key (rollups are always aggregated).
    """

    MERGE_AT = 20_000  # fresh partial rows merged into the running sums
    FLUSH_AT = 400_000  # running sums written out and started again

    def __init__(self, storage_facts: StorageFacts | None = None):
        self._days: dict[object, pa.Table] = {}
        self._fresh: dict[object, list[pa.Table]] = {}
        self._fresh_rows = 0
        self._codes = {name: _Codes() for name in FINE_KEYS if name in TEXT_KEYS}
        # The storage rollup's sums: storage and network lines only, few after grouping.
        self._storage_facts = storage_facts
        self._storage: list[pa.Table] = []
        self._storage_rows = 0
        self.model_api = ModelApiRollup()

    def _add_storage(self, lines: pa.Table) -> None:
        if self._storage_facts is None:
            self._storage_facts = StorageFacts.load()
        rows = storage_rows(lines, self._storage_facts)
        if rows.num_rows:
            self._storage.append(rows)
            self._storage_rows += rows.num_rows
        if len(self._storage) > 1 and self._storage_rows > self.MERGE_AT:
            self._storage = [storage_group(pa.concat_tables(self._storage))]
            self._storage_rows = self._storage[0].num_rows

    def _write_storage(self, delivery_ids: list[int] | None) -> None:
        if not self._storage:
            return
        rows = storage_group(pa.concat_tables(self._storage))
        kept = rows.slice(0, 0)
        if delivery_ids is not None:
            # Only these deliveries are settled: the others' sums wait for their own write.
            wanted = pc.is_in(rows["delivery_id"], value_set=pa.array(delivery_ids, pa.int64()))
            rows, kept = rows.filter(wanted), rows.filter(pc.invert(wanted))
        copy_table(DailyStorageCost._meta.db_table, rows.select(STORAGE_COLUMNS))
        self._storage = [kept] if kept.num_rows else []
        self._storage_rows = kept.num_rows

    def add(self, lines: pa.Table) -> None:
        if not lines.num_rows:
            return
        self.model_api.add(lines)
        zero = pa.scalar(Decimal(0), DEC)
        units = pc.utf8_lower(pc.fill_null(lines["consumed_unit"], ""))
        hours = pc.if_else(
            pc.is_in(units, value_set=pa.array(HOUR_UNITS)),
            pc.fill_null(lines["consumed_quantity"], zero),
            zero,
        )
        keys = _filled(lines, FINE_KEYS)
        for name, codes in self._codes.items():
            keys[name] = codes.encode(keys[name])
        fine = pa.table(
            {
                **keys,
                "effective_cost": lines["effective_cost"],
                "billed_cost": lines["billed_cost"],
                "list_cost": pc.fill_null(lines["list_cost"], zero),
                "consumed_hours": hours,
                "line_items": pa.array([1] * lines.num_rows, pa.int64()),
            }
        )
        partial = _sum(fine, FINE_KEYS, FINE_SUMS)
        self._add_storage(lines)
        days = pc.unique(partial["day"]).to_pylist()
        for day in days:
            part = partial if len(days) == 1 else partial.filter(pc.equal(partial["day"], day))
            self._fresh.setdefault(day, []).append(part)
        self._fresh_rows += partial.num_rows
        if self._fresh_rows > self.MERGE_AT:
            self._merge()

    def _merge(self) -> None:
        for day, parts in self._fresh.items():
            if day in self._days:
                parts = [self._days[day], *parts]
            self._days[day] = (
                parts[0] if len(parts) == 1 else _sum(pa.concat_tables(parts), FINE_KEYS, FINE_SUMS)
            )
        self._fresh, self._fresh_rows = {}, 0

    @property
    def needs_flush(self) -> bool:
        return sum(t.num_rows for t in self._days.values()) > self.FLUSH_AT

    def flush(self) -> None:
        """Write the sums of every delivery so far and start again."""
        self._merge()
        self._write(list(self._days.values()))
        self._write_storage(None)
        self._days = {}
        self._codes = {name: _Codes() for name in self._codes}

    def write(self, *, delivery_ids: list[int]) -> None:
        """Insert the sums of these deliveries' lines into the rollup tables."""
        self._merge()
        self.model_api.write(delivery_ids=delivery_ids)
        wanted = pa.array(delivery_ids, pa.int64())
        self._write(
            [t.filter(pc.is_in(t["delivery_id"], value_set=wanted)) for t in self._days.values()]
        )
        self._write_storage(delivery_ids)

    def _write(self, days: list[pa.Table]) -> None:
        """Cut both rollups from the sums, day by day, and copy them out in modest batches."""
        daily: list[pa.Table] = []
        resource: list[pa.Table] = []
        for position, fine in enumerate(days, start=1):
            if fine.num_rows:
                for name, codes in self._codes.items():
                    fine = fine.set_column(
                        fine.column_names.index(name),
                        name,
                        codes.decode(fine[name].combine_chunks()),
                    )
                daily.append(_sum(fine, DAILY_KEYS, FINE_SUMS))
                with_resource = fine.filter(pc.not_equal(fine["resource_id"], ""))
                resource.append(
                    _sum(
                        with_resource,
                        RESOURCE_KEYS,
                        ["effective_cost", "billed_cost", "line_items"],
                        maximum="resource_name",
                    )
                )
            if sum(t.num_rows for t in resource) > 20_000 or position == len(days):
                if daily:
                    copy_table(
                        DailyCost._meta.db_table, pa.concat_tables(daily).select(DAILY_COLUMNS)
                    )
                if resource:
                    copy_table(
                        DailyResourceCost._meta.db_table,
                        pa.concat_tables(resource).select(RESOURCE_COLUMNS),
                    )
                daily, resource = [], []


def _sum(table: pa.Table, keys: list[str], sums: list[str], maximum: str = "") -> pa.Table:
    aggregations = [(c, "sum") for c in sums] + ([(maximum, "max")] if maximum else [])
    grouped = table.group_by(keys, use_threads=False).aggregate(aggregations)
    out = {k: grouped[k] for k in keys}
    out.update({c: grouped[f"{c}_sum"] for c in sums})
    if maximum:
        out[maximum] = grouped[f"{maximum}_max"]
    return pa.table(out)


def rollups_rebuild(*, delivery_id: int, start=None, end=None) -> None:
    """Recompute one delivery's rollup rows from its line items (for days in [start, end)), and
    its monthly and per-project rows from the daily ones (all its days: they are few)."""
    lines = CostLineItem.objects.of_delivery(Delivery.objects.get(pk=delivery_id))
    daily = DailyCost.objects.filter(delivery_id=delivery_id)
    resource = DailyResourceCost.objects.filter(delivery_id=delivery_id)
    if start is not None:
        lines = lines.filter(charge_period_start__gte=start, charge_period_start__lt=end)
        daily = daily.filter(day__gte=start.date(), day__lt=end.date())
        resource = resource.filter(day__gte=start.date(), day__lt=end.date())
    daily.delete()
    resource.delete()
    storage_rebuild(delivery_id=delivery_id, start=start, end=end)
    model_api_rollup_rebuild(delivery_id=delivery_id, start=start, end=end)
    money = DecimalField(max_digits=38, decimal_places=15)
    zero = Value(Decimal(0), output_field=money)
    day = TruncDate("charge_period_start", tzinfo=UTC)
    _insert_select(
        DailyCost,
        lines.annotate(day=day)
        .alias(unit=Lower("consumed_unit"))
        .values(*DAILY_KEYS)
        .annotate(
            effective_cost=Sum("effective_cost"),
            billed_cost=Sum("billed_cost"),
            list_cost=Coalesce(Sum("list_cost"), zero),
            consumed_hours=Coalesce(
                Sum(
                    Case(
                        When(unit__in=HOUR_UNITS, then=F("consumed_quantity")),
                        default=zero,
                        output_field=money,
                    )
                ),
                zero,
            ),
            line_items=Count("id"),
        )
        .order_by(),
    )
    _insert_select(
        DailyResourceCost,
        lines.exclude(resource_id="")
        .annotate(day=day)
        .values(*RESOURCE_KEYS)
        .annotate(
            effective_cost=Sum("effective_cost"),
            billed_cost=Sum("billed_cost"),
            line_items=Count("id"),
            resource_name=Max("resource_name"),
        )
        .order_by(),
    )
    # What is summed from the daily rows (the monthly rows, the per-project days) follows them.
    monthly_rebuild(delivery_id=delivery_id)


def rollup_days_delete(*, delivery_id: int, start: datetime, end: datetime) -> None:
    """Delete one delivery's day rollup rows for days in [start, end): what RollupAccumulator
    writes (the monthly and summary rows follow the daily ones, rebuilt after)."""
    for model in (DailyCost, DailyResourceCost, DailyStorageCost, DailyModelApiCost):
        model.objects.filter(
            delivery_id=delivery_id, day__gte=start.date(), day__lt=end.date()
        ).delete()


def storage_rebuild(*, delivery_id: int, start=None, end=None, facts=None) -> None:
    """Recompute one delivery's storage rollup rows (for days in [start, end)).

    The storage and network lines are summed per day and wording in the database first (hourly
    lines become daily sums: far fewer rows), then classified as an import does."""
    rows = DailyStorageCost.objects.filter(delivery_id=delivery_id)
    if start is not None:
        rows = rows.filter(day__gte=start.date(), day__lt=end.date())
    rows.delete()
    delivery = Delivery.objects.get(pk=delivery_id)
    table = f"{CostLineItem._meta.db_table}"
    where = ["delivery_id = %s", "cost_kind IN ('storage', 'network')"]
    params: list = [delivery_id]
    if delivery.last_line_id:
        where.append("id > %s AND id <= %s")
        params += [delivery.first_line_id, delivery.last_line_id]
    if start is not None:
        where.append("charge_period_start >= %s AND charge_period_start < %s")
        params += [start, end]
    write_storage_from_sql(table, " AND ".join(where), params, facts or StorageFacts.load())
    storage_summary_rebuild(delivery_id=delivery_id)


SUMMARY_KEYS = [
    "delivery_id",
    "data_class",
    "usage_class",
    "transfer_from",
    "transfer_to",
    "billing_currency",
]
BUCKET_KEYS = ["delivery_id", "day", "resource_id", "project_id", "data_class", "billing_currency"]


STORAGE_SUMMARIES = (
    DailyStorageSummary,
    MonthlyStorageSummary,
    DailyStorageTotal,
    DailyBucketStorage,
)


def storage_summary_drop(*, delivery_id: int | None) -> None:
    """Delete a delivery's rows (every delivery's: None) of the storage page's rollups."""
    mine = Q() if delivery_id is None else Q(delivery_id=delivery_id)
    for model in STORAGE_SUMMARIES:
        model.objects.filter(mine).delete()


def storage_summary_rebuild(*, delivery_id: int | None) -> None:
    """Recompute a delivery's rows (every delivery's: None) of the storage page's rollups from its
    storage rollup rows, after those changed: per project and day (DailyStorageSummary), then per
    project and month and for the whole organisation per day (both from those), and per bucket
    and day (DailyBucketStorage). A grouped INSERT ... SELECT each, of a few thousand rows a
    month. Rows are written in order of day, so that a page reading a few days reads few pages.
    """
    storage_summary_drop(delivery_id=delivery_id)
    mine = Q() if delivery_id is None else Q(delivery_id=delivery_id)
    # SQLite: byte sums are float totals, as its decimals are (a month of a large bucket's
    # byte-seconds is past a 64-bit integer).
    sums = {
        "effective_cost": Sum("effective_cost"),
        "stored_byte_seconds": ByteSum("stored_byte_seconds"),
        "moved_bytes": ByteSum("moved_bytes"),
    }
    storage = DailyStorageCost.objects.filter(mine)
    daily = DailyStorageSummary.objects.filter(mine)
    _insert_select(
        DailyStorageSummary,
        storage.values(*SUMMARY_KEYS, "day", "project_id").annotate(**sums).order_by("day"),
    )
    _insert_select(
        MonthlyStorageSummary,
        daily.annotate(month=TruncMonth("day"))
        .values(*SUMMARY_KEYS, "month", "project_id")
        .annotate(**sums)
        .order_by("month"),
    )
    _insert_select(
        DailyStorageTotal, daily.values(*SUMMARY_KEYS, "day").annotate(**sums).order_by("day")
    )
    _insert_select(
        DailyBucketStorage,
        storage.filter(usage_class__in=UsageClass.STORAGE)
        .exclude(resource_id="")
        .values(*BUCKET_KEYS)
        .annotate(
            effective_cost=Sum("effective_cost"),
            stored_byte_seconds=ByteSum("stored_byte_seconds"),
        )
        .order_by("day"),
    )


def write_storage_from_sql(table: str, where: str, params: list, facts: StorageFacts) -> int:
    """Group lines of `table` matching `where` per day and wording in SQL, classify, write.

    Shared by the rebuild and by the migration that backfilled the storage rollup."""
    grouped = ", ".join(c for c in STORAGE_LINE_COLUMNS if c not in SUMMED)
    # SQLite (the demo) keeps datetimes as UTC text: its date() is the UTC day.
    if connection.vendor == "postgresql":
        day_sql = "date_trunc('day', charge_period_start AT TIME ZONE 'UTC')"
    else:
        day_sql = "date(charge_period_start)"
    sql = (
        f"SELECT {grouped}, {day_sql} AS day0, "
        "SUM(effective_cost), SUM(billed_cost), SUM(consumed_quantity), SUM(pricing_quantity), "
        f"COUNT(*) FROM {table} WHERE {where} "
        f"GROUP BY {grouped}, day0"
    )
    names = [c for c in STORAGE_LINE_COLUMNS if c not in SUMMED]
    written = 0
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        while batch := cursor.fetchmany(50_000):
            columns = list(zip(*batch, strict=True))
            data = {name: list(columns[i]) for i, name in enumerate(names)}
            offset = len(names)
            data["charge_period_start"] = [_utc_day(d) for d in columns[offset]]
            for i, name in enumerate(
                ["effective_cost", "billed_cost", "consumed_quantity", "pricing_quantity"]
            ):
                data[name] = pa.array([_decimal(v) for v in columns[offset + 1 + i]], DEC)
            data["line_items"] = pa.array(columns[offset + 5], pa.int64())
            for name in ("tags", "extra"):
                data[name] = [
                    v if isinstance(v, str) or v is None else _json(v) for v in data[name]
                ]
            lines = pa.table(
                {
                    **{k: pa.array(v) for k, v in data.items() if not isinstance(v, pa.Array)},
                    **{k: v for k, v in data.items() if isinstance(v, pa.Array)},
                }
            )
            rows = storage_rows(lines, facts)
            copy_table(DailyStorageCost._meta.db_table, rows.select(STORAGE_COLUMNS))
            written += rows.num_rows
    return written


SUMMED = {
    "effective_cost",
    "billed_cost",
    "consumed_quantity",
    "pricing_quantity",
    "charge_period_start",
}


def _utc_day(value) -> datetime:
    """A grouped day as PostgreSQL (a naive datetime) or SQLite (a 'YYYY-MM-DD' text) gives it."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC)


def _decimal(value) -> Decimal | None:
    """A sum as the database gives it: SQLite's are floats or integers, not Decimals."""
    if value is None or isinstance(value, Decimal):
        return value
    return Decimal(str(value))


def _json(value) -> str:
    return json.dumps(value, separators=(",", ":"))


MONTHLY_SUMS = ["effective_cost", "billed_cost", "list_cost", "consumed_hours", "line_items"]


PROJECT_KEYS = [
    "delivery_id",
    "day",
    "project_id",
    "workload",
    "cost_kind",
    "provider_name",
    "billing_currency",
]


def monthly_rebuild(*, delivery_id: int) -> None:
    """Recompute what is summed from a delivery's daily rows (after they changed): its monthly
    rows and its daily per-project rows."""
    MonthlyCost.objects.filter(delivery_id=delivery_id).delete()
    keys = ["month" if key == "day" else key for key in DAILY_KEYS]
    _insert_select(
        MonthlyCost,
        DailyCost.objects.filter(delivery_id=delivery_id)
        .annotate(month=TruncMonth("day"))
        .values(*keys)
        .annotate(**{name: Sum(name) for name in MONTHLY_SUMS})
        .order_by(),
    )
    project_daily_rebuild(delivery_id=delivery_id)
    resource_monthly_rebuild(delivery_id=delivery_id)


RESOURCE_MONTH_KEYS = [
    "delivery_id",
    "month",
    "resource_id",
    "project_id",
    "provider_name",
    "billing_currency",
]
RESOURCE_MONTH_NAMES = [
    "resource_name",
    "billing_account_id",
    "sub_account_id",
    "service_name",
    "region_id",
]


def resource_monthly_rebuild(*, delivery_id: int | None) -> None:
    """A delivery's MonthlyResourceCost rows from its daily resource rows (None: every
    delivery's, the migration's backfill)."""
    _summed_rebuild(
        target=MonthlyResourceCost,
        source=DailyResourceCost,
        delivery_id=delivery_id,
        summed=lambda daily: (
            daily.annotate(month=TruncMonth("day"))
            .values(*RESOURCE_MONTH_KEYS)
            .annotate(
                effective_cost=Sum("effective_cost"),
                billed_cost=Sum("billed_cost"),
                **{name: Max(name) for name in RESOURCE_MONTH_NAMES},
            )
            .order_by()
        ),
    )


def project_daily_rebuild(*, delivery_id: int | None) -> None:
    """A delivery's DailyProjectCost rows from its daily rows (None: every delivery's, the
    migration's backfill)."""
    _summed_rebuild(
        target=DailyProjectCost,
        source=DailyCost,
        delivery_id=delivery_id,
        summed=lambda daily: (
            daily.values(*PROJECT_KEYS)
            .annotate(**{name: Sum(name) for name in MONTHLY_SUMS})
            .order_by()
        ),
    )


def _summed_rebuild(
    *,
    target: type[models.Model],
    source: type[models.Model],
    delivery_id: int | None,
    summed: Callable[[QuerySet], QuerySet],
) -> None:
    """Replace `target`'s rows of a delivery (None: of every delivery) by what `summed` (a
    grouped values() query, its names the target's columns) makes of `source`'s."""
    rows, old = source.objects.all(), target.objects.all()
    if delivery_id is not None:
        rows, old = rows.filter(delivery_id=delivery_id), old.filter(delivery_id=delivery_id)
    old.delete()
    _insert_select(target, summed(rows))


def _insert_select(model, queryset) -> None:
    query = queryset.query
    # Django 5.2 selects values() in the order given, aggregates after them (`selected`); the
    # names are the rollup's column names.
    columns = list(query.selected)
    assert set(columns) <= set(_columns(model)), columns
    sql, params = query.sql_with_params()
    quoted = ", ".join(connection.ops.quote_name(c) for c in columns)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {model._meta.db_table} ({quoted}) {sql}", params)
