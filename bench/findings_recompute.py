"""findings_recompute over the benchmark organisation (bench/attribution_org.py) against one SQL
pass summing the same line items, in the same run.

The recompute is timed as a user runs it: `manage.py findings_recompute --json` in a new process
(start-up, Django setup and the whole recompute included), twice (the second finds every finding
already there: the nightly case). The baseline is one SQL statement that reads the same line items
the recompute reads (GPU-compute lines and lines without a project) and sums their EffectiveCost
per resource and hour. The ratio is recompute ÷ SQL pass.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/costsite_bench \\
        python bench/findings_recompute.py
"""

import json
import os
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
    return time.perf_counter() - clock, json.loads(result.stdout)


def main() -> None:
    import django

    django.setup()
    from django.db import connection

    from apps.billing.models import CostLineItem
    from apps.gpu.models import GpuHour

    if connection.vendor != "postgresql":
        raise SystemExit("The benchmark runs on PostgreSQL (DATABASE_URL).")
    lines = CostLineItem.objects.count()
    clock = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(SQL_PASS)
        groups, _total = cursor.fetchone()
    sql_s = time.perf_counter() - clock
    connection.close()
    first_s, first = recompute_once()
    second_s, second = recompute_once()
    summary = {
        "line_items": lines,
        "gpu_hours": GpuHour.objects.count(),
        "sql_pass_s": round(sql_s, 2),
        "sql_groups": groups,
        "recompute_first_s": round(first_s, 2),
        "recompute_again_s": round(second_s, 2),
        "ratio_first": round(first_s / sql_s, 1),
        "ratio_again": round(second_s / sql_s, 1),
        "findings": second["findings"],
        "kinds": second["kinds"],
        "first_status": first["status"],
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
