"""The re-attribution engine: lines read again in chunks, attributed again, the ones that
changed owner written back, their rollups rebuilt; and what a change would move (dry run)."""

import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from queue import Queue

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
from django.db import connection, connections, transaction
from django.db.models import (
    BigIntegerField,
    BooleanField,
    Case,
    Count,
    ExpressionWrapper,
    Max,
    Min,
    Q,
    Sum,
    TextField,
    Value,
    When,
)
from django.db.models.functions import Cast, Lower
from django.utils import timezone

from apps.projects.ports import spend_data_changed

from .attribution import ATTRIBUTION_COLUMNS, SPLIT_COLUMNS, Attributor
from .loader import (
    LINE_COLUMNS,
    LineSink,
    RollupAccumulator,
    copy_into,
    line_days,
    monthly_rebuild,
    rollup_days_delete,
    rollups_rebuild,
    storage_summary_rebuild,
)
from .models import (
    AttributedBy,
    AttributionRun,
    CostLineItem,
    Delivery,
)
from .normalise import DEC, TS
from .reader import read_ahead
from .runs import PROGRESS_EVERY_SECONDS, _counts, _day_start, _last_line_id, money_text
from .storage import StorageFacts

logger = logging.getLogger(__name__)

REFRESH_CHUNK = 20_000
# The preview and a run's summary show the last days apart from the whole history.
RECENT_DAYS = 30


@dataclass
class Moves:
    """Spend that changes owner, both ways: `from` the owner a line had, `to` the one it gets
    (project, experiment, deployment), per currency, with the last RECENT_DAYS apart.

    A line split between several runs counts once per part, with the part's amount: the parts
    add up exactly to the line, so both directions have the same total.
    """

    since: datetime = field(default_factory=lambda: timezone.now() - timedelta(days=RECENT_DAYS))
    lines: int = 0
    rows: dict[tuple, list] = field(default_factory=dict)

    def add(self, direction: str, parts: pa.Table, prefix: str = "") -> None:
        """Add these parts (or sums of lines alike: see unreached_dry_run), by the owner in the
        columns named with `prefix`. A part counts as its `lines` (else 1) and is recent by its
        `recent` (else by its charge period's start)."""
        if not parts.num_rows:
            return
        names = parts.column_names
        table = pa.table(
            {
                "project_id": parts[f"{prefix}project_id"],
                "experiment_id": parts[f"{prefix}experiment_id"],
                "deployment_id": parts[f"{prefix}deployment_id"],
                "currency": parts["billing_currency"],
                "recent": parts["recent"]
                if "recent" in names
                else pc.greater_equal(
                    parts["charge_period_start"],
                    pa.scalar(self.since, parts["charge_period_start"].type),
                ),
                "amount": parts["effective_cost"],
                "lines": parts["lines"]
                if "lines" in names
                else pa.repeat(pa.scalar(1, pa.int64()), parts.num_rows),
            }
        )
        grouped = table.group_by(
            ["project_id", "experiment_id", "deployment_id", "currency", "recent"]
        ).aggregate([("amount", "sum"), ("lines", "sum")])
        for item in grouped.to_pylist():
            key = (
                direction,
                item["project_id"],
                item["experiment_id"],
                item["deployment_id"],
                item["currency"],
            )
            row = self.rows.setdefault(key, [Decimal(0), Decimal(0), 0])
            amount = item["amount_sum"] or Decimal(0)
            row[0] += amount
            if item["recent"]:
                row[1] += amount
            row[2] += item["lines_sum"]

    def as_json(self) -> list[dict]:
        return [
            {
                "direction": direction,
                "project_id": project_id,
                "experiment_id": experiment_id,
                "deployment_id": deployment_id,
                "currency": currency,
                "amount": money_text(amount),
                "recent": money_text(recent),
                "lines": lines,
            }
            for (direction, project_id, experiment_id, deployment_id, currency), (
                amount,
                recent,
                lines,
            ) in sorted(self.rows.items(), key=lambda item: tuple(str(k) for k in item[0]))
        ]


