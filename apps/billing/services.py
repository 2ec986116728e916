"""Writes of the billing app: import runs, deliveries, line items, rollups, re-attribution.

An import run loads all its files inside one transaction: it succeeds whole or leaves nothing.
Each file yields one delivery per (billing account, billing period) it holds:
- a delivery seen before (same file bytes, account and period; current or since replaced) is
  `unchanged` and its lines are not kept: the same delivery again never counts twice, and an
  older file imported again cannot undo a restatement;
- otherwise it becomes the account's current delivery for that period, and the one it replaces
  loses its line items and rollup rows (restatement).
A run whose deliveries are all unchanged rolls back and ends `unchanged`.
"""

import contextlib
import hashlib
import json
import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.db.models import Max, Min, Q, TextField
from django.db.models.functions import Cast, Lower
from django.utils import timezone

from apps.projects.ports import spend_data_changed

from .attribution import ATTRIBUTION_COLUMNS, SPLIT_COLUMNS, Attributor
from .errors import (
    BillingFileError,
    BillingImportError,
    MissingColumnError,
    SourceValueError,
)
from .formats import FORMATS, BillingFormat, format_detect, format_names
from .formats.aws_cur import manifest_parts
from .formats.focus import SIGNATURE
from .loader import (
    LINE_COLUMNS,
    LineSink,
    RollupAccumulator,
    copy_table,
    line_days,
    monthly_rebuild,
    rollups_rebuild,
)
from .models import (
    AttributionRun,
    BillingSource,
    CostLineItem,
    DailyCost,
    DailyResourceCost,
    Delivery,
    ImportRun,
    MonthlyCost,
    SourcePoll,
)
from .normalise import DEC, TS, FocusNormaliser
from .reader import SourceFile, source_inspect

logger = logging.getLogger(__name__)

# A running run whose process showed no sign of life for this long was killed; it may be
# claimed again (progress beats at least every few seconds while a run works).
STALE_AFTER = timedelta(minutes=10)
PROGRESS_EVERY_SECONDS = 0.5
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _arrow_memory_pool() -> None:
    """Use jemalloc for Arrow when the build has it: it hands freed memory back to the system
    sooner than the default mimalloc; on a million rows the peak fell from 282 to 249 MB."""
    with contextlib.suppress(NotImplementedError, pa.ArrowNotImplementedError):
        pa.set_memory_pool(pa.jemalloc_memory_pool())


def _batch_rows() -> int:
    return int(getattr(settings, "BILLING_IMPORT_BATCH_ROWS", 20_000))


def money_text(amount: Decimal) -> str:
    """Full precision without trailing zeros past the cents: 8760.00, 0.00000352."""
    normalised = amount.normalize()
    if normalised.as_tuple().exponent > -2:
        normalised = amount.quantize(Decimal("0.01"))
    return format(normalised, "f")


def _money_json(amounts: dict[str, Decimal]) -> dict[str, str]:
    return {currency: money_text(amount) for currency, amount in sorted(amounts.items())}


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


# -- import runs -----------------------------------------------------------------------------


def import_run_create(
    *,
    paths: list[str],
    requested_format: str = "auto",
    display_name: str = "",
    created_by: AbstractBaseUser | None = None,
    origin: str = ImportRun.Origin.COMMAND,
    source: BillingSource | None = None,
    poll: SourcePoll | None = None,
) -> ImportRun:
    """A queued run for these server-side files (stored as absolute paths): from the command
    line, an upload, or a source's poll (`source` and `poll` then say which)."""
    if requested_format not in format_names():
        raise ValueError(
            f"Unknown format {requested_format!r}: choose one of {', '.join(format_names())}."
        )
    if not paths:
        raise ValueError("An import needs at least one file.")
    absolute = [str(Path(p).expanduser().resolve()) for p in paths]
    name = display_name or ", ".join(Path(p).name for p in absolute)
    return ImportRun.objects.create(
        paths=absolute,
        requested_format=requested_format,
        display_name=name[:500],
        created_by=created_by,
        origin=origin,
        source=source,
        poll=poll,
    )


def import_run_enqueue(*, import_run: ImportRun) -> None:
    """Run it in a worker once the current transaction commits."""
    from .tasks import import_run_execute_task

    import_run_execute_task.delay_on_commit(import_run.pk)


