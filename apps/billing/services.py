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

import logging
import time
from pathlib import Path

from django.contrib.auth.models import AbstractBaseUser
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.db.models import Max, Min, Q
from django.db.models.functions import Lower
from django.utils import timezone

from costsite.celery import task_enqueue_on_commit

from .attribution import Attributor
from .errors import (
    BillingImportError,
)
from .formats import format_names
from .importing import (  # noqa: F401  (the import engine; re-exported for callers)
    _finish,
    _Importer,
    _NothingNew,
    delivery_drop_lines,
)
from .models import (
    AttributionRun,
    BillingSource,
    DailyResourceCost,
    Delivery,
    ImportRun,
    SourcePoll,
)
from .reattribution import (  # noqa: F401  (the re-attribution engine; re-exported)
    DRY_RUN_COLUMNS,
    RECENT_DAYS,
    REFRESH_CHUNK,
    Moves,
    _diff,
    _line_chunks,
    _lines_read_ahead,
    _may_read_ahead,
    _record_moves,
    _refresh_delivery,
    _RunProgress,
    lines_dry_run,
    unreached_dry_run,
)
from .runs import STALE_AFTER, _day_start, money_text  # noqa: F401

logger = logging.getLogger(__name__)

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
    task_enqueue_on_commit("apps.billing.tasks.import_run_execute_task", import_run.pk)


# How long a run whose database went away keeps trying to hand itself back: a restart of
# PostgreSQL takes a second or two. Past it, the reaper hands it back once it is stale.
HAND_BACK_SECONDS = 15.0


def _run_hand_back(model, *, pk: int, started_at) -> None:
    """Queue again a run this process claimed (at `started_at`) and could not finish because
    the database went away, so that the task's retry claims it at once instead of finding it
    running. Tried on a fresh connection until the database answers, for HAND_BACK_SECONDS;
    only this claim is handed back, never a run another worker has claimed since."""
    deadline = time.monotonic() + HAND_BACK_SECONDS
    while True:
        try:
            if not connection.in_atomic_block:  # never under a caller's transaction
                connection.close_if_unusable_or_obsolete()  # a broken one: the update reopens
            model.objects.filter(pk=pk, status=model.Status.RUNNING, started_at=started_at).update(
                status=model.Status.QUEUED
            )
            return
        except DatabaseError:
            if time.monotonic() > deadline:
                logger.exception("%s %s: could not hand the run back", model.__name__, pk)
                return
            time.sleep(0.5)


