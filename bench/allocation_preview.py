"""Benchmark: the allocation rule preview over a whole history, exact (issue 24), against one SQL
pass over the lines the rule could move.

It runs on a database that already holds the benchmark organisation (bench/attribution_org.py;
10.25M lines at --scale 1 --days 365) and leaves it as it found it: it adds a project of its own
(no lines, no runs, no team members) as the rules' target, and deletes it at the end. Nothing is
saved: a preview applies the rule in a savepoint that is rolled back.

Cases, each a new rule of priority 1 giving spend to that project, previewed from the allocation
page:
  (a) catch-all: `*` on the resource id: every line that tags, registered resources and model
      API keys did not reach;
  (b) resource ids ending in 0 or 1 (`*[01]`);
  (c) the service with the most such lines;
  (d) the resource with the most such lines.
Each --runs times, alternating with its floor:
  - the preview: the page's POST with the Preview button, as htmx sends it, through Django's test
    client as staff, DEBUG off: the form, the savepoint, the SQL pass, the rules over its sums,
    the rendering of the figures. What the user waits for, less the network;
  - the floor: psql `COPY (SELECT <the columns the pass reads> FROM billing_costlineitem WHERE
    <the same lines>) TO STDOUT` into /dev/null: the same lines' same columns read once and
    written out, without grouping (psql's start, about 10 ms, included).
Checks, each run: the target owns nothing today, so every line the rule reaches moves: the lines
and the totals per currency (and their last 30 days) must equal SQL's COUNT and SUM over those
lines, and as much must go to the target as is taken from the others; (d) must also equal the
line-by-line dry run (the re-attribution's own code) exactly.
Goal (issue 24): within 3x the floor, and answered within 5 s at 10M lines.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/costsite_bench \\
        python bench/allocation_preview.py --runs 3
"""

import argparse
import copy
import json
import os
import secrets
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")
os.environ["DJANGO_DEBUG"] = "false"
# Debug off demands a real key; a throwaway one signs this run's sessions.
os.environ.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(50))

OUT = ROOT / "bench" / "out" / "allocation_preview"
GOAL_RATIO, GOAL_SECONDS = 3.0, 5.0
TARGET_SLUG = "bench-preview-target"
HTMX = {"HX-Request": "true"}


def log(message: str) -> None:
    print(message, flush=True)


def cases() -> dict[str, dict]:
    from django.db.models import Count

    from apps.billing.models import CostLineItem

    unreached = CostLineItem.objects.filter(attributed_by__in=["rule", ""])
    service = (unreached.values("service_name").annotate(n=Count("*")).order_by("-n").first())[
        "service_name"
    ]
    named = unreached.exclude(resource_id="")
    resource = named.values("resource_id").annotate(n=Count("*")).order_by("-n").first()
    resource = resource["resource_id"]
    escape = str.maketrans({"*": "[*]", "?": "[?]", "[": "[[]"})
    return {
        "a": {"what": "catch-all", "field": "resource_id", "pattern": "*"},
        "b": {"what": "ids ending in 0 or 1", "field": "resource_id", "pattern": "*[01]"},
        "c": {"what": f"service {service}", "field": "service_name", "pattern": service},
        "d": {
            "what": f"resource {resource[:40]}",
            "field": "resource_id",
            "pattern": resource.translate(escape),
        },
    }


def expected(rule, since: tuple[datetime, datetime]) -> dict:
    """SQL's own count and sums of the lines the rule reaches (every one moves to the target)."""
    from django.db.models import Count, Q, Sum

    from apps.billing.models import CostLineItem
    from apps.billing.services_allocation import _rule_lines

    lines = _rule_lines([rule])(CostLineItem.objects.all())
    out = {"lines": lines.count(), "totals": {}, "recent": [{}, {}]}
    for row in lines.values("billing_currency").annotate(
        amount=Sum("effective_cost"),
        early=Sum("effective_cost", filter=Q(charge_period_start__gte=since[0])),
        late=Sum("effective_cost", filter=Q(charge_period_start__gte=since[1])),
        n=Count("*"),
    ):
        currency = row["billing_currency"]
        out["totals"][currency] = row["amount"] or Decimal(0)
        out["recent"][0][currency] = row["early"] or Decimal(0)
        out["recent"][1][currency] = row["late"] or Decimal(0)
    return out


def check(key: str, rule, movement, want: dict) -> None:
    assert movement.lines == want["lines"], (key, movement.lines, want["lines"])
    assert movement.totals == want["totals"], (key, movement.totals, want["totals"])
    # The last 30 days count from the moment of the request: between its start and its end.
    assert movement.recent_totals in want["recent"], (key, movement.recent_totals, want["recent"])
    given = {}
    for share in movement.targets:
        assert share.project is not None and share.project.slug == TARGET_SLUG, share.label
        given[share.currency] = given.get(share.currency, Decimal(0)) + share.amount
    assert given == movement.totals, (key, given, movement.totals)


