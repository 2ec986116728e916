"""Benchmark: import FOCUS files of 1M and 3M rows end to end, against PostgreSQL's own COPY.

For each size it writes (once) a realistic FOCUS CSV with bench/focus_generate.py's generator,
then, in the same run and alternating, several times:
- the floor: PostgreSQL's COPY of that file into a plain table of text columns, both as the
  server reading the file itself and as a client streaming it (psql's \\copy); the faster counts;
- the import: a fresh process runs the billing service on the file (parse, validate, attribute,
  load, roll up) into empty billing tables, and reports its time and peak memory (ru_maxrss,
  every thread of the process).
It prints rows per second, the ratio to COPY and the peak memory (medians of the repeats), and
checks that the import's totals equal the text table's sums.

With --command (issue 24), each import is `python manage.py import_billing FILE` as a user runs it:
a fresh process, timed from its start to its exit, Celery running the work the import starts (the
findings recompute and the rest) in that process as it does by default, into the database as it
is, which must already hold bills (nothing is truncated). The file is billed to a payer account of
its own (BENCH_ACCOUNT), so it is a new bill that replaces none the database holds; after each try
its delivery is deleted again (untimed), so the next try's import is a new delivery too and the
database keeps its size. Before each try that recomputes findings in its process (not --queued),
the month's findings are recomputed without the bill (untimed), so that each try's recompute
finds them changed, as a new bill does. Beside each import, alternating, two floors:
- (a) PostgreSQL's COPY of the same file into a plain table of text columns, as above;
- (b) the storage floor: the same rows, already typed (the import's own line items, saved with a
  binary COPY), sent from this client with a binary COPY into the line item table as it is, its
  primary key, sequence and indexes in place, and committed. It stores the lines only: the
  rollups, the delivery's record, start-up and the findings recompute have no floor of their own
  and count against the import (the command's own last line, reported apart, splits them).
Every import's totals are checked exactly (Decimal) against the file's own sums, billed and
effective, in its line items, its delivery's record and its daily rollup.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/costsite_bench python bench/import_focus.py
    ... --rows 1000000 --repeat 5 --data-dir /tmp/costsite-bench
    ... --command   (300k and 1M rows unless --rows says otherwise)

Goal (issue 3): within 2x of COPY, peak memory under 300 MB at both sizes. Goal with --command
(issue 24): within 1.2x of (b) at both sizes (the median of the tries' ratios; the worst beside
it), peak memory at most 300 MB (the worst try); the ratio to (a) reported beside it.
"""

import argparse
import json
import os
import re
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")

GOAL_RATIO = 2.0