class _RunProgress:
    """A run's progress, written where a page sees it at once.

    Through the `progress` connection, which commits at once, so a page can poll a run while a
    delivery's transaction is open; the run's row is never written by this process's main
    connection meanwhile, so the two never wait on each other. On SQLite (one writer at a time),
    or when the caller holds a transaction of its own (the claim's row lock would block the other
    connection), it goes through the main connection instead.
    """

    def __init__(self, run: AttributionRun | None):
        self.run = run
        self.alias = "default"
        if connection.vendor == "postgresql" and not connection.in_atomic_block:
            self.alias = "progress"
        self._last = 0.0

    def write(self, *, force: bool = False, **values) -> None:
        if self.run is None:
            return
        moment = time.monotonic()
        if not force and moment - self._last < PROGRESS_EVERY_SECONDS:
            return
        self._last = moment
        values["heartbeat_at"] = timezone.now()
        rows = AttributionRun.objects.using(self.alias).filter(pk=self.run.pk)
        if self.alias == "default":
            rows.update(**values)
            return
        try:
            rows.update(**values)
        except Exception:  # progress is advice: never let it fail the re-attribution
            logger.warning("attribution run %s: progress not written", self.run.pk, exc_info=True)


def _refresh_delivery(
    delivery_id: int,
    first,
    last,
    keys: list[str] | None,
    attributor: Attributor,
    moves: Moves | None,
    progress: _RunProgress,
    changed_before: int,
    ahead: bool = False,
) -> int:
    """Attribute one delivery's lines in [first's day, last's day] again (those of the `keys`
    resources, or all), write what changed and rebuild what the pages read of it; returns the
    source lines changed. `ahead`: read the lines on another connection, a chunk ahead
    (`_lines_read_ahead`)."""
    start = _day_start(first)
    end = _day_start(last) + timedelta(days=1)
    days: set = set()
    changed = 0
    delivery = Delivery.objects.get(pk=delivery_id)
    # A run over all history reads every line of the delivery: its rollups are summed on the way.
    rollups = _DeliveryRollups(delivery_id, start, end) if keys is None else None
    # Parts this run writes again get ids past this one: a chunk read later must not meet them
    # (on this connection it would, where the delivery's range is not bounded).
    upto = _last_line_id()
    chunks = _line_chunks(delivery, start, end, keys, upto=upto)
    if ahead:
        chunks = _lines_read_ahead(chunks, lock_timeout=READ_AHEAD_LOCK_TIMEOUT)
    writer = _AttributionWriter(threaded=ahead)
    try:
        with contextlib.closing(chunks):  # a reading thread stops with the loop
            for chunk in chunks:
                changed += _reattribute(chunk, attributor, days, moves, rollups, writer)
                progress.write(lines_changed=changed_before + changed)
    except BaseException as exc:
        writer.close(exc)
        raise
    writer.close()
    # Parts written again have new ids: the delivery's range must cover them. Only then: past
    # other deliveries' lines the range would make every later read of this one longer.
    last = _last_line_id()
    if last > upto:
        Delivery.objects.filter(pk=delivery_id).update(last_line_id=last)
    if rollups is not None:
        # Written even when no owner moved: an alias of the data class or model dimension
        # changes the storage rollup's keys, so what the pages read changed all the same (on
        # SQLite no trigger tells the cached figures).
        rollups.write()
        spend_data_changed.announce(start=start.date(), end=end.date(), reason="reattribution")
    elif days:
        rollups_rebuild(
            delivery_id=delivery_id,
            start=_day_start(min(days)),
            end=_day_start(max(days)) + timedelta(days=1),
        )
        spend_data_changed.announce(
            start=_day_start(min(days)).date(),
            end=(_day_start(max(days)) + timedelta(days=1)).date(),
            reason="reattribution",
        )
    return changed