def import_run_execute(*, import_run: ImportRun) -> ImportRun:
    """Claim the run and load its files; it ends succeeded, unchanged or failed.

    Two workers never run it twice: the claim is a conditional UPDATE from queued (or from a
    running run whose process stopped beating) to running, and whoever updates nothing gives up.
    """
    now = timezone.now()
    claimed = (
        ImportRun.objects.filter(pk=import_run.pk)
        .filter(
            Q(status=ImportRun.Status.QUEUED)
            | Q(status=ImportRun.Status.RUNNING, heartbeat_at__lt=now - STALE_AFTER)
        )
        .update(
            status=ImportRun.Status.RUNNING,
            started_at=now,
            heartbeat_at=now,
            finished_at=None,
            rows_done=0,
            rows_total=None,
            error="",
            results=[],
        )
    )
    import_run.refresh_from_db()
    if not claimed:
        return import_run
    importer = _Importer(import_run)
    try:
        with transaction.atomic():
            importer.run()
    except _NothingNew:
        _finish(import_run, ImportRun.Status.UNCHANGED, results=importer.results)
    except BillingImportError as exc:
        _finish(import_run, ImportRun.Status.FAILED, error=str(exc), results=importer.failed(exc))
    except (OperationalError, InterfaceError):
        # The database went away: hand the run back so that a retry of the task claims it.
        try:
            ImportRun.objects.filter(pk=import_run.pk).update(status=ImportRun.Status.QUEUED)
        except DatabaseError:
            logger.exception("import run %s: could not hand the run back", import_run.pk)
        raise
    except Exception as exc:
        logger.exception("import run %s failed", import_run.pk)
        error = f"Internal error ({exc.__class__.__name__}: {exc}); nothing was loaded."
        _finish(import_run, ImportRun.Status.FAILED, error=error, results=importer.failed(exc))
    import_run.refresh_from_db()
    return import_run


def _finish(run: ImportRun, status: str, *, results: list[dict], error: str = "") -> None:
    ImportRun.objects.filter(pk=run.pk).update(
        status=status,
        error=error,
        results=results,
        line_items=0,
        billed_cost={},
        effective_cost={},
        finished_at=timezone.now(),
    )


class _NothingNew(Exception):
    """Every delivery of the run was seen before: roll back and end unchanged."""


class _FileUnchanged(Exception):
    """Every delivery of the file was seen before: roll back to before the file."""

    def __init__(self, format_name: str, results: list[dict]):
        self.format = format_name
        self.results = results


@dataclass
class _DeliveryTally:
    delivery: Delivery
    rows: int = 0
    line_items: int = 0
    billed: dict[str, Decimal] = field(default_factory=lambda: defaultdict(Decimal))
    effective: dict[str, Decimal] = field(default_factory=lambda: defaultdict(Decimal))
    first_start: datetime | None = None
    last_start: datetime | None = None
    last_end: datetime | None = None


