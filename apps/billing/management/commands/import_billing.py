"""python manage.py import_billing PATH [PATH ...] [--format FORMAT] [--json] [--async]"""

import json
import os
import time
from functools import partial
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.billing.formats import format_names
from apps.billing.services import import_run_create, import_run_enqueue, import_run_execute

# The fields every delivery line carries, in this order (`error` only when it failed).
FIELDS = (
    "file",
    "format",
    "status",
    "rows",
    "line_items",
    "billed_cost",
    "effective_cost",
    "billing_period_start",
    "billing_period_end",
    "seconds",
    "notes",
)


class Command(BaseCommand):
    # No system checks: they load every URL and view (about a second of the command's start,
    # bench/import_focus.py --command), and an import needs neither. The server, migrate and
    # `manage.py check` run them.
    requires_system_checks = []
    help = (
        "Import billing files: FOCUS 1.x, AWS CUR (legacy, Parquet, 2.0, or a CUR manifest), the "
        "GCP billing export, Azure EA and MCA cost details; CSV, gzip CSV, NDJSON or Parquet. Each "
        "PATH is one import, all or nothing; a file already loaded is reported unchanged. Exits "
        "non-zero if any failed."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="PATH")
        parser.add_argument(
            "--format",
            default="auto",
            choices=format_names(),
            help="The files' format (default: auto, detected from each file's header).",
        )
        parser.add_argument(
            "--json",
            action="store_true",
            help="Print one JSON object per line per delivery.",
        )
        parser.add_argument(
            "--async",
            action="store_true",
            dest="enqueue",
            help="Queue the imports for a Celery worker instead of running them here.",
        )

    def handle(self, *args, paths, format, json: bool, enqueue: bool, **options):
        failures = 0
        importing = after = 0.0
        for given in paths:
            run = import_run_create(paths=[given], requested_format=format)
            if enqueue:
                import_run_enqueue(import_run=run)
                self._print({"file": given, "status": "queued", "import_run": run.pk}, json)
                continue
            started = time.monotonic()
            moments = []
            run = import_run_execute(import_run=run, committed=partial(_now_into, moments))
            finished = time.monotonic()
            # The import: from its claim to its commit (its rollups and the delivery's record
            # included); after it, the work its commit started (run here when Celery runs tasks
            # in this process). A run that failed or found nothing new committed nothing.
            committed = moments[0] if moments else finished
            importing += committed - started
            after += finished - committed
            for result in run.results:
                line = {name: result.get(name) for name in FIELDS}
                line["file"] = (
                    given if Path(result["file"]) == Path(given).resolve() else (result["file"])
                )
                if result["status"] == "failed":
                    failures += 1
                    line["error"] = result.get("error", "")
                line["billing_account_id"] = result.get("billing_account_id")
                line["import_run"] = run.pk
                self._print(line, json)
        if not json and not enqueue:
            self.stdout.write(self._whole_run(importing, after))
        if failures:
            raise CommandError(f"{failures} of the imported deliveries failed.", returncode=1)

    def _whole_run(self, importing: float, after: float) -> str:
        """Where the command's time went, from the process's start: the seconds on each line
        above are the imports' alone."""
        line = f"done       importing {importing:.1f} s"
        if after >= 0.05:
            line += f", then {after:.1f} s of the work the imports started"
            if settings.CELERY_TASK_ALWAYS_EAGER:
                line += (
                    " (the findings recompute and the rest, run in this process as Celery "
                    "runs tasks eagerly here; with CELERY_TASK_ALWAYS_EAGER=false a worker "
                    "takes it)"
                )
        since = _seconds_since_process_start()
        if since is not None:
            line += f"; {since:.1f} s since the process started"
        return line

    def _print(self, line: dict, as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps(line))
            return
        if line["status"] == "queued":
            self.stdout.write(f"queued     {line['file']} (import run {line['import_run']})")
            return
        if line["status"] == "failed":
            self.stdout.write(self.style.ERROR(f"failed     {line['error']}"))
            return
        money = ", ".join(f"{c} {a}" for c, a in line["effective_cost"].items()) or "nothing"
        billed = ", ".join(f"{c} {a}" for c, a in line["billed_cost"].items()) or "nothing"
        period = (line["billing_period_start"] or "")[:7]
        self.stdout.write(
            f"{line['status']:<10} {line['file']}: account {line['billing_account_id']}, "
            f"{period}, {line['rows']} rows, {line['line_items']} line items, "
            f"spend {money}, billed {billed} ({line['seconds']} s)"
        )
        for note in line.get("notes") or ():
            self.stdout.write(f"note       {note}")


def _now_into(moments: list) -> None:
    moments.append(time.monotonic())


def _seconds_since_process_start() -> float | None:
    """Wall seconds since this process started (Linux: /proc), start-up included; None where
    that cannot be read."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # starttime: the 22nd field, in clock ticks after boot
        boot = next(
            int(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        return time.time() - (boot + ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
