"""findings_recompute over the benchmark organisation (bench/attribution_org.py) against one SQL
pass summing the same line items, in the same run.

The recompute is timed as a user runs it: `manage.py findings_recompute --json` in a new process
(start-up, Django setup and the whole recompute included), in --runs rounds (3) of: the SQL pass,
a recompute after every finding is deleted (all of them new), and one more (every finding already
there: the nightly case). It prints each round and the medians, the worst and the ratios.
The baseline is one SQL statement that reads the same line items
the recompute reads (GPU-compute lines and lines without a project) and sums their EffectiveCost
per resource and hour. The ratio is recompute ÷ SQL pass.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/costsite_bench \\
        python bench/findings_recompute.py
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")

SQL_PASS = """
SELECT count(*), sum(total) FROM (
    SELECT resource_id, date_trunc('hour', charge_period_start) AS hour, billing_currency,
           sum(effective_cost) AS total
    FROM billing_costlineitem
    WHERE cost_kind = 'gpu_compute' OR project_id IS NULL
    GROUP BY 1, 2, 3
) AS grouped
"""


def recompute_once() -> tuple[float, dict]:
    clock = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "manage.py", "findings_recompute", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    seconds = time.perf_counter() - clock
    summary = json.loads(result.stdout)
    if summary.get("status") != "succeeded":
        raise SystemExit(f"The recompute did not succeed: {result.stdout}")
    return seconds, summary


def sql_pass() -> tuple[float, int]:
    from django.db import connection

    clock = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(SQL_PASS)
        groups, _total = cursor.fetchone()
    seconds = time.perf_counter() - clock
    connection.close()
    return seconds, groups


def main() -> None:
    import django

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="rounds (default 3)")
    args = parser.parse_args()
    django.setup()
    from django.db import connection
    from django.db.models import Count

    from apps.billing.models import CostLineItem
    from apps.gpu.models import GpuHour
    from apps.insights.models import Finding, Kind

    if connection.vendor != "postgresql":
        raise SystemExit("The benchmark runs on PostgreSQL (DATABASE_URL).")
    lines = CostLineItem.objects.count()
    times: dict[str, list[float]] = {"sql_pass": [], "first": [], "again": []}
    for _round in range(args.runs):
        # Each round: the SQL pass, a recompute that finds no finding (all of them new), and one
        # that finds them all there (the nightly case).
        seconds, groups = sql_pass()
        times["sql_pass"].append(seconds)
        Finding.objects.all().delete()
        # An organisation with no finding yet has an empty table of finding-hours, not one of
        # 2.4M rows deleted a round: autovacuum is off on this machine, and without this each
        # round read the dead rows of every round before it. Outside the timing; every hour was
        # deleted with its finding just above.
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE insights_findinghour")
            for table in ("insights_findinghour", "insights_finding", "insights_findingevent"):
                cursor.execute(f"VACUUM ANALYZE {table}")
        connection.close()
        seconds, first = recompute_once()
        times["first"].append(seconds)
        seconds, again = recompute_once()
        times["again"].append(seconds)
        print(json.dumps({key: round(values[-1], 2) for key, values in times.items()}), flush=True)
    # Every kind of parts 1, 2 and 3 is in the recompute timed, and found something here.
    missing = [kind for kind in Kind.values if kind not in again["kinds"]]
    if missing:
        raise SystemExit(f"The recompute left out kinds: {', '.join(missing)}")
    found = dict(Finding.objects.values_list("kind").annotate(n=Count("id")).order_by())
    median = {key: statistics.median(values) for key, values in times.items()}
    summary = {
        "line_items": lines,
        "gpu_hours": GpuHour.objects.count(),
        "sql_groups": groups,
        "runs": args.runs,
        "seconds": {key: [round(value, 2) for value in values] for key, values in times.items()},
        "median_s": {key: round(value, 2) for key, value in median.items()},
        "worst_s": {key: round(max(values), 2) for key, values in times.items()},
        # Each round's recompute against the SQL pass of the same round, and the medians'.
        "ratio_first": round(median["first"] / median["sql_pass"], 1),
        "ratio_again": round(median["again"] / median["sql_pass"], 1),
        "ratio_worst_round": round(
            max(
                max(first_s, again_s) / sql_s
                for sql_s, first_s, again_s in zip(*times.values(), strict=True)
            ),
            1,
        ),
        "findings": again["findings"],
        "findings_by_kind": {kind: found.get(kind, 0) for kind in Kind.values},
        "seconds_by_kind": {
            kind: {"first": first["kinds"][kind]["seconds"], "again": counts["seconds"]}
            for kind, counts in again["kinds"].items()
        },
        "kinds": again["kinds"],
        "created_first": {kind: counts["created"] for kind, counts in first["kinds"].items()},
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