class _Importer:
    """One run's work, inside its transaction."""

    def __init__(self, run: ImportRun):
        self.run_row = run
        self.results: list[dict] = []
        self.rows_done = 0
        self._current_file = ""
        self._current_format = ""
        self._file_rows = 0
        self._clock = time.monotonic()
        self._last_progress = 0.0

    def failed(self, exc: Exception) -> list[dict]:
        """One failed result per file: the file at fault has the error, the others say they
        were not loaded (the run is all or nothing)."""
        seconds = round(time.monotonic() - self._clock, 3)
        out = []
        for path in self.run_row.paths:
            at_fault = path == self._current_file
            out.append(
                {
                    "file": path,
                    "format": self._current_format if at_fault else "",
                    "status": "failed",
                    "rows": self._file_rows if at_fault else 0,
                    "line_items": 0,
                    "billed_cost": {},
                    "effective_cost": {},
                    "billing_period_start": None,
                    "billing_period_end": None,
                    "seconds": seconds,
                    "error": str(exc)
                    if at_fault
                    else (f"Not loaded: the import failed on {Path(self._current_file).name}."),
                }
            )
        return out

    def run(self) -> None:
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL TIME ZONE 'UTC'")
        _arrow_memory_pool()
        self.attributor = Attributor.load()
        self.sink = LineSink.for_connection()
        formats = []
        for path in self.run_row.paths:
            self._current_file = path
            try:
                with transaction.atomic():  # a savepoint: a file seen before costs no delete
                    formats.append(self._import_file(path))
            except _FileUnchanged as unchanged:
                formats.append(unchanged.format)
                self.results.extend(unchanged.results)
        if all(result["status"] == "unchanged" for result in self.results):
            raise _NothingNew
        loaded = [r for r in self.results if r["status"] == "succeeded"]
        billed: dict[str, Decimal] = defaultdict(Decimal)
        effective: dict[str, Decimal] = defaultdict(Decimal)
        for result in loaded:
            for currency, amount in result["billed_cost"].items():
                billed[currency] += Decimal(amount)
            for currency, amount in result["effective_cost"].items():
                effective[currency] += Decimal(amount)
        ImportRun.objects.filter(pk=self.run_row.pk).update(
            status=ImportRun.Status.SUCCEEDED,
            format=",".join(dict.fromkeys(formats)),
            rows_done=self.rows_done,
            rows_total=self.rows_done,
            line_items=sum(r["line_items"] for r in loaded),
            billed_cost=_money_json(billed),
            effective_cost=_money_json(effective),
            results=self.results,
            finished_at=timezone.now(),
            heartbeat_at=timezone.now(),
        )

    # -- one file ----------------------------------------------------------------------------

    def _format(self, source: SourceFile) -> BillingFormat:
        requested = self.run_row.requested_format
        if requested != "auto":
            return FORMATS[requested]
        fmt = format_detect(source.header)
        if fmt is None:
            raise source.fail(
                "is not a billing export costsite knows: a FOCUS file has columns such as "
                f"{', '.join(SIGNATURE)}"
            )
        return fmt

    def _import_file(self, path: str) -> str:
        clock = time.monotonic()
        self._file_rows = 0
        self._file_notes: list[str] = []  # what the format inferred, shown with the result
        self._current_format = self.run_row.requested_format
        # A CUR manifest and its parts are one delivery; any other file is one on its own.
        origin = self.run_row.source
        # Through a folder source, a part may be anywhere under the source's root; otherwise
        # (the command, an upload, a bucket's spool folder) only in the manifest's folder.
        root = origin.path if origin is not None and origin.kind != BillingSource.Kind.S3 else None
        parts = manifest_parts(path, root=root)
        sources = [source_inspect(part) for part in parts or [path]]
        fmt = self._format(sources[0])
        self._current_format = fmt.name
        tallies: dict[tuple[str, datetime], _DeliveryTally] = {}
        rollups = RollupAccumulator()
        version = ""
        for source in sources:
            version = self._import_source(source, fmt, tallies, rollups)
        delivered = sources[0]
        if parts is not None:
            digest = hashlib.sha256("|".join(s.sha256 for s in sources).encode()).hexdigest()
            delivered = SourceFile(Path(path), "manifest", [], 0, sha256=digest)
        self._settle(delivered, fmt, version, tallies, rollups, time.monotonic() - clock)
        self._progress(sources[-1], force=True)
        return fmt.name

    def _import_source(
        self,
        source: SourceFile,
        fmt: BillingFormat,
        tallies: dict,
        rollups: RollupAccumulator,
    ) -> str:
        """Load one file (or one part of a manifest's delivery); its format version."""
        if self.run_row.requested_format == "auto" and format_detect(source.header) is not fmt:
            raise source.fail(f"is not in the same format ({fmt.label}) as the delivery's first")
        try:
            columns = fmt.column_map(source.header)
        except MissingColumnError as exc:
            raise BillingFileError(source.label, str(exc)) from exc
        normaliser = FocusNormaliser(
            label=source.label, columns=columns, spelled_nulls=source.kind == "parquet"
        )
        first_row = source.first_row  # CSV's header is row 1
        try:
            for batch in source.batches(columns.source_columns, rows=_batch_rows()):
                self._file_rows = first_row - source.first_row  # read before this batch
                try:
                    focus = fmt.to_focus(batch, columns)
                except SourceValueError as exc:
                    raise exc.at(source.label, first_row) from None
                extras = fmt.extras(batch, columns)
                lines = normaliser.normalise(focus, extras, first_row=first_row)
                first_row += batch.num_rows
                lines = lines.append_column(
                    "delivery_id", self._deliveries(lines, source, fmt, columns.version, tallies)
                )
                self._tally(lines, tallies)
                lines = self.attributor.attribute(lines)
                for delivery_id, count in _counts(lines["delivery_id"]).items():
                    _by_id(tallies, delivery_id).line_items += count
                rollups.add(lines)
                if rollups.needs_flush:
                    self.sink.pause()
                    rollups.flush()
                self.sink.write(lines)
                self.rows_done += batch.num_rows
                self._progress(source)
            self.sink.pause()
        except BaseException as exc:
            self.sink.pause(failure=exc)
            raise
        if first_row == source.first_row:
            raise source.fail("has a header but no rows" if first_row == 2 else "has no rows")
        self._file_notes.extend(n for n in columns.notes if n not in self._file_notes)
        return columns.version

    def _deliveries(
        self,
        lines: pa.Table,
        source: SourceFile,
        fmt: BillingFormat,
        version: str,
        tallies: dict,
    ) -> pa.Array:
        """The delivery id of each line, creating (loading) deliveries as new keys appear."""
        accounts = pc.min_max(lines["billing_account_id"]).as_py()
        periods = pc.min_max(lines["billing_period_start"]).as_py()
        if accounts["min"] == accounts["max"] and periods["min"] == periods["max"]:
            # Nearly every batch holds one delivery: no need to group.
            keys = [
                {
                    "billing_account_id": accounts["min"],
                    "billing_period_start": periods["min"],
                    "billing_period_end_max": pc.max(lines["billing_period_end"]).as_py(),
                    "provider_name_max": pc.max(lines["provider_name"]).as_py(),
                }
            ]
        else:
            keys = (
                lines.group_by(["billing_account_id", "billing_period_start"])
                .aggregate([("billing_period_end", "max"), ("provider_name", "max")])
                .to_pylist()
            )
        ids = {}
        for item in keys:
            key = (item["billing_account_id"], item["billing_period_start"])
            if key not in tallies:
                self.sink.pause()  # the connection is busy while a COPY is open
                delivery = Delivery.objects.create(
                    import_run=self.run_row,
                    status=Delivery.Status.LOADING,
                    format=fmt.name,
                    format_version=version,
                    file=self._current_file,  # a manifest's parts: the manifest
                    provider_name=item["provider_name_max"] or "",
                    billing_account_id=key[0],
                    billing_period_start=key[1],
                    billing_period_end=item["billing_period_end_max"],
                    first_line_id=_last_line_id(),
                )
                tallies[key] = _DeliveryTally(delivery)
            ids[key] = tallies[key].delivery.pk
        if len(ids) == 1:
            return pa.array([next(iter(ids.values()))] * lines.num_rows, pa.int64())
        joined = pc.binary_join_element_wise(
            lines["billing_account_id"],
            pc.cast(pc.cast(lines["billing_period_start"], pa.int64()), pa.string()),
            "\x1f",
        )
        encoded = pc.dictionary_encode(joined.combine_chunks())
        lookup = {
            f"{account}\x1f{(start - EPOCH) // timedelta(microseconds=1)}": pk
            for (account, start), pk in ids.items()
        }
        mapped = [lookup[value] for value in encoded.dictionary.to_pylist()]
        return pc.take(pa.array(mapped, pa.int64()), encoded.indices)

    def _tally(self, lines: pa.Table, tallies: dict) -> None:
        deliveries = pc.min_max(lines["delivery_id"]).as_py()
        currencies = pc.min_max(lines["billing_currency"]).as_py()
        if deliveries["min"] == deliveries["max"] and currencies["min"] == currencies["max"]:
            # One delivery in one currency, as nearly every batch: plain sums.
            tally = _by_id(tallies, deliveries["min"])
            tally.billed[currencies["min"]] += pc.sum(lines["billed_cost"]).as_py()
            tally.effective[currencies["min"]] += pc.sum(lines["effective_cost"]).as_py()
            tally.rows += lines.num_rows
            starts = pc.min_max(lines["charge_period_start"]).as_py()
            tally.first_start = _earliest(tally.first_start, starts["min"])
            tally.last_start = _latest(tally.last_start, starts["max"])
            tally.last_end = _latest(tally.last_end, pc.max(lines["charge_period_end"]).as_py())
            return
        money = lines.group_by(["delivery_id", "billing_currency"]).aggregate(
            [("billed_cost", "sum"), ("effective_cost", "sum")]
        )
        for item in money.to_pylist():
            tally = _by_id(tallies, item["delivery_id"])
            tally.billed[item["billing_currency"]] += item["billed_cost_sum"]
            tally.effective[item["billing_currency"]] += item["effective_cost_sum"]
        spans = lines.group_by("delivery_id").aggregate(
            [
                ([], "count_all"),
                ("charge_period_start", "min"),
                ("charge_period_start", "max"),
                ("charge_period_end", "max"),
            ]
        )
        for item in spans.to_pylist():
            tally = _by_id(tallies, item["delivery_id"])
            tally.rows += item["count_all"]
            tally.first_start = _earliest(tally.first_start, item["charge_period_start_min"])
            tally.last_start = _latest(tally.last_start, item["charge_period_start_max"])
            tally.last_end = _latest(tally.last_end, item["charge_period_end_max"])

    def _settle(
        self,
        source: SourceFile,
        fmt: BillingFormat,
        version: str,
        tallies: dict,
        rollups: RollupAccumulator,
        seconds: float,
    ) -> None:
        """Each loading delivery becomes current (replacing the old one) or is dropped as seen."""
        _lock_periods(sorted(tallies))
        settled = []
        for (account, period_start), tally in tallies.items():
            fingerprint = hashlib.sha256(
                f"{source.sha256}|{account}|{period_start.isoformat()}".encode()
            ).hexdigest()
            seen = (
                Delivery.objects.filter(
                    billing_account_id=account,
                    billing_period_start=period_start,
                    fingerprint=fingerprint,
                )
                .exclude(status=Delivery.Status.LOADING)
                .order_by("-pk")
                .first()
            )
            result = {
                "file": str(source.path),
                "format": fmt.name,
                "format_version": version,
                "billing_account_id": account,
                "billing_period_start": _iso(period_start),
                "billing_period_end": _iso(tally.delivery.billing_period_end),
                "seconds": round(seconds, 3),
                "notes": list(self._file_notes),
            }
            if seen is not None:
                result.update(
                    status="unchanged",
                    delivery=seen.pk,
                    rows=seen.rows,
                    line_items=seen.line_items,
                    billed_cost=seen.billed_cost,
                    effective_cost=seen.effective_cost,
                )
            settled.append((tally, fingerprint, seen, result))
        if all(seen is not None for _, _, seen, _ in settled):
            raise _FileUnchanged(fmt.name, [result for *_, result in settled])
        for tally, fingerprint, seen, result in settled:
            delivery = tally.delivery
            if seen is not None:
                delivery.last_line_id = _last_line_id()
                CostLineItem.objects.of_delivery(delivery).delete()
                delivery.delete()
                self.results.append(result)
                continue
            current = (
                Delivery.objects.select_for_update()
                .filter(
                    billing_account_id=delivery.billing_account_id,
                    billing_period_start=delivery.billing_period_start,
                    status=Delivery.Status.CURRENT,
                )
                .first()
            )
            if current is not None:
                delivery_drop_lines(delivery=current)
                current.status = Delivery.Status.REPLACED
                current.replaced_at = timezone.now()
                current.save(update_fields=["status", "replaced_at"])
            delivery.status = Delivery.Status.CURRENT
            delivery.fingerprint = fingerprint
            delivery.rows = tally.rows
            delivery.line_items = tally.line_items
            delivery.billed_cost = _money_json(tally.billed)
            delivery.effective_cost = _money_json(tally.effective)
            delivery.first_charge_period_start = tally.first_start
            delivery.last_charge_period_start = tally.last_start
            delivery.max_charge_period_end = tally.last_end
            delivery.last_line_id = _last_line_id()
            delivery.save()
            rollups.write(delivery_ids=[delivery.pk])
            monthly_rebuild(delivery_id=delivery.pk)
            _announce_delivery(delivery, current)
            result.update(
                status="succeeded",
                delivery=delivery.pk,
                rows=tally.rows,
                line_items=tally.line_items,
                billed_cost=delivery.billed_cost,
                effective_cost=delivery.effective_cost,
                replaced=current.pk if current is not None else None,
            )
            self.results.append(result)

    def _progress(self, source: SourceFile, *, force: bool = False) -> None:
        """Rows done (and an estimate of the total) through the second connection.

        It commits at once, so a page can poll a run whose load is not committed yet. SQLite
        has one writer at a time, so nothing is written there mid-run.
        """
        if connection.vendor != "postgresql":
            return
        moment = time.monotonic()
        if not force and moment - self._last_progress < PROGRESS_EVERY_SECONDS:
            return
        self._last_progress = moment
        total = source.parquet_rows
        if total is None and source.bytes_read:
            total = int(self.rows_done * source.size / source.bytes_read)
        try:
            ImportRun.objects.using("progress").filter(pk=self.run_row.pk).update(
                rows_done=self.rows_done, rows_total=total, heartbeat_at=timezone.now()
            )
        except Exception:  # progress is advice: never let it fail the import
            logger.warning("import run %s: progress not written", self.run_row.pk, exc_info=True)


