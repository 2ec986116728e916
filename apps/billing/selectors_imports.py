"""Reads of the imports pages: runs filtered by where they came from and their status, and each
run's progress, speed, totals and deliveries as the page shows them.

Progress (rows_done, rows_total, heartbeat_at) is written by the importer through the `progress`
connection and committed at once, so a plain read here sees it while the load itself is still
uncommitted.
"""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path

from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from .models import Delivery, ImportRun

# The source filter's two groups that are not a BillingSource.
SOURCE_UPLOADS = "uploads"
SOURCE_COMMAND = "command"

BADGES = {
    ImportRun.Status.QUEUED: "badge-planned",
    ImportRun.Status.RUNNING: "badge-running",
    ImportRun.Status.SUCCEEDED: "badge-succeeded",
    ImportRun.Status.UNCHANGED: "",
    ImportRun.Status.FAILED: "badge-failed",
}


@dataclass(frozen=True)
class CurrencyTotal:
    currency: str
    effective: Decimal
    billed: Decimal


def _totals(effective: dict, billed: dict) -> list[CurrencyTotal]:
    currencies = sorted(set(effective) | set(billed))
    return [
        CurrencyTotal(
            currency=currency,
            effective=Decimal(effective.get(currency, "0")),
            billed=Decimal(billed.get(currency, "0")),
        )
        for currency in currencies
    ]


@dataclass
class RunView:
    """One run as the pages show it."""

    run: ImportRun
    now: datetime

    @property
    def seconds(self) -> float | None:
        """Time spent so far (or in all, once done); None before it starts."""
        if self.run.started_at is None:
            return None
        end = self.run.finished_at or self.now
        return max((end - self.run.started_at).total_seconds(), 0.0)

    @property
    def duration(self) -> str:
        """4.2 s, 3 min 04 s, 1 h 02 min; empty before it starts."""
        seconds = self.seconds
        if seconds is None:
            return ""
        if seconds < 60:
            return f"{seconds:.1f} s"
        whole = int(seconds)
        if whole < 3600:
            return f"{whole // 60} min {whole % 60:02d} s"
        return f"{whole // 3600} h {whole % 3600 // 60:02d} min"

    @property
    def rows_per_second(self) -> int | None:
        seconds = self.seconds
        if not seconds or not self.run.rows_done:
            return None
        return round(self.run.rows_done / seconds)

    @property
    def percent(self) -> int | None:
        """Share of rows done, 0–100; None while the total is unknown. A CSV's total is an
        estimate from the bytes read, so a running run shows at most 99."""
        run = self.run
        if run.status in (ImportRun.Status.SUCCEEDED, ImportRun.Status.UNCHANGED):
            return 100
        if run.status == ImportRun.Status.QUEUED:
            return 0
        if not run.rows_total:
            return None
        share = int(run.rows_done * 100 / run.rows_total)
        return min(share, 99 if run.status == ImportRun.Status.RUNNING else 100)

    @property
    def indeterminate(self) -> bool:
        """A bar without a value (it moves to and fro) while a running run's total is unknown;
        a finished run without one shows no bar: it must not look as if it still worked."""
        return self.percent is None and not self.run.is_done

    @property
    def badge(self) -> str:
        return BADGES.get(self.run.status, "")

    @property
    def origin_label(self) -> str:
        if self.run.origin == ImportRun.Origin.SOURCE:
            return self.run.source.name if self.run.source else "A source since deleted"
        return self.run.get_origin_display()

    @property
    def totals(self) -> list[CurrencyTotal]:
        return _totals(self.run.effective_cost, self.run.billed_cost)

    @property
    def stored_names(self) -> list[str]:
        """The files' names on the server: the importer's errors name these."""
        return [Path(path).name for path in self.run.paths]


@dataclass
class DeliveryView:
    """One delivery a run met, from the run's results: loaded, unchanged or failed."""

    file: str
    status: str
    format: str
    billing_account_id: str
    period_start: datetime | None
    period_end: datetime | None
    rows: int
    line_items: int
    totals: list[CurrencyTotal]
    error: str
    delivery: Delivery | None = None
    replaced: Delivery | None = None

    @property
    def file_name(self) -> str:
        return Path(self.file).name if self.file else ""


def import_runs(*, source: str = "", status: str = "") -> QuerySet[ImportRun]:
    """Runs, newest first. `source` is a BillingSource's pk, "uploads" or "command"."""
    runs = ImportRun.objects.select_related("source", "created_by").order_by("-created_at", "-pk")
    if source == SOURCE_UPLOADS:
        runs = runs.filter(origin=ImportRun.Origin.UPLOAD)
    elif source == SOURCE_COMMAND:
        runs = runs.filter(origin=ImportRun.Origin.COMMAND)
    elif source.isdigit():
        runs = runs.filter(origin=ImportRun.Origin.SOURCE, source_id=int(source))
    if status:
        runs = runs.filter(status=status)
    return runs


def import_run_views(*, runs, now: datetime | None = None) -> list[RunView]:
    now = now or timezone.now()
    return [RunView(run=run, now=now) for run in runs]


def import_run_view(*, run: ImportRun, now: datetime | None = None) -> RunView:
    return RunView(run=run, now=now or timezone.now())


def import_run_get(*, pk: int) -> ImportRun:
    return ImportRun.objects.select_related("source", "created_by", "poll").get(pk=pk)


def import_run_deliveries(*, run: ImportRun) -> list[DeliveryView]:
    """What the run did per delivery, as the importer recorded it in its results, with the
    delivery rows it made and the ones it replaced."""
    results = [r for r in run.results or [] if isinstance(r, dict)]
    ids = {r.get("delivery") for r in results} | {r.get("replaced") for r in results}
    deliveries = Delivery.objects.select_related("import_run").in_bulk(
        [pk for pk in ids if isinstance(pk, int)]
    )
    views = []
    for result in results:
        start = result.get("billing_period_start")
        end = result.get("billing_period_end")
        views.append(
            DeliveryView(
                file=result.get("file", ""),
                status=result.get("status", ""),
                format=result.get("format", ""),
                billing_account_id=result.get("billing_account_id", ""),
                period_start=parse_datetime(start) if start else None,
                period_end=parse_datetime(end) if end else None,
                rows=result.get("rows") or 0,
                line_items=result.get("line_items") or 0,
                totals=_totals(result.get("effective_cost") or {}, result.get("billed_cost") or {}),
                error=result.get("error", ""),
                delivery=deliveries.get(result.get("delivery")),
                replaced=deliveries.get(result.get("replaced")),
            )
        )
    return views