def process_cpu(pid: int) -> float | None:
    """CPU seconds a process has used (PostgreSQL's backend on this machine), when readable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


GOAL_MEMORY_MB = 300
GOAL_COMMAND_RATIO = 1.2
# The payer account of --command's bills: no real bill's, so each import is a new bill.
BENCH_ACCOUNT = "990000000024"
BILLING_TABLES = (
    "billing_costlineitem, billing_dailycost, billing_dailyresourcecost, billing_delivery, "
    "billing_importrun"
)


def compile_sources(checkout: Path = ROOT) -> None:
    """Write the bytecode of the checkout's own modules, as a user's first run does. Where
    PYTHONDONTWRITEBYTECODE is set (as on the machine these figures come from), every fresh
    process would otherwise compile them again: about 0.3 s of each start."""
    import compileall

    for folder in ("apps", "costsite", "bench"):
        compileall.compile_dir(checkout / folder, quiet=1)


def child(path: str) -> None:
    """Run one import in this (fresh) process and print what it took as JSON."""
    import django

    django.setup()
    from django.db import connection

    from apps.billing.services import import_run_create, import_run_execute

    run = import_run_create(paths=[path])
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    backend_before = process_cpu(backend)
    usage_before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    run = import_run_execute(import_run=run)
    seconds = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    backend_after = process_cpu(backend)
    peak = usage.ru_maxrss / 1024
    client_cpu = (usage.ru_utime - usage_before.ru_utime) + (usage.ru_stime - usage_before.ru_stime)
    from django.db.models import Sum

    from apps.billing.models import DailyCost

    rolled = DailyCost.objects.aggregate(
        lines=Sum("line_items"), billed=Sum("billed_cost"), effective=Sum("effective_cost")
    )
    print(
        json.dumps(
            {
                "status": run.status,
                "error": run.error,
                "seconds": seconds,
                "peak_mb": peak,
                "client_cpu": client_cpu,
                "backend_cpu": None if backend_before is None else backend_after - backend_before,
                "rollup": [rolled["lines"], str(rolled["billed"]), str(rolled["effective"])],
                "rows": run.rows_done,
                "line_items": run.line_items,
                "billed_cost": run.billed_cost,
                "effective_cost": run.effective_cost,
            }
        )
    )


def import_once(path: Path) -> dict:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {BILLING_TABLES} CASCADE")
        cursor.execute("CHECKPOINT")
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"the import process failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["status"] != "succeeded":
        raise SystemExit(f"the import did not succeed: {result['error']}")
    return result


def conninfo() -> str:
    """Django's database as psycopg's own connection string: the COPYs run as a client would."""
    from django.db import connection

    dsn = connection.settings_dict
    return (
        f"host={dsn['HOST'] or '127.0.0.1'} port={dsn['PORT'] or 5432} "
        f"dbname={dsn['NAME']} user={dsn['USER']}"
        + (f" password={dsn['PASSWORD']}" if dsn.get("PASSWORD") else "")
    )


def copy_once(path: Path, header: list[str]) -> dict:
    """Seconds for the server reading the file itself and for a client streaming it."""
    import psycopg
    from psycopg import sql

    columns = ", ".join(f'"{name}" text' for name in header)
    times = {}
    with psycopg.connect(conninfo(), autocommit=True) as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        for how in ("server", "client"):
            conn.execute("DROP TABLE IF EXISTS bench_focus_text")
            conn.execute(f"CREATE TABLE bench_focus_text ({columns})")
            conn.execute("CHECKPOINT")
            started = time.perf_counter()
            cpu_before = process_cpu(backend)
            if how == "server":
                try:
                    conn.execute(
                        sql.SQL(
                            "COPY bench_focus_text FROM {} WITH (FORMAT csv, HEADER true)"
                        ).format(sql.Literal(str(path.resolve())))
                    )
                except psycopg.Error as exc:  # not a superuser, or not the same machine
                    print(f"  (server-side COPY unavailable: {exc.__class__.__name__})")
                    continue
            else:
                with (
                    conn.cursor() as cursor,
                    cursor.copy(
                        "COPY bench_focus_text FROM STDIN WITH (FORMAT csv, HEADER true)"
                    ) as copy,
                    path.open("rb") as handle,
                ):
                    while chunk := handle.read(1 << 20):
                        copy.write(chunk)
            times[how] = time.perf_counter() - started
            if cpu_before is not None:
                times[f"{how}_cpu"] = process_cpu(backend) - cpu_before
        sums = conn.execute(
            'SELECT count(*), sum("BilledCost"::numeric), sum("EffectiveCost"::numeric) '
            "FROM bench_focus_text"
        ).fetchone()
        conn.execute("DROP TABLE bench_focus_text")
    return {**times, "sums": sums}


def command_once(path: Path, *, queued: bool = False) -> dict:
    """`python manage.py import_billing PATH` as a user runs it: a fresh process, timed from its
    start to its exit, Celery running the work the import starts in that process (the default).
    Its peak memory is its own ru_maxrss (os.wait4): RUSAGE_CHILDREN would give the largest of
    every child so far. The command's last line says where its time went."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("CHECKPOINT")
    # As production runs it: DEBUG off (no query log), with a key of its own.
    env = {
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        **os.environ,
        "DJANGO_DEBUG": "false",
        "CELERY_TASK_ALWAYS_EAGER": "false" if queued else "true",
    }
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "manage.py", "import_billing", str(path)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=err,
            text=True,
        )
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        printed, errors = out.read(), err.read()
    if process.returncode:
        raise SystemExit(f"the import failed:\n{printed}{errors}")
    done = next(line for line in reversed(printed.splitlines()) if line.startswith("done"))

    def figure(pattern: str) -> float:
        found = re.search(pattern, done)
        return float(found.group(1)) if found else 0.0

    return {
        "seconds": seconds,
        "peak_mb": usage.ru_maxrss / 1024,
        # The command's own CPU time, its threads included: not PostgreSQL's, nor (queued) the
        # worker's. It says what the process did, which its wall time mixes with waiting.
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "importing": figure(r"importing ([\d.]+) s"),
        "after": figure(r"then ([\d.]+) s"),
        "done": done,
    }


