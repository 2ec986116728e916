import json
from datetime import date

from django.core.management.base import BaseCommand, CommandError

from apps.insights.selectors_build_or_call import build_or_call_all, default_period, result_json


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise CommandError(f"{text!r} is not a date (YYYY-MM-DD).") from None


class Command(BaseCommand):
    help = (
        "Build or call for every deployment, one JSON object per line (--json): deployment, "
        "model, period_start, period_end, requests, self_hosted_per_request, api_model, "
        "api_per_request, break_even_requests_per_hour, requests_per_hour, verdict, "
        "monthly_margin, currency (money as exact decimal strings). The period is the UTC days "
        "[--start, --end), by default the 30 days ending at the bill's data as of."
    )

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="One JSON object per line.")
        parser.add_argument("--start", help="First UTC day, YYYY-MM-DD.")
        parser.add_argument("--end", help="Day after the last, YYYY-MM-DD.")

    def handle(self, *args, **options):
        if bool(options["start"]) != bool(options["end"]):
            raise CommandError("Give both --start and --end, or neither.")
        if options["start"]:
            start, end = _day(options["start"]), _day(options["end"])
            if end <= start:
                raise CommandError("--end must be after --start.")
        else:
            start, end = default_period()
        for row in build_or_call_all(start=start, end=end):
            out = result_json(deployment=row.deployment, result=row.result)
            if options["json"]:
                self.stdout.write(json.dumps(out))
            else:
                self.stdout.write(
                    f"{out['project']}/{out['deployment']}: {out['verdict'] or 'no verdict'} "
                    f"(margin {out['monthly_margin'] or '-'} {out['currency']} a month; "
                    f"{out['requests_per_hour']} requests an hour, break-even "
                    f"{out['break_even_requests_per_hour'] or 'none'})"
                )
