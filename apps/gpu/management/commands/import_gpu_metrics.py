"""python manage.py import_gpu_metrics PATH [PATH ...] [--format ...] [--host NAME]
[--timezone TZ] [--at TIMESTAMP] [--json]

Imports each file through the same service the Celery task runs, in this process. With --json,
one JSON object per file and line: file, format, status (succeeded, unchanged, failed), samples,
gpus, hours, and error on failure. Exits non-zero if any file failed.
"""

import json
import zoneinfo
from datetime import datetime

from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_datetime

from apps.accounts.models import Organization
from apps.gpu import services
from apps.gpu.formats import FORMATS
from apps.gpu.models import MetricImport


def _zone(name: str) -> zoneinfo.ZoneInfo:
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise CommandError(
            f"--timezone: unknown time zone {name!r} (e.g. Europe/Berlin)."
        ) from None


def _moment(text: str, zone: zoneinfo.ZoneInfo) -> datetime:
    value = parse_datetime(text.strip().replace(" ", "T", 1))
    if value is None:
        raise CommandError(f"--at: {text!r} is not a time like 2026-07-14T08:12:53+00:00.")
    return value if value.tzinfo else value.replace(tzinfo=zone)


class Command(BaseCommand):
    help = "Import GPU metrics files (dcgm-exporter scrapes, Prometheus JSON, nvidia-smi CSV)."
    # No system checks, as import_billing: they load every URL and view, about a second.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="PATH")
        parser.add_argument("--format", default="auto", choices=["auto", *FORMATS])
        parser.add_argument(
            "--host",
            default="",
            help="The host the GPUs are on, where the data names none (nvidia-smi logs, "
            "exporters run with --no-hostname).",
        )
        parser.add_argument(
            "--timezone",
            default="",
            help="The zone of nvidia-smi's timestamps, and of --at without an offset "
            "(default: the organisation's).",
        )
        parser.add_argument(
            "--at",
            default="",
            help="When a dcgm-exporter scrape was taken (default: the file's modification time).",
        )
        parser.add_argument("--json", action="store_true", help="One JSON object per file.")

    def handle(self, *args, **options):
        zone_name = options["timezone"] or Organization.get().time_zone
        zone = _zone(zone_name)
        taken_at = _moment(options["at"], zone) if options["at"] else None
        failed = 0
        for path in options["paths"]:
            metric_import = services.metric_import_create(
                path=path,
                requested_format=options["format"],
                host=options["host"],
                time_zone=zone_name,
                taken_at=taken_at,
            )
            metric_import = services.metric_import_execute(metric_import=metric_import)
            failed += metric_import.status == MetricImport.Status.FAILED
            self._report(metric_import, as_json=options["json"])
        if failed:
            raise CommandError(f"{failed} of {len(options['paths'])} files failed.", returncode=1)

    def _report(self, metric_import: MetricImport, *, as_json: bool) -> None:
        if as_json:
            record = {
                "file": metric_import.path,
                "format": metric_import.format or metric_import.requested_format,
                "status": metric_import.status,
                "samples": metric_import.samples,
                "gpus": metric_import.gpus,
                "hours": metric_import.hours,
            }
            if metric_import.status == MetricImport.Status.FAILED:
                record["error"] = metric_import.error
            self.stdout.write(json.dumps(record))
        elif metric_import.status == MetricImport.Status.FAILED:
            self.stderr.write(f"{metric_import.path}: failed: {metric_import.error}")
        else:
            self.stdout.write(
                f"{metric_import.path}: {metric_import.status} ({metric_import.format}): "
                f"{metric_import.samples:,} samples, {metric_import.gpus} GPUs, "
                f"{metric_import.hours} GPU-hours"
            )
