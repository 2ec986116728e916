import json
from datetime import date

from django.core.management.base import BaseCommand, CommandError

from apps.insights.models import Finding, Kind
from apps.insights.selectors import wasted_in_period
from apps.insights.services import _text


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise CommandError(f"{text!r} is not a date (YYYY-MM-DD).") from None


def finding_as_json(finding: Finding, wasted: dict | None = None) -> dict:
    """The command line's contract (other tools read it): one object per finding."""
    return {
        "id": finding.pk,
        "kind": finding.kind,
        "project": finding.project.slug if finding.project else None,
        "experiment": finding.experiment.external_id or None if finding.experiment else None,
        "deployment": finding.deployment.external_id or None if finding.deployment else None,
        "resource_id": finding.resource_id or None,
        "billing_account_id": finding.billing_account_id or None,
        "service_name": finding.service_name or None,
        "status": finding.status,
        "snoozed_until": finding.snoozed_until and finding.snoozed_until.isoformat(),
        "reason": finding.reason,
        "wasted": (
            {currency: _text(amount) for currency, amount in sorted(wasted.items())}
            if wasted is not None
            else finding.wasted
        ),
        "savings_per_month": finding.savings_per_month,
        "first_seen": finding.first_seen and finding.first_seen.isoformat(),
        "last_seen": finding.last_seen and finding.last_seen.isoformat(),
    }


class Command(BaseCommand):
    help = (
        "Print the findings, one JSON object per line (--json): id, kind, project, experiment, "
        "deployment, resource_id, status, wasted and savings_per_month (currency → decimal "
        "string; wasted in [--start, --end) when given, else since first seen), first_seen and "
        "last_seen."
    )

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="One JSON object per line.")
        parser.add_argument("--kind", choices=Kind.values)
        parser.add_argument("--project", help="A project's slug.")
        parser.add_argument("--start", help="First UTC day, YYYY-MM-DD.")
        parser.add_argument("--end", help="Day after the last, YYYY-MM-DD.")

    def handle(self, *args, **options):
        start = _day(options["start"]) if options["start"] else None
        end = _day(options["end"]) if options["end"] else None
        if (start is None) != (end is None):
            raise CommandError("Give both --start and --end, or neither.")
        if start is not None and end <= start:
            raise CommandError("--end must be after --start.")
        findings = Finding.objects.select_related("project", "experiment", "deployment").order_by(
            "-rank_amount", "pk"
        )
        if options["kind"]:
            findings = findings.filter(kind=options["kind"])
        if options["project"]:
            findings = findings.filter(project__slug=options["project"])
        wasted = (
            wasted_in_period(findings=findings, start=start, end=end) if start is not None else None
        )
        for finding in findings:
            row = finding_as_json(finding, None if wasted is None else wasted.get(finding.pk, {}))
            if options["json"]:
                self.stdout.write(json.dumps(row, sort_keys=True))
            else:
                money = ", ".join(f"{c} {a}" for c, a in row["wasted"].items()) or "-"
                self.stdout.write(
                    f"#{row['id']} {row['kind']} [{row['status']}] {money}: {row['reason']}"
                )