def _announce_delivery(delivery: Delivery, replaced: Delivery | None) -> None:
    """Tell the higher apps which whole UTC days the new delivery (and the one it replaced)
    covers: its billing period and every charge in it."""
    starts, ends = [], []
    for item in (delivery, replaced):
        if item is None:
            continue
        starts += [item.billing_period_start, item.first_charge_period_start]
        ends += [item.billing_period_end, item.max_charge_period_end]
    start = min(moment for moment in starts if moment is not None)
    end = max(moment for moment in ends if moment is not None)
    end_day = _day_start(end)
    spend_data_changed.announce(
        start=_day_start(start).date(),
        end=(end_day if end_day == end else end_day + timedelta(days=1)).date(),
        reason="delivery",
    )


def _lock_periods(keys: list[tuple[str, datetime]]) -> None:
    """Settle one billing account's period at a time: an import that reaches this point while
    another holds the period waits for it to commit, then sees its delivery (the same content:
    unchanged; other content: replaced), as if the two had run one after the other. Without it,
    two polls' runs for one month in two workers both try to become current and one fails.
    Locks are taken in order, so two runs never wait on each other; they end with the
    transaction."""
    if connection.vendor != "postgresql":
        return  # SQLite lets one writer in at a time anyway.
    with connection.cursor() as cursor:
        for account, period_start in keys:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                [f"billing-delivery|{account}|{period_start.isoformat()}"],
            )