class _DeliveryRollups:
    """A delivery's day rollups summed from its lines as the re-attribution leaves them, the
    way an import sums them: they replace the delivery's rows for the window at the end, so a
    run over all history does not read every line a second time to rebuild them."""

    def __init__(self, delivery_id: int, start: datetime, end: datetime):
        self.delivery_id = delivery_id
        self.start, self.end = start, end
        # Loaded now: adding lines reads nothing from the database, only a flush writes.
        self.sums = RollupAccumulator(StorageFacts.load())
        self._cleared = False

    def add(self, lines: pa.Table, writer: "_AttributionWriter") -> None:
        self.sums.add(lines)
        if self.sums.needs_flush:
            writer.drain()
            self._clear()
            self.sums.flush()

    def _clear(self) -> None:
        if not self._cleared:
            rollup_days_delete(delivery_id=self.delivery_id, start=self.start, end=self.end)
            self._cleared = True

    def write(self) -> None:
        self._clear()
        self.sums.write(delivery_ids=[self.delivery_id])
        monthly_rebuild(delivery_id=self.delivery_id)
        storage_summary_rebuild(delivery_id=self.delivery_id)


# What a dry run reads of each line: what attribution looks at, the money, the attribution.
DRY_RUN_COLUMNS = [
    "id",
    "delivery_id",
    "source_row",
    "billing_account_id",
    "sub_account_id",
    "service_name",
    "resource_id",
    "charge_period_start",
    "charge_period_end",
    "billing_currency",
    "cost_kind",
    "tags",
    *SPLIT_COLUMNS,
    *ATTRIBUTION_COLUMNS,
]


def _arrow_types() -> dict[str, pa.DataType]:
    types = {"id": pa.int64()}
    for f in CostLineItem._meta.concrete_fields:
        kind = f.get_internal_type()
        types[f.column] = {
            "DecimalField": DEC,
            "DateTimeField": TS,
            "BigIntegerField": pa.int64(),
            "BigAutoField": pa.int64(),
            "ForeignKey": pa.int64(),
            "PositiveIntegerField": pa.int32(),
        }.get(kind, pa.string())
    return types


JSON_COLUMNS = ("tags", "extra")


def _line_chunks(
    delivery: Delivery,
    start: datetime | None,
    end: datetime | None,
    keys: list[str] | None,
    *,
    narrow=None,
    names: list[str] | None = None,
    read=None,
    upto: int | None = None,
):
    """The delivery's lines in the window (all when None) as Arrow tables, in id order, every
    part of a source row in the same chunk (a shared line's parts have adjacent ids).

    Each chunk is one query of at most REFRESH_CHUNK lines after the last id of the one before;
    `read` turns that query into a table (`_chunk_reader()`: COPY on PostgreSQL, the ORM
    elsewhere; both give the same table). `upto`: no line with a higher id."""
    read = read or _chunk_reader()
    names = names or ["id", *LINE_COLUMNS]
    lines = CostLineItem.objects.of_delivery(delivery)
    if upto is not None:
        lines = lines.filter(id__lte=upto)
    if start is not None:
        lines = lines.filter(charge_period_start__gte=start, charge_period_start__lt=end)
    if keys is not None:
        # A model API key may be a line's sub-account (a project, workspace or team).
        lines = lines.annotate(key=Lower("resource_id"), sub_key=Lower("sub_account_id")).filter(
            Q(key__in=keys) | Q(sub_key__in=keys)
        )
    if narrow is not None:
        lines = narrow(lines)
    after = None
    while True:
        page = lines if after is None else lines.filter(id__gt=after)
        table = read(page.order_by("id")[:REFRESH_CHUNK], names)
        if not table.num_rows:
            return
        complete = table.num_rows < REFRESH_CHUNK
        if not complete:
            # The last source row's parts may go on in the next page: they start it instead.
            last = table["source_row"][-1]
            whole = table.filter(pc.not_equal(table["source_row"], last))
            if whole.num_rows:
                table = whole
        after = table["id"][-1].as_py()
        yield table
        if complete:
            return


# How long the reading connection of a run waits for a lock: past it the run fails and is
# retried. A request for an exclusive lock on the line table (a migration's ALTER TABLE) queues
# behind the run's transaction, and the reader's next query behind that request, while the run
# waits for the reader: a wait PostgreSQL cannot see as a deadlock.
READ_AHEAD_LOCK_TIMEOUT = "30s"


