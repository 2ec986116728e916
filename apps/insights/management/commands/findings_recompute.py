import json
from datetime import date

from django.core.management.base import BaseCommand, CommandError

from apps.insights.services import findings_recompute


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise CommandError(f"{text!r} is not a date (YYYY-MM-DD).") from None


class Command(BaseCommand):
    help = (
        "Recompute the findings (all the data, or the UTC days [--start, --end)). Findings keep "
        "their identity, status and history. --json prints the summary as one JSON object."
    )

    def add_arguments(self, parser):
        parser.add_argument("--start", help="First UTC day, YYYY-MM-DD.")
        parser.add_argument("--end", help="Day after the last, YYYY-MM-DD.")
        parser.add_argument("--json", action="store_true", help="Print the summary as JSON.")

    def handle(self, *args, **options):
        start = _day(options["start"]) if options["start"] else None
        end = _day(options["end"]) if options["end"] else None
        if (start is None) != (end is None):
            raise CommandError("Give both --start and --end, or neither.")
        if start is not None and end <= start:
            raise CommandError("--end must be after --start.")
        run = findings_recompute(start=start, end=end, reason="command")
        if run.status == run.Status.FAILED:
            raise CommandError(f"Recompute #{run.pk} failed: {run.error}")
        summary = {"run": run.pk, "status": run.status, **run.summary}
        if options["json"]:
            self.stdout.write(json.dumps(summary, sort_keys=True))
            return
        if run.status == run.Status.QUEUED:
            self.stdout.write(f"Recompute #{run.pk} queued: another recompute is running it.")
            return
        for kind, counts in summary["kinds"].items():
            if "skipped" in counts:
                self.stdout.write(f"{kind}: not recomputed ({counts['skipped']})")
                continue
            self.stdout.write(
                f"{kind}: {counts['subjects']} subjects, {counts['created']} new, "
                f"{counts['gone']} gone, {counts['reopened']} reopened"
            )
        self.stdout.write(
            ", ".join(f"{count} {status}" for status, count in summary["findings"].items())
        )