def _by_id(tallies: dict, delivery_id: int) -> _DeliveryTally:
    for tally in tallies.values():
        if tally.delivery.pk == delivery_id:
            return tally
    raise KeyError(delivery_id)


def _counts(array) -> dict[int, int]:
    counts = pc.value_counts(array.combine_chunks() if hasattr(array, "combine_chunks") else array)
    # Two flat lists, not a struct per value: ten times faster on a chunk of 20,000 rows.
    return dict(
        zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True)
    )


def _earliest(a, b):
    return b if a is None or (b is not None and b < a) else a


def _latest(a, b):
    return b if a is None or (b is not None and b > a) else a


def _last_line_id() -> int:
    """The highest line id this transaction sees: lines written from now on get higher ones."""
    return CostLineItem.objects.aggregate(last=Max("id"))["last"] or 0


def delivery_drop_lines(*, delivery: Delivery) -> None:
    """Delete a delivery's line items and rollup rows (it is being replaced)."""
    CostLineItem.objects.of_delivery(delivery).delete()
    DailyCost.objects.filter(delivery_id=delivery.pk).delete()
    MonthlyCost.objects.filter(delivery_id=delivery.pk).delete()
    DailyResourceCost.objects.filter(delivery_id=delivery.pk).delete()


# -- re-attribution --------------------------------------------------------------------------


