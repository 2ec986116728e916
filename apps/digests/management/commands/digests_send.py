"""`manage.py digests_send [--period weekly|daily] [--now ISO-TIME] [--json] [--dry-run]`: send the
digests that are due, through the same service the beat task calls; with `--dry-run`, build every
message that would go out and say who would get one, sending and keeping nothing."""

import json
from datetime import UTC, datetime

from django.core.management.base import BaseCommand, CommandError

from apps.digests.models import Frequency
from apps.digests.services import digests_dry_run, digests_send


class Command(BaseCommand):
    help = "Send the digests that are due (one per subscriber and period, never twice)."

    def add_arguments(self, parser):
        parser.add_argument("--period", choices=Frequency.values, help="Only this frequency.")
        parser.add_argument("--now", help="The moment to send as of (ISO 8601; default now).")
        parser.add_argument("--json", action="store_true", help="One JSON object per delivery.")
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Build every message that is due and say who would get one (status "
            "would_send); claim, send and keep nothing.",
        )

    def handle(self, *args, **options):
        now = None
        if options["now"]:
            try:
                now = datetime.fromisoformat(options["now"])
            except ValueError as error:
                raise CommandError(f"--now: not an ISO 8601 time: {options['now']!r}") from error
            if now.tzinfo is None:
                now = now.replace(tzinfo=UTC)
        service = digests_dry_run if options["dry_run"] else digests_send
        results = service(now=now, frequency=options["period"])
        if options["json"]:
            for result in results:
                self.stdout.write(json.dumps(result.as_json()))
            return
        for result in results:
            self.stdout.write(
                f"{result.recipient}: {result.status} ({result.period_start} – "
                f"{result.period_end}, {result.findings} findings)"
            )
        would = " (a dry run: nothing was sent)" if options["dry_run"] else ""
        self.stdout.write(f"{len(results)} deliveries{would}.")