def import_run_execute(*, import_run: ImportRun, committed=None) -> ImportRun:
    """Claim the run and load its files; it ends succeeded, unchanged or failed.

    Two workers never run it twice: the claim is a conditional UPDATE from queued (or from a
    running run whose process stopped beating) to running, and whoever updates nothing gives up.
    `committed`, if given, is called as soon as the load commits, before the work the commit
    starts (the tasks the ports enqueue, run here when Celery runs them eagerly).
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
            if committed is not None:
                transaction.on_commit(committed)  # the first of the commit's callbacks
            importer.run()
    except _NothingNew:
        _finish(import_run, ImportRun.Status.UNCHANGED, results=importer.results)
    except BillingImportError as exc:
        _finish(import_run, ImportRun.Status.FAILED, error=str(exc), results=importer.failed(exc))
    except (OperationalError, InterfaceError):
        # The database went away: hand the run back so that a retry of the task claims it.
        _run_hand_back(ImportRun, pk=import_run.pk, started_at=now)
        raise
    except Exception as exc:
        logger.exception("import run %s failed", import_run.pk)
        error = f"Internal error ({exc.__class__.__name__}: {exc}); nothing was loaded."
        _finish(import_run, ImportRun.Status.FAILED, error=error, results=importer.failed(exc))
    import_run.refresh_from_db()
    return import_run


def billing_runs_reap(*, now=None) -> list[tuple[str, int]]:
    """Hand back the import and re-attribution runs that nothing is working on, and enqueue
    each again: a running run whose process stopped beating for `STALE_AFTER` (a worker killed
    mid-run), and a queued run that has waited as long (its message lost with a broker that
    restarted empty). Returns (kind, id) of each.

    Safe however often it runs and beside the workers: each run is handed back with a
    conditional UPDATE on the heartbeat it was seen with, which also restarts its clock, so a
    run is enqueued again at most once per `STALE_AFTER`; a message that finds the run claimed
    (its first one came back too) does nothing.
    """
    now = now or timezone.now()
    cutoff = now - STALE_AFTER
    reaped = []
    for kind, model, task in (
        ("import", ImportRun, "apps.billing.tasks.import_run_execute_task"),
        ("attribution", AttributionRun, "apps.billing.tasks.attribution_refresh_task"),
    ):
        stuck = model.objects.filter(
            Q(status=model.Status.RUNNING, heartbeat_at__lt=cutoff)
            | Q(status=model.Status.QUEUED, heartbeat_at__lt=cutoff)
            | Q(status=model.Status.QUEUED, heartbeat_at=None, created_at__lt=cutoff)
        )
        for pk, heartbeat_at in stuck.values_list("pk", "heartbeat_at"):
            handed_back = (
                model.objects.filter(pk=pk, heartbeat_at=heartbeat_at)
                .filter(status__in=[model.Status.RUNNING, model.Status.QUEUED])
                .update(status=model.Status.QUEUED, heartbeat_at=now)
            )
            if handed_back:
                logger.warning("%s run %s was stuck: handed back and enqueued again", kind, pk)
                task_enqueue_on_commit(task, pk)
                reaped.append((kind, pk))
    return reaped


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
    ids = None
    if resource_ids is not None:
        ids = sorted({r.strip() for r in resource_ids if r and r.strip()})
        if not ids:
            return None
    run = AttributionRun.objects.create(
        reason=reason[:500], resource_ids=ids, created_by=created_by
    )
    task_enqueue_on_commit("apps.billing.tasks.attribution_refresh_task", run.pk)
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
        _run_hand_back(AttributionRun, pk=run.pk, started_at=now)
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


def attribution_refresh(
    *,
    resource_ids: list[str] | None = None,
    attribution_run: AttributionRun | None = None,
    moves: Moves | None = None,
) -> int:
    """Attribute again the lines of these resources (all lines when None); rebuild the rollups
    of the days that changed (all of each delivery's days when None: they are summed from the
    lines read). Returns how many source lines changed owner.

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
            # A model API key may be a line's sub-account (a project, workspace or team).
            for item in DailyResourceCost.objects.annotate(
                key=Lower("resource_id"), sub_key=Lower("sub_account_id")
            )
            .filter(Q(key__in=keys) | Q(sub_key__in=keys))
            .values("delivery_id")
            .annotate(first=Min("day"), last=Max("day"))
            .order_by("delivery_id")
        ]
    progress.write(deliveries_total=len(scopes), force=True)
    ahead = _may_read_ahead()
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
                    delivery_id, first, last, keys, attributor, moves, progress, changed, ahead
                )
        progress.write(deliveries_done=done, lines_changed=changed, force=True)
    return changed


def attribution_dry_run(*, attributor: Attributor, narrow=None) -> Moves:
    """What re-attributing all history with these facts would move, without writing anything.

    It runs the same code as attribution_refresh on the same lines, so it is exact; `narrow`
    (a function of a line queryset) may leave out lines the change cannot touch.
    """
    moves = Moves()
    lines_dry_run(moves, attributor=attributor, narrow=narrow)
    return moves


# The BRIN index of the lines' charge periods (migration 0012, PostgreSQL only).
LINE_PERIOD_BRIN = "lineitem_charge_period_brin"


def line_period_index_summarise() -> None:
    """Summarise the page ranges of the line table written since the BRIN index last was.

    BRIN summarises new pages only when asked (or through autovacuum, which may be off); a range
    not summarised is still read by every query that uses the index, so this is never needed for
    a right answer, only for a fast one. Its reader, the findings recompute, asks before it
    starts: the cost is a read of the pages imports appended since, and no import pays it.
    Elsewhere (SQLite) there is no such index."""
    if connection.vendor != "postgresql":
        return
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            # to_regclass: null (nothing done) on a database not migrated this far.
            cursor.execute("SELECT brin_summarize_new_values(to_regclass(%s))", [LINE_PERIOD_BRIN])
    except DatabaseError:
        logger.warning("The lines' BRIN index was not summarised", exc_info=True)