def attribution_schedule(
    *,
    resource_ids: list[str] | None = None,
    reason: str = "",
    created_by: AbstractBaseUser | None = None,
) -> AttributionRun | None:
    """Re-attribute, after the current transaction commits, the history these resources touch,
    as a tracked run (queued now; a worker claims it and writes its progress as it goes).

    None means all history: call it after a tag key alias or an allocation rule changes. Call it
    with the resource ids (old and new) when an experiment's or deployment's resources, or their
    times, change. Returns the run, or None when there was nothing to re-attribute.
    """
    from .tasks import attribution_refresh_task

    ids = None
    if resource_ids is not None:
        ids = sorted({r.strip() for r in resource_ids if r and r.strip()})
        if not ids:
            return None
    run = AttributionRun.objects.create(
        reason=reason[:500], resource_ids=ids, created_by=created_by
    )
    attribution_refresh_task.delay_on_commit(run.pk)
    return run


def attribution_run_execute(*, attribution_run: AttributionRun) -> AttributionRun:
    """Claim the run (queued to running, a conditional UPDATE: a second delivery of the task
    does nothing) and re-attribute its history; it ends succeeded, or failed with the error.

    Each delivery is re-attributed in a transaction of its own, so a failure leaves the deliveries
    done so far re-attributed and the others as they were: consistent either way.
    """
    run = attribution_run
    now = timezone.now()
    # A run whose process stopped beating (a worker killed mid-run, its message redelivered)
    # is claimed again: the deliveries it did are re-attributed already and change no more.
    claimed = (
        AttributionRun.objects.filter(pk=run.pk)
        .filter(
            Q(status=AttributionRun.Status.QUEUED)
            | Q(status=AttributionRun.Status.RUNNING, heartbeat_at__lt=now - STALE_AFTER)
        )
        .update(
            status=AttributionRun.Status.RUNNING,
            started_at=now,
            heartbeat_at=now,
            finished_at=None,
            deliveries_total=0,
            deliveries_done=0,
            lines_changed=0,
            moved=[],
            error="",
        )
    )
    run.refresh_from_db()
    if not claimed:
        return run
    moves = Moves()
    try:
        changed = attribution_refresh(
            resource_ids=run.resource_ids, attribution_run=run, moves=moves
        )
    except (OperationalError, InterfaceError):
        # The database went away: hand the run back so that a retry of the task claims it.
        try:
            AttributionRun.objects.filter(pk=run.pk).update(status=AttributionRun.Status.QUEUED)
        except DatabaseError:
            logger.exception("attribution run %s: could not hand the run back", run.pk)
        raise
    except Exception as exc:
        logger.exception("attribution run %s failed", run.pk)
        run.refresh_from_db()
        AttributionRun.objects.filter(pk=run.pk).update(
            status=AttributionRun.Status.FAILED,
            error=(
                f"Internal error ({exc.__class__.__name__}: {exc}). The deliveries done "
                f"({run.deliveries_done} of {run.deliveries_total}) are re-attributed; the "
                "others are as they were."
            ),
            moved=moves.as_json(),
            finished_at=timezone.now(),
        )
    else:
        AttributionRun.objects.filter(pk=run.pk).update(
            status=AttributionRun.Status.SUCCEEDED,
            lines_changed=changed,
            moved=moves.as_json(),
            finished_at=timezone.now(),
        )
    run.refresh_from_db()
    return run


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
        if not parts.num_rows:
            return
        keys = [f"{prefix}project_id", f"{prefix}experiment_id", f"{prefix}deployment_id"]
        table = pa.table(
            {
                "project_id": parts[keys[0]],
                "experiment_id": parts[keys[1]],
                "deployment_id": parts[keys[2]],
                "currency": parts["billing_currency"],
                "recent": pc.greater_equal(
                    parts["charge_period_start"],
                    pa.scalar(self.since, parts["charge_period_start"].type),
                ),
                "amount": parts["effective_cost"],
            }
        )
        grouped = table.group_by(
            ["project_id", "experiment_id", "deployment_id", "currency", "recent"]
        ).aggregate([("amount", "sum"), ([], "count_all")])
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
            row[2] += item["count_all"]

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


