"""The import engine: one import run's files loaded as deliveries, inside its transaction.

services.import_run_execute claims the run and drives it; see services.py for the rules."""

import contextlib
import hashlib
import importlib.abc
import logging
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from apps.projects.ports import spend_data_changed

from .attribution import Attributor
from .errors import (
    BillingFileError,
    BillingRowError,
    MissingColumnError,
    SourceValueError,
)
from .formats import FORMATS, BillingFormat, format_detect
from .formats.aws_cur import manifest_parts
from .formats.base import ColumnMap
from .formats.focus import SIGNATURE
from .loader import (
    LineSink,
    RollupAccumulator,
    monthly_rebuild,
    storage_summary_drop,
    storage_summary_rebuild,
)
from .models import (
    BillingSource,
    CostLineItem,
    DailyCost,
    DailyModelApiCost,
    DailyProjectCost,
    DailyResourceCost,
    DailyStorageCost,
    Delivery,
    ImportRun,
    MonthlyCost,
    MonthlyResourceCost,
)
from .normalise import SOURCE_ROWS, FocusNormaliser
from .reader import SourceFile, read_ahead, source_inspect
from .runs import PROGRESS_EVERY_SECONDS, _counts, _day_start, _last_line_id, money_text
from .sources import root_of

logger = logging.getLogger(__name__)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class _NoPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pyarrow's look for pandas, answered: not in an import")
        return None


def _arrow_without_pandas() -> None:
    """The first time pyarrow turns a Python value into Arrow it imports pandas, to ask whether
    the value is a pandas object: 30 MB and 0.4 s of every import process, for a library the
    import never uses. That one look finds none here, and pyarrow then leaves pandas alone
    except where asked for it by name (`to_pandas`, `Table.from_pandas`, which import it then).
    costsite hands pyarrow no pandas objects (the storage forecast uses pandas without Arrow);
    tests/billing/test_import_process.py checks that an import leaves pandas unimported."""
    if "pandas" in sys.modules:
        return
    blocker = _NoPandas()
    sys.meta_path.insert(0, blocker)
    try:
        pa.scalar(0)
    finally:
        sys.meta_path.remove(blocker)


def _arrow_memory_pool() -> None:
    """Use jemalloc for Arrow when the build has it: it hands freed memory back to the system
    sooner than the default mimalloc; on a million rows the peak fell from 282 to 249 MB."""
    with contextlib.suppress(NotImplementedError, pa.ArrowNotImplementedError):
        pa.set_memory_pool(pa.jemalloc_memory_pool())


def _batch_rows() -> int:
    """Lines read, mapped, attributed and handed to COPY at a time. Several batches are alive at
    once (one read and attributed while the one before waits in the COPY feeder's queue and
    another is loaded): 10,000 rather than 20,000 took the peak of a million CUR Parquet lines
    from 305 to 253 MB, and of FOCUS CSV from 273 to 234 MB, at the same speed (bench/
    import_cur_parquet.py and bench/import_focus.py --command --queued, 4 December 2026)."""
    return int(getattr(settings, "BILLING_IMPORT_BATCH_ROWS", 10_000))


def _money_json(amounts: dict[str, Decimal]) -> dict[str, str]:
    return {currency: money_text(amount) for currency, amount in sorted(amounts.items())}


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


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
    usage_end: datetime | None = None  # the newest end of a usage line: what freshness reads


def _usage_lines(lines: pa.Table, columns: list[str]) -> pa.Table:
    """The lines that say how far the bill has got: usage charged as used. A purchase, a fee
    or a recurring line covers its whole period the day it is billed (a savings plan's monthly
    fee ends on the month's last day), so it never moves "data as of". Only `columns` of them
    (filtering every column copied the whole batch, for one maximum)."""
    usage = pc.fill_null(pc.equal(lines["charge_category"], "Usage"), False)
    if "charge_frequency" in lines.column_names:
        frequency = lines["charge_frequency"]
        # Formats without ChargeFrequency leave it empty; where it is given it must be usage-based.
        usage = pc.and_(
            usage,
            pc.fill_null(pc.or_(pc.equal(frequency, "Usage-Based"), pc.equal(frequency, "")), True),
        )
    return lines.select(columns).filter(usage)


def _focused(
    batches: Iterator[pa.RecordBatch], fmt: BillingFormat, columns: ColumnMap
) -> Iterator[tuple]:
    """Each batch with its FOCUS columns, or with the error that mapping it raised (the caller
    knows the batch's first row, which names it). A per-request format's mapping runs on the
    read-ahead thread: it touches no database."""
    for batch in batches:
        try:
            focus = fmt.to_focus(batch, columns)
        except SourceValueError as exc:
            yield batch, exc
            return
        yield batch, focus


def _source_rows(lines: pa.Table) -> int:
    """The source rows the lines hold (more than the lines where requests were rolled up)."""
    if SOURCE_ROWS in lines.column_names:
        return pc.sum(lines[SOURCE_ROWS]).as_py() or 0
    return lines.num_rows