def bench_deliveries():
    """Every delivery of BENCH_ACCOUNT's, current or not (a replaced one's fingerprint would make
    the same file's next import 'unchanged')."""
    from apps.billing.models import Delivery

    return Delivery.objects.filter(billing_account_id=BENCH_ACCOUNT)


def delivery_check(delivery, sums: tuple) -> None:
    """The import's totals, exact, against the file's own (the text table's sums): in its line
    items, its delivery's record and its daily rollup. An effective sum of None (a format whose
    mapping computes it, as CUR's amortised cost) is checked the same in all three."""
    from django.db.models import Count, Sum

    from apps.billing.models import CostLineItem, DailyCost

    count, billed, effective = sums
    lines = CostLineItem.objects.of_delivery(delivery).aggregate(
        lines=Count("id"), billed=Sum("billed_cost"), effective=Sum("effective_cost")
    )
    rolled = DailyCost.objects.filter(delivery_id=delivery.pk).aggregate(
        lines=Sum("line_items"), billed=Sum("billed_cost"), effective=Sum("effective_cost")
    )
    assert delivery.rows == count, (delivery.rows, count)
    assert lines["lines"] == rolled["lines"] == delivery.line_items, (lines, rolled)
    if effective is None:
        effective = lines["effective"]
    for where, found in (
        ("line items", (lines["billed"], lines["effective"])),
        (
            "delivery",
            (Decimal(delivery.billed_cost["USD"]), Decimal(delivery.effective_cost["USD"])),
        ),
        ("daily rollup", (rolled["billed"], rolled["effective"])),
    ):
        assert found == (billed, effective), (where, found, billed, effective)


def lines_save(delivery, out: Path) -> None:
    """The delivery's line items, typed, as PostgreSQL's binary COPY writes them (untimed)."""
    import psycopg
    from psycopg import sql

    from apps.billing.loader import LINE_COLUMNS
    from apps.billing.models import CostLineItem

    query = sql.SQL(
        "COPY (SELECT {} FROM {} WHERE id > {} AND id <= {} ORDER BY id) TO STDOUT (FORMAT binary)"
    ).format(
        sql.SQL(", ").join(map(sql.Identifier, LINE_COLUMNS)),
        sql.Identifier(CostLineItem._meta.db_table),
        sql.Literal(delivery.first_line_id),
        sql.Literal(delivery.last_line_id),
    )
    with (
        psycopg.connect(conninfo()) as conn,
        conn.cursor() as cursor,
        cursor.copy(query) as copy,
        out.open("wb") as handle,
    ):
        for chunk in copy:
            handle.write(chunk)


def delivery_delete(delivery) -> None:
    """Delete a delivery with its line items and rollups (untimed), as a replacement drops one,
    then VACUUM the line table, so that no autovacuum of those rows runs in a timed step."""
    from django.db import connection

    from apps.billing.importing import delivery_drop_lines
    from apps.billing.models import CostLineItem, Delivery

    delivery_drop_lines(delivery=delivery)
    with connection.cursor() as cursor:
        # Not delivery.delete(): Django's cascade would look for its lines by their delivery,
        # which has no index (a scan of the whole table).
        cursor.execute(f"DELETE FROM {Delivery._meta.db_table} WHERE id = %s", [delivery.pk])
        cursor.execute(f"VACUUM {CostLineItem._meta.db_table}")