def attribution_refresh(
    *,
    resource_ids: list[str] | None = None,
    attribution_run: AttributionRun | None = None,
    moves: Moves | None = None,
) -> int:
    """Attribute again the lines of these resources (all lines when None); rebuild the rollups
    of the days that changed. Returns how many source lines changed owner.

    With a run, its progress (deliveries done of those in scope, lines changed so far) is written
    as it goes; `moves` collects the spend that changed owner."""
    progress = _RunProgress(attribution_run)
    attributor = Attributor.load()
    keys = None
    if resource_ids is None:
        scopes = list(
            Delivery.objects.filter(status=Delivery.Status.CURRENT)
            .exclude(first_charge_period_start=None)
            .values_list("pk", "first_charge_period_start", "last_charge_period_start")
        )
    else:
        keys = sorted({r.strip().lower() for r in resource_ids if r.strip()})
        scopes = [
            (item["delivery_id"], _day_start(item["first"]), _day_start(item["last"]))
            for item in DailyResourceCost.objects.annotate(key=Lower("resource_id"))
            .filter(key__in=keys)
            .values("delivery_id")
            .annotate(first=Min("day"), last=Max("day"))
            .order_by("delivery_id")
        ]
    progress.write(deliveries_total=len(scopes), force=True)
    changed = 0
    for done, (delivery_id, first, last) in enumerate(scopes, start=1):
        with transaction.atomic():
            # Wait for (and then skip) an import replacing this delivery meanwhile.
            if (
                Delivery.objects.select_for_update()
                .filter(pk=delivery_id, status=Delivery.Status.CURRENT)
                .exists()
            ):
                changed += _refresh_delivery(
                    delivery_id, first, last, keys, attributor, moves, progress, changed
                )
        progress.write(deliveries_done=done, lines_changed=changed, force=True)
    return changed


def _refresh_delivery(
    delivery_id: int,
    first,
    last,
    keys: list[str] | None,
    attributor: Attributor,
    moves: Moves | None,
    progress: _RunProgress,
    changed_before: int,
) -> int:
    start = _day_start(first)
    end = _day_start(last) + timedelta(days=1)
    days: set = set()
    changed = 0
    delivery = Delivery.objects.get(pk=delivery_id)
    for chunk in _line_chunks(delivery, start, end, keys):
        changed += _reattribute(chunk, attributor, days, moves)
        progress.write(lines_changed=changed_before + changed)
    # Parts written again have new ids: the delivery's range must cover them.
    Delivery.objects.filter(pk=delivery_id).update(last_line_id=_last_line_id())
    if days:
        rollups_rebuild(
            delivery_id=delivery_id,
            start=_day_start(min(days)),
            end=_day_start(max(days)) + timedelta(days=1),
        )
        monthly_rebuild(delivery_id=delivery_id)
        spend_data_changed.announce(
            start=_day_start(min(days)).date(),
            end=(_day_start(max(days)) + timedelta(days=1)).date(),
            reason="reattribution",
        )
    return changed


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