def _lines_read_ahead(chunks: Iterator[pa.Table], *, lock_timeout: str | None = None):
    """The chunks read by `reader.read_ahead`'s thread, so on a database connection of that
    thread's own, one chunk ahead: the server writes the next chunk out while this process
    attributes the one before (and its own connection writes the changes), on the other core.

    Only where the lines are committed and nothing else writes them meanwhile: a run holds the
    delivery's row lock, which imports and other runs wait for, and its caller is not inside a
    transaction that may hold lines of its own (attribution_refresh). The thread's connection
    is closed when the chunks end or the caller closes this generator (it must, on an error).
    """

    def on_own_connection():
        try:
            if lock_timeout is not None:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT set_config('lock_timeout', %s, false)", [lock_timeout])
            yield from chunks
        finally:
            connections.close_all()  # the reading thread's own

    return read_ahead(on_own_connection())


def _chunk_reader():
    return _copy_chunk if connection.vendor == "postgresql" else _orm_chunk


def _orm_chunk(page, names: list[str]) -> pa.Table:
    """One page of lines through the ORM (Python objects per value): the portable path."""
    types = _arrow_types()
    rows = list(page.values_list(*names))
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(names)
    arrays = []
    for name, values in zip(names, columns, strict=True):
        if name in JSON_COLUMNS:
            values = [json.dumps(v) if v else None for v in values]
        arrays.append(pa.array(values, types[name]))
    return pa.table(arrays, names=names)


# jsonb's text is what json.dumps writes of the value the ORM reads, except for numbers (a float
# parsed and written again: 1.50 is 1.5), characters outside printable ASCII (json.dumps escapes
# them) and a value that is not an object; a text that may hold one of these (a string that
# merely looks like it too) goes through json as the ORM's path does.
_JSON_REDO = r"[^\x20-\x7e]|(: |\[|, )-?[0-9]|^[^{]"