def storage_floor_once(lines: Path) -> float:
    """Floor (b): seconds to COPY the saved rows (binary, from this client, as the import sends
    its own) into the line item table as it is, the sequence giving their ids, and to commit;
    then (untimed) they are deleted and the table VACUUMed, so that it returns to its state."""
    import psycopg
    from psycopg import sql

    from apps.billing.loader import LINE_COLUMNS
    from apps.billing.models import CostLineItem

    table = sql.Identifier(CostLineItem._meta.db_table)
    columns = sql.SQL(", ").join(map(sql.Identifier, LINE_COLUMNS))
    with psycopg.connect(conninfo(), autocommit=True) as conn:
        last = sql.SQL("SELECT coalesce(max(id), 0) FROM {}").format(table)
        before = conn.execute(last).fetchone()[0]
        conn.execute("CHECKPOINT")
        started = time.perf_counter()
        with (
            conn.transaction(),
            conn.cursor() as cursor,
            cursor.copy(
                sql.SQL("COPY {} ({}) FROM STDIN (FORMAT binary)").format(table, columns)
            ) as copy,
            lines.open("rb") as handle,
        ):
            while chunk := handle.read(1 << 20):
                copy.write(chunk)
        seconds = time.perf_counter() - started
        conn.execute(sql.SQL("DELETE FROM {} WHERE id > %s").format(table), [before])
        conn.execute(sql.SQL("VACUUM {}").format(table))
    return seconds


def command_database_ready() -> None:
    """--command measures a database that holds bills of other accounts: say how many, and
    delete what an interrupted run left of BENCH_ACCOUNT's."""
    from apps.billing.models import Delivery

    others = Delivery.objects.filter(status=Delivery.Status.CURRENT).exclude(
        billing_account_id=BENCH_ACCOUNT
    )
    if not others.exists():
        raise SystemExit("Import a bill first: --command measures a database that holds bills.")
    print(f"the database holds {others.count()} current deliveries of other accounts")
    for leftover in bench_deliveries():
        delivery_delete(leftover)


def findings_settle(month: datetime) -> None:
    """The month's findings recomputed without BENCH_ACCOUNT's bill (untimed), so that the
    import's recompute finds them changed, as a new bill makes them. Without it, every try after
    the first found the hours its predecessor had written for the same bill (its delivery is
    deleted, not its findings) and wrote none: about half the first try's recompute."""
    from apps.insights.services import findings_recompute
    from costsite.months import next_month_start

    findings_recompute(start=month.date(), end=next_month_start(month.date()))


def command_try(
    path: Path, saved: Path, *, queued: bool, check, month: datetime
) -> tuple[float, dict]:
    """One try of the command on BENCH_ACCOUNT's bill at `path`: the month's findings first
    settled without the bill where the command recomputes them (untimed, findings_settle), then
    the command; the work it queued is dropped, its delivery checked (`check(delivery)`), its
    lines saved to `saved` and the delivery deleted (untimed); then floor (b) with those lines.
    Returns (b)'s seconds and the command's figures."""
    if not queued:
        findings_settle(month)
    imported = command_once(path, queued=queued)
    if queued:
        from costsite.celery import app

        app.control.purge()  # nobody takes the work the import queued
    (delivery,) = bench_deliveries()
    check(delivery)
    lines_save(delivery, saved)
    delivery_delete(delivery)
    return storage_floor_once(saved), imported