def attribution_dry_run(*, attributor: Attributor, narrow=None) -> Moves:
    """What re-attributing all history with these facts would move, without writing anything.

    It runs the same code as attribution_refresh on the same lines, so it is exact; `narrow`
    (a function of a line queryset) may leave out lines the change cannot touch.
    """
    moves = Moves()
    deliveries = Delivery.objects.filter(status=Delivery.Status.CURRENT).exclude(
        first_charge_period_start=None
    )
    for delivery in deliveries.order_by("pk"):
        for chunk in _line_chunks(delivery, None, None, None, narrow=narrow, names=DRY_RUN_COLUMNS):
            _record_moves(_diff(chunk, attributor), moves)
    return moves


def _day_start(moment) -> datetime:
    if isinstance(moment, datetime):
        moment = moment.astimezone(UTC).date()
    return datetime(moment.year, moment.month, moment.day, tzinfo=UTC)


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
):
    """The delivery's lines in the window (all when None) as Arrow tables, in id order, every
    part of a source row in the same chunk (a shared line's parts have adjacent ids).

    Each chunk is one query of at most REFRESH_CHUNK lines after the last id of the one before;
    `read` turns that query into a table (`_chunk_reader()`: COPY on PostgreSQL, the ORM
    elsewhere; both give the same table)."""
    read = read or _chunk_reader()
    names = names or ["id", *LINE_COLUMNS]
    lines = CostLineItem.objects.of_delivery(delivery)
    if start is not None:
        lines = lines.filter(charge_period_start__gte=start, charge_period_start__lt=end)
    if keys is not None:
        lines = lines.annotate(key=Lower("resource_id")).filter(key__in=keys)
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
        moves.lines += len(changed)
    return len(changed)


def _reattribute(
    lines: pa.Table, attributor: Attributor, days: set, moves: Moves | None = None
) -> int:
    """Attribute one chunk again and write what changed; returns the source lines changed."""
    diff = _diff(lines, attributor)
    update = diff.update
    rewrite_rows = diff.rewrite_rows
    if update.num_rows:
        _update_attribution(update.select(["id", *ATTRIBUTION_UPDATE]))
        days.update(line_days(update).to_pylist())
    if rewrite_rows:
        wanted = pa.array(sorted(rewrite_rows), pa.int64())
        rewritten = diff.fresh.filter(pc.is_in(diff.fresh["source_row"], value_set=wanted))
        old_parts = diff.old.filter(pc.is_in(diff.old["source_row"], value_set=wanted))[
            "id"
        ].to_pylist()
        CostLineItem.objects.filter(id__in=old_parts).delete()
        sink = LineSink.for_connection()
        sink.write(rewritten)
        sink.pause()
        days.update(line_days(rewritten).to_pylist())
    return _record_moves(diff, moves)


ATTRIBUTION_UPDATE = ["project_id", "experiment_id", "deployment_id", "workload", "attributed_by"]


def _update_attribution(changes: pa.Table) -> None:
    """Write the new attribution of whole lines (columns `id` and ATTRIBUTION_UPDATE).

    On PostgreSQL the changes are copied into a temporary table and applied by one UPDATE ...
    FROM: one statement per line (executemany) was most of a re-attribution's time. The table
    lives until the delivery's transaction ends."""
    line_table = CostLineItem._meta.db_table
    assignments = ", ".join(f"{name} = changed.{name}" for name in ATTRIBUTION_UPDATE)
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.executemany(
                f"UPDATE {line_table} SET {', '.join(f'{n} = %s' for n in ATTRIBUTION_UPDATE)} "
                "WHERE id = %s",
                [(*row[1:], row[0]) for row in zip(*changes.to_pydict().values(), strict=True)],
            )
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMPORARY TABLE IF NOT EXISTS reattributed_lines (id bigint PRIMARY KEY, "
            "project_id bigint, experiment_id bigint, deployment_id bigint, "
            "workload varchar(20) NOT NULL, attributed_by varchar(10) NOT NULL) ON COMMIT DROP"
        )
        cursor.execute("TRUNCATE reattributed_lines")
        copy_table("reattributed_lines", changes)
        cursor.execute(
            f"UPDATE {line_table} AS line SET {assignments} FROM reattributed_lines AS changed "
            "WHERE line.id = changed.id"
        )


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