def check_line_by_line(rule, movement) -> None:
    from django.db import transaction

    from apps.billing.attribution import Attributor
    from apps.billing.selectors_allocation import movement_from_rows
    from apps.billing.services import attribution_dry_run
    from apps.billing.services_allocation import _rule_lines

    with transaction.atomic():
        copy.copy(rule).save()
        attributor = Attributor.load()
        transaction.set_rollback(True)
    moves = attribution_dry_run(attributor=attributor, narrow=_rule_lines([rule]))
    line_by_line = movement_from_rows(moves.as_json(), lines=moves.lines)
    assert (line_by_line.lines, line_by_line.sources, line_by_line.targets) == (
        movement.lines,
        movement.sources,
        movement.targets,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cases", default="abcd")
    args = parser.parse_args()

    import django

    django.setup()
    from django.test.utils import setup_test_environment

    setup_test_environment()  # the test client keeps each response's template context
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.urls import reverse
    from reattribution import copy_floor

    from apps.accounts.models import Team
    from apps.billing.attribution import ATTRIBUTION_COLUMNS
    from apps.billing.models import CostLineItem
    from apps.billing.reattribution import SUMMED_KEYS
    from apps.billing.services_allocation import _rule_lines
    from apps.projects.models import AllocationRule, Project

    total_lines = CostLineItem.objects.count()
    staff = get_user_model().objects.filter(is_staff=True, is_active=True).first()
    client = Client()
    client.force_login(staff)
    Project.objects.filter(slug=TARGET_SLUG).delete()  # a run stopped half way
    target = Project.objects.create(
        team=Team.objects.order_by("pk").first(), name="Bench preview target", slug=TARGET_SLUG
    )
    # What the preview's pass reads of each line.
    columns = [
        *SUMMED_KEYS,
        "billing_currency",
        *ATTRIBUTION_COLUMNS,
        "charge_period_start",
        "effective_cost",
    ]
    results = []
    try:
        chosen = {key: case for key, case in cases().items() if key in args.cases}
        log(
            f"{total_lines:,} lines; cases: "
            + "; ".join(f"({k}) {c['what']}" for k, c in chosen.items())
        )
        for run in range(1, args.runs + 1):
            for key, case in chosen.items():
                rule = AllocationRule(
                    name=f"bench {key}",
                    field=case["field"],
                    pattern=case["pattern"],
                    priority=1,
                    project=target,
                )
                lines = _rule_lines([rule])(CostLineItem.objects.order_by("id"))
                floor = copy_floor(lines, columns)
                data = {
                    "name": rule.name,
                    "field": rule.field,
                    "pattern": rule.pattern,
                    "priority": "1",
                    "target": f"project:{target.pk}",
                    "workload": "",
                    "action": "preview",
                }
                before = datetime.now(UTC)
                started = time.perf_counter()
                response = client.post(reverse("allocation_rule_create"), data, headers=HTMX)
                seconds = time.perf_counter() - started
                after = datetime.now(UTC)
                assert response.status_code == 200, response.status_code
                movement = response.context["preview"]
                assert movement is not None and not movement.too_many_lines
                assert b"Exact: the same attribution" in response.content
                window = (before - timedelta(days=30), after - timedelta(days=30))
                check(key, rule, movement, expected(rule, window))
                if key == "d" and run == 1:
                    check_line_by_line(rule, movement)
                row = {
                    "run": run,
                    "case": key,
                    "what": case["what"],
                    "lines_moved": movement.lines,
                    "seconds": round(seconds, 3),
                    "service_seconds": movement.seconds,
                    "floor_seconds": round(floor, 3),
                    "ratio": round(seconds / floor, 2),
                }
                results.append(row)
                log(
                    f"run {run} ({key}) {case['what'][:34]:<34} {movement.lines:>9,} lines "
                    f"preview {seconds:6.2f} s (service {movement.seconds:5.2f}) "
                    f"floor {floor:6.2f} s  {seconds / floor:5.2f}x"
                )
    finally:
        target.delete()
        connection.close()

    log("")
    heading = ("case", "lines", "preview s: median", "worst", "x floor", "worst")
    log("{:<40} {:>9} {:>17} {:>8} {:>12} {:>8}".format(*heading))
    summary = []
    for key in args.cases:
        rows = [r for r in results if r["case"] == key]
        if not rows:
            continue
        seconds = [r["seconds"] for r in rows]
        ratios = [r["ratio"] for r in rows]
        summary.append(
            {
                "case": key,
                "what": rows[0]["what"],
                "lines": rows[0]["lines_moved"],
                "seconds_median": statistics.median(seconds),
                "seconds_worst": max(seconds),
                "ratio_median": statistics.median(ratios),
                "ratio_worst": max(ratios),
                "floor_median": statistics.median(r["floor_seconds"] for r in rows),
            }
        )
        log(
            f"({key}) {rows[0]['what'][:35]:<36} {rows[0]['lines_moved']:>9,} "
            f"{statistics.median(seconds):>17.2f} {max(seconds):>8.2f} "
            f"{statistics.median(ratios):>11.2f}x {max(ratios):>7.2f}x"
        )
    met = all(
        s["ratio_worst"] <= GOAL_RATIO and s["seconds_worst"] <= GOAL_SECONDS for s in summary
    )
    verdict = "met" if met else "NOT met"
    log(f"goal (≤ {GOAL_RATIO:g}x the floor and ≤ {GOAL_SECONDS:g} s, every run): {verdict}")
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"preview-{datetime.now(UTC):%Y%m%dT%H%M%S}.json"
    path.write_text(
        json.dumps({"lines": total_lines, "runs": results, "summary": summary}, indent=2)
    )
    log(f"written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