def command_benchmark(args: argparse.Namespace) -> None:
    """Issue 24: `manage.py import_billing` against floors (a) and (b), alternating, every import
    of a new bill into the database as it is."""
    command_database_ready()
    lines = []
    for rows in args.rows:
        month = datetime.strptime(args.month, "%Y-%m").replace(tzinfo=UTC)
        path = args.data_dir / f"focus-{rows}-{BENCH_ACCOUNT}-{args.month}.csv"
        focus_file(path, rows, account=BENCH_ACCOUNT, month=month)
        header = path.open().readline().strip().split(",")
        saved = args.data_dir / f"lines-{rows}-{BENCH_ACCOUNT}.bin"
        tries = []
        for attempt in range(args.repeat):
            copied = copy_once(path, header)
            count, billed, effective = copied["sums"]
            assert count == rows, (count, rows)
            typed, imported = command_try(
                path,
                saved,
                queued=args.queued,
                month=month,
                check=lambda delivery, sums=copied["sums"]: delivery_check(delivery, sums),
            )
            text = min(t for k, t in copied.items() if k in ("server", "client"))
            tries.append((text, typed, imported))
            took = imported["seconds"]
            print(
                f"  {rows:>9,} rows, try {attempt + 1}: (a) {text:5.1f} s, (b) {typed:5.1f} s, "
                f"command {took:5.1f} s = importing {imported['importing']:.1f} + the work it "
                f"started {imported['after']:.1f} + start and exit "
                f"{took - imported['importing'] - imported['after']:.1f}; "
                f"{took / typed:.2f}x (b), {took / text:.2f}x (a), "
                f"peak {imported['peak_mb']:.0f} MB, CPU {imported['cpu_s']:.1f} s; totals "
                f"checked (billed {billed}, "
                f"effective {effective})",
                flush=True,
            )
            print(f"      its last line: {imported['done']}")
        saved.unlink()
        lines.append((rows, tries))
    print()
    print(
        f"{'rows':>10} {'(a) s':>6} {'(b) s':>6} {'command s':>10} {'importing':>10} "
        f"{'after':>6} {'x (b)':>6} {'worst':>6} {'x (a)':>6} {'worst':>6} {'peak MB':>8}"
    )
    ok = True
    for rows, tries in lines:
        to_typed = [i["seconds"] / b for _, b, i in tries]
        to_text = [i["seconds"] / a for a, _, i in tries]
        peak = max(i["peak_mb"] for *_, i in tries)
        ok = ok and statistics.median(to_typed) <= GOAL_COMMAND_RATIO and peak <= GOAL_MEMORY_MB
        print(
            f"{rows:>10,} {statistics.median(a for a, _, _ in tries):>6.1f} "
            f"{statistics.median(b for _, b, _ in tries):>6.1f} "
            f"{statistics.median(i['seconds'] for *_, i in tries):>10.1f} "
            f"{statistics.median(i['importing'] for *_, i in tries):>10.1f} "
            f"{statistics.median(i['after'] for *_, i in tries):>6.1f} "
            f"{statistics.median(to_typed):>5.2f}x {max(to_typed):>5.2f}x "
            f"{statistics.median(to_text):>5.2f}x {max(to_text):>5.2f}x {peak:>8.0f}"
        )
    if args.json:
        tried = [
            {"rows": rows, "a_s": a, "b_s": b, **{k: i[k] for k in ("seconds", "peak_mb", "cpu_s")}}
            for rows, tries in lines
            for a, b, i in tries
        ]
        args.json.write_text(json.dumps({"queued": args.queued, "tries": tried}, indent=2))
    print(
        f"\ngoal: within {GOAL_COMMAND_RATIO}x of (b) and at most {GOAL_MEMORY_MB} MB at every "
        f"size: {'met' if ok else 'NOT met'} (seconds and ratios: medians of {args.repeat} "
        "tries, each ratio within its own try, worst beside it; peak: the highest; after: the "
        + (
            "commit's hooks: the work the imports started, queued for a worker)"
            if args.queued
            else "work the imports started, run in the command's process)"
        )
    )


def focus_file(path: Path, rows: int, **options) -> None:
    """Write the benchmark's FOCUS bill once (bench/focus_bill.py), readable by the server."""
    from bench.focus_bill import focus_benchmark_write

    if not path.exists():
        started = time.perf_counter()
        focus_benchmark_write(path, rows=rows, **options)
        print(
            f"wrote {path} ({path.stat().st_size / 1e6:,.0f} MB) in "
            f"{time.perf_counter() - started:.0f} s"
        )
    path.chmod(0o644)  # the server reads it for its own COPY


