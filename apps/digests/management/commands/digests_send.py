"""`manage.py digests_send [--period weekly|daily] [--now ISO-TIME] [--json]`: send the digests
that are due, through the same service the beat task calls."""

import json
from datetime import UTC, datetime

from django.core.management.base import BaseCommand, CommandError

from apps.digests.models import Frequency
from apps.digests.services import digests_send


class Command(BaseCommand):
    help = "Send the digests that are due (one per subscriber and period, never twice)."

    def add_arguments(self, parser):
        parser.add_argument("--period", choices=Frequency.values, help="Only this frequency.")
        parser.add_argument("--now", help="The moment to send as of (ISO 8601; default now).")
        parser.add_argument("--json", action="store_true", help="One JSON object per delivery.")

    def handle(self, *args, **options):
        now = None
        if options["now"]:
            try:
                now = datetime.fromisoformat(options["now"])
            except ValueError as error:
                raise CommandError(f"--now: not an ISO 8601 time: {options['now']!r}") from error
            if now.tzinfo is None:
                now = now.replace(tzinfo=UTC)
        results = digests_send(now=now, frequency=options["period"])
        if options["json"]:
            for result in results:
                self.stdout.write(json.dumps(result.as_json()))
            return
        for result in results:
            self.stdout.write(
                f"{result.recipient}: {result.status} ({result.period_start} – "
                f"{result.period_end}, {result.findings} findings)"
            )
        self.stdout.write(f"{len(results)} deliveries.")