def _copy_chunk(page, names: list[str]) -> pa.Table:
    """One page of lines by `COPY (SELECT ...) TO STDOUT` in CSV, parsed by Arrow: no Python
    object per value. The SELECT is the queryset's own, with the JSON columns as jsonb's text."""
    types = _arrow_types()
    fields = [f"copy_{name}" if name in JSON_COLUMNS else name for name in names]
    texts = {f"copy_{name}": Cast(name, TextField()) for name in JSON_COLUMNS if name in names}
    query = page.annotate(**texts).values_list(*fields).query
    sql, params = query.sql_with_params()
    data = bytearray()
    with connection.cursor() as cursor:
        raw = cursor.cursor
        statement = psycopg.ClientCursor(raw.connection).mogrify(sql, params)
        with raw.copy(f"COPY ({statement}) TO STDOUT WITH (FORMAT csv)") as copy:
            while block := copy.read():
                data += block
    column_types = {name: types[name] for name in names}
    if not data:
        return pa.schema(column_types.items()).empty_table()
    table = pcsv.read_csv(
        pa.py_buffer(data),
        read_options=pcsv.ReadOptions(column_names=names, block_size=1 << 24),
        parse_options=pcsv.ParseOptions(newlines_in_values=True),
        convert_options=pcsv.ConvertOptions(
            column_types=column_types,
            null_values=[""],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    )
    table = table.combine_chunks()
    for name in JSON_COLUMNS:
        if name in names:
            at = names.index(name)
            table = table.set_column(at, name, _json_texts(table[name].combine_chunks()))
    return table


def _json_texts(texts: pa.Array) -> pa.Array:
    """jsonb's text of a JSON column as the ORM's path has it: json.dumps of the value, None for
    an empty one."""
    texts = pc.if_else(pc.equal(texts, "{}"), pa.scalar(None, pa.string()), texts)
    redo = pc.fill_null(pc.match_substring_regex(texts, _JSON_REDO), False)
    if not pc.any(redo).as_py():
        return texts
    values = texts.to_pylist()
    for at in pc.indices_nonzero(redo).to_pylist():
        value = json.loads(values[at])
        values[at] = json.dumps(value) if value else None
    return pa.array(values, pa.string())


# What the attribution reads of a line, but its time (summed by in unreached_dry_run).
SUMMED_KEYS = [
    "tags",
    "billing_account_id",
    "sub_account_id",
    "service_name",
    "resource_id",
    "cost_kind",
]


def lines_dry_run(moves: Moves, *, attributor: Attributor, narrow=None) -> None:
    """Add to `moves` what attributing the current deliveries' lines again with these facts would
    move, line by line, as attribution_refresh does (the same code on the same lines), without
    writing anything; `narrow` (a function of a line queryset) may leave out lines."""
    deliveries = Delivery.objects.filter(status=Delivery.Status.CURRENT).exclude(
        first_charge_period_start=None
    )
    ahead = _may_read_ahead()
    for delivery in deliveries.order_by("pk"):
        chunks = _line_chunks(delivery, None, None, None, narrow=narrow, names=DRY_RUN_COLUMNS)
        if ahead:
            chunks = _lines_read_ahead(chunks)
        with contextlib.closing(chunks):  # a reading thread stops with the loop
            for chunk in chunks:
                _record_moves(_diff(chunk, attributor), moves)


def _may_read_ahead() -> bool:
    """Whether another connection may read the lines: outside a transaction (every line this
    process wrote is committed), on PostgreSQL."""
    return (
        connection.vendor == "postgresql"
        and connection.get_autocommit()
        and not connection.in_atomic_block
    )


def unreached_dry_run(*, attributor: Attributor, narrow=None) -> Moves:
    """What attributing again, with these facts, the lines that tags, registered resources and
    model API keys did not reach when they were stored (attributed by a rule or by nothing) would
    move, without writing anything: lines_dry_run's figures over the same lines, in one pass.

    What the attribution reads of such a line is its tags, four fields, its cost kind and, only
    if some run or deployment registered its resource, its time. So the database sums the lines
    by all of that but the time (SUMMED_KEYS), with the attribution they have today, their
    currency and whether they are recent, and keeps each line of a registered resource apart
    with its charge period; the re-attribution's own diff (_diff, _record_moves) then runs on
    those rows as if each were one line, counted as the lines it stands for. A fact that changed
    since the lines were stored (a project or a run created that tags name, a run's window
    moved) moves them here as it will in the run.
    """
    moves = Moves()
    lines = CostLineItem.objects.filter(
        attributed_by__in=[AttributedBy.RULE.value, AttributedBy.NONE.value],
        delivery_id__in=Delivery.objects.filter(status=Delivery.Status.CURRENT).values("pk"),
    )
    if narrow is not None:
        lines = narrow(lines)
    registered = attributor.use_keys.to_pylist()
    keys = ["copy_tags", *SUMMED_KEYS[1:], "billing_currency", *ATTRIBUTION_COLUMNS, "recent"]
    # A line of a registered resource is a row of its own (its id): its time decides.
    alone = Value(None, output_field=BigIntegerField())
    if registered:
        alone = Case(When(resource_lower__in=registered, then="id"), default=alone)
    sums = (
        lines.annotate(resource_lower=Lower("resource_id"))
        .annotate(
            copy_tags=Cast("tags", TextField()),
            recent=ExpressionWrapper(
                Q(charge_period_start__gte=moves.since), output_field=BooleanField()
            ),
            alone=alone,
        )
        .values(*keys, "alone")
        .annotate(
            effective_cost=Sum("effective_cost"),
            lines=Count("*"),
            charge_period_start=Min("charge_period_start"),
            charge_period_end=Max("charge_period_end"),
        )
        .order_by()
        .values_list(*keys, "effective_cost", "lines", "charge_period_start", "charge_period_end")
    )
    if connection.vendor != "postgresql":
        rows = list(sums)
    else:
        with transaction.atomic(), connection.cursor() as cursor:
            # The planner cannot tell how few sums there are (it guessed 700,000 for 1,011 at
            # 10M lines) and sorted 737,000 wide rows on disk for them: 1.2 s more than summing
            # them in a hash table, which spills within work_mem too, so it is never larger.
            # Put back after: inside a caller's transaction a savepoint's SET LOCAL outlives it.
            cursor.execute("SELECT current_setting('enable_sort')")
            (before,) = cursor.fetchone()
            cursor.execute("SET LOCAL enable_sort = off")
            rows = list(sums)
            cursor.execute("SELECT set_config('enable_sort', %s, true)", [before])
    if not rows:
        return moves
    names = ["tags", *keys[1:], "effective_cost", "lines", "charge_period_start"]
    names.append("charge_period_end")
    types = {**_arrow_types(), "recent": pa.bool_(), "lines": pa.int64()}
    columns = zip(*rows, strict=True)
    table = pa.table(
        [pa.array(column, types[name]) for name, column in zip(names, columns, strict=True)],
        names=names,
    )
    table = table.set_column(0, "tags", _json_texts(table["tags"].combine_chunks()))
    for name in SPLIT_COLUMNS:  # the money a shared line's parts split: only the effective cost
        if name not in names:
            table = table.append_column(name, pa.nulls(table.num_rows, types[name]))
    table = table.append_column("source_row", pa.array(range(table.num_rows), pa.int64()))
    # A registered resource the database did not keep apart (its case folds otherwise there):
    # its lines are read one by one instead.
    timed = pc.is_in(pc.utf8_lower(table["resource_id"]), value_set=attributor.use_keys)
    summed = pc.and_(pc.fill_null(timed, False), pc.greater(table["lines"], 1))
    if pc.any(summed).as_py():
        unkept = pa.array(sorted(set(table.filter(summed)["resource_id"].to_pylist())))
        table = table.filter(pc.invert(pc.is_in(table["resource_id"], value_set=unkept)))
        unkept = unkept.to_pylist()

        def of_unkept(lines):
            lines = lines.filter(
                attributed_by__in=[AttributedBy.RULE.value, AttributedBy.NONE.value],
                resource_id__in=unkept,
            )
            return lines if narrow is None else narrow(lines)

        lines_dry_run(moves, attributor=attributor, narrow=of_unkept)
    _record_moves(_diff(table, attributor), moves)
    return moves


@dataclass
class _Diff:
    """One chunk attributed again: what to update in place, what to write again as new parts."""

    old: pa.Table  # the chunk as stored, its attribution columns renamed old_*
    fresh: pa.Table  # attributed again (a shared line as its parts)
    update: pa.Table  # whole lines whose attribution changed
    rewrite_rows: set[int]  # source rows whose parts change (split, merged or split anew)

    @property
    def changed_rows(self) -> set[int]:
        return {*self.update["source_row"].to_pylist(), *self.rewrite_rows}


OLD = {name: f"old_{name}" for name in ATTRIBUTION_COLUMNS}


def _diff(lines: pa.Table, attributor: Attributor) -> _Diff:
    lines = lines.rename_columns([OLD.get(n, n) for n in lines.column_names])
    parts = _counts(lines["source_row"])
    merged = _merge_parts(lines, {row for row, count in parts.items() if count > 1})
    fresh = attributor.attribute(merged)
    new_parts = _counts(fresh["source_row"])
    same = pa.array([True] * fresh.num_rows, pa.bool_())
    for name in ATTRIBUTION_COLUMNS:
        equal = pc.equal(fresh[name], fresh[OLD[name]])
        both_null = pc.and_(pc.is_null(fresh[name]), pc.is_null(fresh[OLD[name]]))
        same = pc.and_(same, pc.or_(pc.fill_null(equal, False), both_null))
    multi = {row for row, n in parts.items() if n > 1} | {
        row for row, n in new_parts.items() if n > 1
    }
    multi_set = pa.array(sorted(multi), pa.int64())
    rewrite_rows = multi
    if multi:
        # A line shared as before, by the same owners in the same shares, stays as it is.
        before = _part_signatures(
            lines.filter(pc.is_in(lines["source_row"], value_set=multi_set)), "old_"
        )
        after = _part_signatures(
            fresh.filter(pc.is_in(fresh["source_row"], value_set=multi_set)), ""
        )
        rewrite_rows = {row for row in multi if before.get(row) != after.get(row)}
    in_multi = pc.is_in(fresh["source_row"], value_set=multi_set)
    update = fresh.filter(pc.and_(pc.invert(in_multi), pc.invert(same)))
    return _Diff(old=lines, fresh=fresh, update=update, rewrite_rows=rewrite_rows)


def _part_signatures(parts: pa.Table, prefix: str) -> dict[int, list]:
    names = [prefix + name for name in ATTRIBUTION_COLUMNS]
    out: dict[int, list] = {}
    for item in parts.select(["source_row", *names, *SPLIT_COLUMNS]).to_pylist():
        signature = tuple(str(item[n]) for n in (*names, *SPLIT_COLUMNS))
        out.setdefault(item["source_row"], []).append(signature)
    return {row: sorted(signatures) for row, signatures in out.items()}


def _record_moves(diff: _Diff, moves: Moves | None) -> int:
    """Add the chunk's changed lines to `moves`; returns how many source lines changed."""
    changed = diff.changed_rows
    if moves is not None and changed:
        wanted = pa.array(sorted(changed), pa.int64())
        moves.add(
            "from", diff.old.filter(pc.is_in(diff.old["source_row"], value_set=wanted)), "old_"
        )
        moves.add("to", diff.fresh.filter(pc.is_in(diff.fresh["source_row"], value_set=wanted)))
        if "lines" in diff.old.column_names:  # sums of lines (unreached_dry_run): as many
            old = diff.old.filter(pc.is_in(diff.old["source_row"], value_set=wanted))
            moves.lines += pc.sum(old["lines"]).as_py()
        else:
            moves.lines += len(changed)
    return len(changed)


def _reattribute(
    lines: pa.Table,
    attributor: Attributor,
    days: set,
    moves: Moves | None = None,
    rollups: _DeliveryRollups | None = None,
    writer: "_AttributionWriter | None" = None,
) -> int:
    """Attribute one chunk again and write what changed; returns the source lines changed.
    `writer` writes the whole lines whose attribution changed (at once when None).

    `rollups`, when given, sums the chunk as it is stored afterwards: `fresh` is every line of
    the chunk attributed again, and a shared line kept as it was has the same parts there."""
    writer = writer or _AttributionWriter(threaded=False)
    diff = _diff(lines, attributor)
    if rollups is not None:
        rollups.add(diff.fresh, writer)
    update = diff.update
    rewrite_rows = diff.rewrite_rows
    if update.num_rows:
        writer.write(update.select(["id", *ATTRIBUTION_UPDATE]))
        days.update(line_days(update).to_pylist())
    if rewrite_rows:
        writer.drain()  # the connection is this thread's again
        wanted = pa.array(sorted(rewrite_rows), pa.int64())
        rewritten = diff.fresh.filter(pc.is_in(diff.fresh["source_row"], value_set=wanted))
        old_parts = diff.old.filter(pc.is_in(diff.old["source_row"], value_set=wanted))[
            "id"
        ].to_pylist()
        CostLineItem.objects.filter(id__in=old_parts).delete()
        sink = LineSink.for_connection()
        try:
            sink.write(rewritten)
        except BaseException as exc:
            sink.pause(exc)  # the COPY is abandoned, so the transaction can roll back
            raise
        sink.pause()
        days.update(line_days(rewritten).to_pylist())
    return _record_moves(diff, moves)


ATTRIBUTION_UPDATE = ["project_id", "experiment_id", "deployment_id", "workload", "attributed_by"]


def _update_attribution(changes: pa.Table) -> None:
    """Write the new attribution of whole lines (columns `id` and ATTRIBUTION_UPDATE)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            _update_from_copy(cursor.cursor, changes)
        return
    line_table = CostLineItem._meta.db_table
    with connection.cursor() as cursor:
        cursor.executemany(
            f"UPDATE {line_table} SET {', '.join(f'{n} = %s' for n in ATTRIBUTION_UPDATE)} "
            "WHERE id = %s",
            [(*row[1:], row[0]) for row in zip(*changes.to_pydict().values(), strict=True)],
        )


def _update_from_copy(cursor, changes: pa.Table) -> None:
    """The changes copied into a temporary table and applied by one UPDATE ... FROM, through a
    psycopg cursor: one statement per line (executemany) was most of a re-attribution's time.
    The table lives until the delivery's transaction ends."""
    line_table = CostLineItem._meta.db_table
    assignments = ", ".join(f"{name} = changed.{name}" for name in ATTRIBUTION_UPDATE)
    cursor.execute(
        "CREATE TEMPORARY TABLE IF NOT EXISTS reattributed_lines (id bigint PRIMARY KEY, "
        "project_id bigint, experiment_id bigint, deployment_id bigint, "
        "workload varchar(20) NOT NULL, attributed_by varchar(10) NOT NULL) ON COMMIT DROP"
    )
    cursor.execute("TRUNCATE reattributed_lines")
    copy_into(cursor, "reattributed_lines", changes)
    # The chunk's id range bounds the scan of the lines: without it a planner that thinks the
    # table small (no statistics yet after a large import) walked every line for each chunk.
    span = pc.min_max(changes["id"]).as_py()
    cursor.execute(
        f"UPDATE {line_table} AS line SET {assignments} FROM reattributed_lines AS changed "
        "WHERE line.id = changed.id AND line.id BETWEEN %s AND %s",
        [span["min"], span["max"]],
    )


class _AttributionWriter:
    """Where a delivery's changed lines go (`write`, columns `id` and ATTRIBUTION_UPDATE).

    Threaded (PostgreSQL), a thread applies them through this process's own connection, so
    that the server updates one chunk while this process attributes the next. psycopg runs one
    statement at a time on a connection, but the caller's statements must come after the
    changes handed over before them, and their errors must reach the caller: it drains the
    writer (`drain()`) before any statement of its own, and closes it (`close()`: waits, and
    raises what went wrong) before the delivery's transaction ends. Errors are Django's, as
    from the caller's own cursor (an OperationalError hands a run back for a retry). After a
    failure the thread skips what is left: the transaction will be rolled back.
    """

    def __init__(self, *, threaded: bool):
        self._thread = None
        if not threaded:
            return
        connection.ensure_connection()
        self._raw = connection.connection
        self._django_errors = connection.wrap_database_errors
        self._queue: Queue = Queue(maxsize=1)
        self._error: BaseException | None = None
        self._failed = False
        self._thread = threading.Thread(target=self._run, name="costsite-reattribute", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            changes = self._queue.get()
            try:
                if changes is None:
                    return
                if self._error is None and not self._failed:
                    with self._django_errors, self._raw.cursor() as cursor:
                        _update_from_copy(cursor, changes)
            except BaseException as exc:  # raised by the caller's next write, drain or close
                self._error = exc
            finally:
                self._queue.task_done()

    def write(self, changes: pa.Table) -> None:
        if self._thread is None:
            _update_attribution(changes)
            return
        if self._error is not None:
            raise self._error
        self._queue.put(changes)

    def drain(self) -> None:
        """Wait until everything written so far is applied; raise what went wrong."""
        if self._thread is None:
            return
        self._queue.join()
        if self._error is not None:
            raise self._error

    def close(self, failure: BaseException | None = None) -> None:
        if self._thread is None:
            return
        self._failed = failure is not None
        self._queue.put(None)
        self._thread.join()
        if failure is None and self._error is not None:
            raise self._error


def _merge_parts(lines: pa.Table, rows: set[int]) -> pa.Table:
    """Shared lines back as the one source line their parts add up to."""
    if not rows:
        return lines
    selected = pc.is_in(lines["source_row"], value_set=pa.array(sorted(rows), pa.int64()))
    merged: dict[int, dict] = {}
    for part in lines.filter(selected).to_pylist():
        line = merged.get(part["source_row"])
        if line is None:
            merged[part["source_row"]] = dict(part)
            continue
        for name in SPLIT_COLUMNS:
            if part[name] is not None:
                line[name] = (line[name] or Decimal(0)) + part[name]
    whole = pa.Table.from_pylist(list(merged.values()), schema=lines.schema)
    return pa.concat_tables([lines.filter(pc.invert(selected)), whole])