def main() -> None:
    parser = argparse.ArgumentParser(description="FOCUS import against PostgreSQL's COPY.")
    parser.add_argument("--rows", type=int, nargs="+")
    parser.add_argument("--repeat", type=int, default=3)
    # Outside the repository, and where the database server may read the file for its COPY.
    parser.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "costsite-bench"
    )
    parser.add_argument(
        "--command",
        action="store_true",
        help="Time `manage.py import_billing` into the database as it is (issue 24).",
    )
    parser.add_argument(
        "--queued",
        action="store_true",
        help="With --command: CELERY_TASK_ALWAYS_EAGER=false, as compose runs it: the command "
        "returns once the import commits, the work it starts left queued for a worker (the "
        "queues are emptied after each try, untimed).",
    )
    parser.add_argument(
        "--json", type=Path, help="With --command: also write each try's figures to this file."
    )
    parser.add_argument(
        "--month",
        default="2025-01",
        help="With --command: the month the bill covers (YYYY-MM; a month the database holds "
        "bills of measures an import into a month with findings to recompute).",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    if args.rows is None:
        args.rows = [300_000, 1_000_000] if args.command else [1_000_000, 3_000_000]

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    if connection.vendor != "postgresql":
        raise SystemExit("The benchmark needs PostgreSQL: set DATABASE_URL.")
    call_command("migrate", verbosity=0)
    print(
        f"PostgreSQL {connection.pg_version // 10000}, {os.cpu_count()} CPUs, "
        f"database {connection.settings_dict['NAME']}"
    )
    compile_sources()
    if args.command:
        command_benchmark(args)
        return
    lines = []
    for rows in args.rows:
        path = args.data_dir / f"focus-{rows}.csv"
        focus_file(path, rows)
        header = path.open().readline().strip().split(",")
        copies, imports = [], []
        for attempt in range(args.repeat):
            copies.append(copy_once(path, header))
            imports.append(import_once(path))
            floor = min(t for k, t in copies[-1].items() if k in ("server", "client"))
            cpu = ""
            if imports[-1]["backend_cpu"] is not None and "server_cpu" in copies[-1]:
                cpu = (
                    f"; CPU s: COPY {copies[-1]['server_cpu']:.1f}, import "
                    f"{imports[-1]['client_cpu']:.1f} here + {imports[-1]['backend_cpu']:.1f} "
                    "in PostgreSQL"
                )
            print(
                f"  {rows:>9,} rows, try {attempt + 1}: COPY {floor:6.1f} s, import "
                f"{imports[-1]['seconds']:6.1f} s ({imports[-1]['seconds'] / floor:.2f}x), "
                f"peak {imports[-1]['peak_mb']:.0f} MB{cpu}",
                flush=True,
            )
        count, billed, effective = copies[-1]["sums"]
        last = imports[-1]
        assert last["rows"] == count == rows, (last["rows"], count)
        assert Decimal(last["billed_cost"]["USD"]) == billed, (last["billed_cost"], billed)
        assert Decimal(last["effective_cost"]["USD"]) == effective
        assert last["rollup"][0] == rows, last["rollup"]
        assert (Decimal(last["rollup"][1]), Decimal(last["rollup"][2])) == (billed, effective)
        print(
            f"  totals checked: {rows:,} rows, billed {billed}, spend {effective}, in the "
            "line items and the daily rollup alike"
        )
        floors = [min(t for k, t in c.items() if k in ("server", "client")) for c in copies]
        floor = statistics.median(floors)
        took = statistics.median(i["seconds"] for i in imports)
        best = min(i["seconds"] / f for i, f in zip(imports, floors, strict=True))
        peak = max(i["peak_mb"] for i in imports)
        lines.append((rows, floor, took, best, peak))
    print()
    print(
        f"{'rows':>10} {'COPY s':>8} {'COPY rows/s':>12} {'import s':>9} "
        f"{'import rows/s':>14} {'ratio':>6} {'best':>6} {'peak MB':>8}"
    )
    for rows, floor, took, best, peak in lines:
        print(
            f"{rows:>10,} {floor:>8.1f} {rows / floor:>12,.0f} {took:>9.1f} "
            f"{rows / took:>14,.0f} {took / floor:>5.2f}x {best:>5.2f}x {peak:>8.0f}"
        )
    ok = all(
        took / floor <= GOAL_RATIO and peak < GOAL_MEMORY_MB for _, floor, took, _, peak in lines
    )
    print(
        f"\ngoal: within {GOAL_RATIO}x of COPY and under {GOAL_MEMORY_MB} MB at every size: "
        f"{'met' if ok else 'NOT met'} (ratio: of the medians of {args.repeat} tries; best: the "
        "best try, the least disturbed by other work on the machine; peak: the highest)"
    )


if __name__ == "__main__":
    main()