def _usage_end(lines: pa.Table) -> datetime | None:
    usage = _usage_lines(lines, ["charge_period_end"])
    return pc.max(usage["charge_period_end"]).as_py() if usage.num_rows else None


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
        _arrow_without_pandas()
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
        root = (
            root_of(origin) if origin is not None and origin.kind != BillingSource.Kind.S3 else None
        )
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
            label=source.label,
            columns=columns,
            spelled_nulls=source.kind == "parquet",
            per_request=fmt.per_request,
        )
        first_row = source.first_row  # CSV's header is row 1
        batches = _focused(source.batches(columns.source_columns, rows=_batch_rows()), fmt, columns)
        if fmt.per_request:
            # The database has little to do: the next batch is read and mapped meanwhile.
            batches = read_ahead(batches)
        try:
            for batch, focus in batches:
                self._file_rows = first_row - source.first_row  # read before this batch
                if isinstance(focus, SourceValueError):
                    raise focus.at(source.label, first_row) from None
                rows = batch.num_rows
                if not len(next(iter(focus.values()))):  # every request was listed before
                    first_row += rows
                    self.rows_done += rows
                    continue
                extras = fmt.extras(batch, columns)
                lines = normaliser.normalise(focus, extras, first_row=first_row)
                del batch, focus, extras  # the source's text is let go before the load
                first_row += rows
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
                self.rows_done += rows
                self._progress(source)
            self.sink.pause()
        except BaseException as exc:
            self.sink.pause(failure=exc)
            if isinstance(exc, BillingRowError) and source.kind == "json":
                raise source.json_row_error(exc) from None  # named by its JSON path
            raise
        finally:
            batches.close()  # stops a read-ahead thread at once
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
            tally.rows += _source_rows(lines)
            starts = pc.min_max(lines["charge_period_start"]).as_py()
            tally.first_start = _earliest(tally.first_start, starts["min"])
            tally.last_start = _latest(tally.last_start, starts["max"])
            tally.last_end = _latest(tally.last_end, pc.max(lines["charge_period_end"]).as_py())
            tally.usage_end = _latest(tally.usage_end, _usage_end(lines))
            return
        money = lines.group_by(["delivery_id", "billing_currency"]).aggregate(
            [("billed_cost", "sum"), ("effective_cost", "sum")]
        )
        for item in money.to_pylist():
            tally = _by_id(tallies, item["delivery_id"])
            tally.billed[item["billing_currency"]] += item["billed_cost_sum"]
            tally.effective[item["billing_currency"]] += item["effective_cost_sum"]
        rolled_up = SOURCE_ROWS in lines.column_names
        spans = lines.group_by("delivery_id").aggregate(
            [
                (SOURCE_ROWS, "sum") if rolled_up else ([], "count_all"),
                ("charge_period_start", "min"),
                ("charge_period_start", "max"),
                ("charge_period_end", "max"),
            ]
        )
        for item in spans.to_pylist():
            tally = _by_id(tallies, item["delivery_id"])
            tally.rows += item[f"{SOURCE_ROWS}_sum"] if rolled_up else item["count_all"]
            tally.first_start = _earliest(tally.first_start, item["charge_period_start_min"])
            tally.last_start = _latest(tally.last_start, item["charge_period_start_max"])
            tally.last_end = _latest(tally.last_end, item["charge_period_end_max"])
        usage = _usage_lines(lines, ["delivery_id", "charge_period_end"])
        if usage.num_rows:
            ends = usage.group_by("delivery_id").aggregate([("charge_period_end", "max")])
            for item in ends.to_pylist():
                tally = _by_id(tallies, item["delivery_id"])
                tally.usage_end = _latest(tally.usage_end, item["charge_period_end_max"])

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
            delivery.max_usage_period_end = tally.usage_end
            delivery.last_line_id = _last_line_id()
            delivery.save()
            rollups.write(delivery_ids=[delivery.pk])
            monthly_rebuild(delivery_id=delivery.pk)
            storage_summary_rebuild(delivery_id=delivery.pk)
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


def _earliest(a, b):
    return b if a is None or (b is not None and b < a) else a


def _latest(a, b):
    return b if a is None or (b is not None and b > a) else a


def delivery_drop_lines(*, delivery: Delivery) -> None:
    """Delete a delivery's line items and rollup rows (it is being replaced)."""
    CostLineItem.objects.of_delivery(delivery).delete()
    DailyCost.objects.filter(delivery_id=delivery.pk).delete()
    MonthlyCost.objects.filter(delivery_id=delivery.pk).delete()
    DailyProjectCost.objects.filter(delivery_id=delivery.pk).delete()
    DailyResourceCost.objects.filter(delivery_id=delivery.pk).delete()
    MonthlyResourceCost.objects.filter(delivery_id=delivery.pk).delete()
    DailyStorageCost.objects.filter(delivery_id=delivery.pk).delete()
    storage_summary_drop(delivery_id=delivery.pk)
    DailyModelApiCost.objects.filter(delivery_id=delivery.pk).delete()


# -- re-attribution --------------------------------------------------------------------------
