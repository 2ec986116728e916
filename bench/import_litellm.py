"""Benchmark: import a million LiteLLM spend-log rows end to end, against a typed COPY of them.

It writes (once) a LiteLLM `LiteLLM_SpendLogs` CSV export of `--rows` requests over a month
(40 virtual keys in 8 teams, 12 models of 4 providers, tags on a third of the requests), then,
in the same run and alternating, several times:
- the floor: PostgreSQL's COPY of that file (psql-style, the client streaming it) into a table
  with the columns typed as LiteLLM's schema types them (numeric spend, integer tokens,
  timestamps, JSON tags);
- the import: a fresh process (its start included: `manage.py import_billing` is how a user
  runs it) runs the billing service on the file (detect, parse, validate, keep each request
  once, attribute, load, roll up) into empty billing tables; its wall time and peak memory
  (ru_maxrss, every thread).
- the floor of the line table itself: COPY of the lines the import wrote (copied out first) into
  an empty table like the line table.
With `--compare <checkout>`, that checkout's import (its own .venv's Python) runs on the same
file in each try too, before this one's: before and after a change, in the same run.
It prints the ratio to the typed COPY and the peak memory (medians of the repeats), and checks
that the import's totals equal the typed table's sums.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/costsite_apispend_bench \
        python bench/import_litellm.py --rows 1000000 --repeat 3 [--compare ../main]

Goal (issue 26): within 1.2x of the typed COPY, peak memory at most 300 MB.
"""

import argparse
import csv
import json
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")

GOAL_RATIO = 1.2
GOAL_MEMORY_MB = 300
COLUMNS = [
    ("request_id", "text"),
    ("call_type", "text"),
    ("api_key", "text"),
    ("spend", "numeric"),
    ("total_tokens", "integer"),
    ("prompt_tokens", "integer"),
    ("completion_tokens", "integer"),
    ("startTime", "timestamptz"),
    ("endTime", "timestamptz"),
    ("model", "text"),
    ("model_group", "text"),
    ("custom_llm_provider", "text"),
    ("user", "text"),
    ("team_id", "text"),
    ("request_tags", "jsonb"),
    ("status", "text"),
]
MODELS = [
    ("gpt-4o-2024-08-06", "gpt-4o", "openai", 2.5, 10),
    ("gpt-4o-mini-2024-07-18", "gpt-4o-mini", "openai", 0.15, 0.6),
    ("gpt-4.1", "gpt-4.1", "openai", 2, 8),
    ("o3-mini", "o3-mini", "openai", 1.1, 4.4),
    ("claude-sonnet-4-5-20250929", "claude-sonnet", "anthropic", 3, 15),
    ("claude-haiku-4-5", "claude-haiku", "anthropic", 1, 5),
    ("claude-opus-4-1", "claude-opus", "anthropic", 15, 75),
    ("bedrock/llama3-3-70b", "llama-70b", "bedrock", 0.72, 0.72),
    ("bedrock/nova-pro", "nova-pro", "bedrock", 0.8, 3.2),
    ("vertex_ai/gemini-2.5-flash", "gemini-flash", "vertex_ai", 0.3, 2.5),
    ("vertex_ai/gemini-2.5-pro", "gemini-pro", "vertex_ai", 1.25, 10),
    ("text-embedding-3-small", "embed-small", "openai", 0.02, 0),
]


def write_spend_logs(path: Path, rows: int) -> None:
    """A month of requests, the same for the same number of rows (a fixed seed)."""
    rng = random.Random(26)
    keys = [f"{rng.getrandbits(256):064x}" for _ in range(40)]
    start = datetime(2026, 11, 1, tzinfo=UTC)
    step = timedelta(days=30) / rows
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([name for name, _ in COLUMNS])
        for number in range(rows):
            model, group, provider, price_in, price_out = MODELS[rng.randrange(len(MODELS))]
            key = rng.randrange(len(keys))
            prompt = rng.randint(50, 8000)
            completion = rng.randint(0, 1500)
            spend = Decimal(prompt) * Decimal(str(price_in)) + completion * Decimal(str(price_out))
            began = start + step * number
            tags = json.dumps(["prod", f"service:svc-{key % 8}"]) if number % 3 == 0 else "[]"
            writer.writerow(
                [
                    f"chatcmpl-{number:08d}",
                    "acompletion",
                    keys[key],
                    format(spend / 1_000_000, "f"),
                    prompt + completion,
                    prompt,
                    completion,
                    began.isoformat().replace("+00:00", "Z"),
                    (began + timedelta(milliseconds=rng.randint(200, 9000)))
                    .isoformat()
                    .replace("+00:00", "Z"),
                    model,
                    group,
                    provider,
                    f"user-{key % 17}",
                    f"team-{key % 8}",
                    tags,
                    "success",
                ]
            )


def copy_once(path: Path) -> dict:
    """Seconds for a client streaming the file into the typed table; the table's sums."""
    import psycopg
    from django.db import connection

    dsn = connection.settings_dict
    conninfo = (
        f"host={dsn['HOST'] or '127.0.0.1'} port={dsn['PORT'] or 5432} "
        f"dbname={dsn['NAME']} user={dsn['USER']}"
        + (f" password={dsn['PASSWORD']}" if dsn.get("PASSWORD") else "")
    )
    columns = ", ".join(f'"{name}" {kind}' for name, kind in COLUMNS)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS bench_litellm_typed")
        conn.execute(f"CREATE TABLE bench_litellm_typed ({columns})")
        conn.execute("CHECKPOINT")
        started = time.perf_counter()
        with (
            conn.cursor() as cursor,
            cursor.copy(
                "COPY bench_litellm_typed FROM STDIN WITH (FORMAT csv, HEADER true)"
            ) as copy,
            path.open("rb") as handle,
        ):
            while chunk := handle.read(1 << 20):
                copy.write(chunk)
        seconds = time.perf_counter() - started
        sums = conn.execute("SELECT count(*), sum(spend) FROM bench_litellm_typed").fetchone()
        conn.execute("DROP TABLE bench_litellm_typed")
    return {"seconds": seconds, "sums": sums}


def import_once(path: Path, checkout: Path = ROOT) -> dict:
    """The import in a fresh process (bench/import_focus.py's child), timed from outside; with
    `checkout`, another checkout's code (and its virtualenv's Python) imports the same file."""
    import subprocess

    from django.db import connection

    from bench.import_focus import BILLING_TABLES

    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {BILLING_TABLES} CASCADE")
        cursor.execute("CHECKPOINT")
    python = checkout / ".venv" / "bin" / "python"
    started = time.perf_counter()
    done = subprocess.run(
        [
            str(python if python.exists() else sys.executable),
            str(checkout / "bench" / "import_focus.py"),
            "--child",
            str(path),
        ],
        cwd=checkout,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"the import process failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["status"] != "succeeded":
        raise SystemExit(f"the import did not succeed: {result['error']}")
    result["wall"] = wall
    return result


def model_api_totals() -> tuple[int, Decimal]:
    """Requests and dollars in the model API rollup the pages read."""
    from django.db.models import Sum

    from apps.billing.models import DailyModelApiCost

    totals = DailyModelApiCost.objects.aggregate(
        requests=Sum("requests"), billed=Sum("billed_cost")
    )
    return int(totals["requests"]), totals["billed"]


def line_copy_once() -> float:
    """Seconds for COPY of the lines the import just wrote into an empty table like the line
    table: the floor of loading this many lines, whoever writes them."""
    import psycopg
    from django.db import connection

    dsn = connection.settings_dict
    conninfo = (
        f"host={dsn['HOST'] or '127.0.0.1'} port={dsn['PORT'] or 5432} "
        f"dbname={dsn['NAME']} user={dsn['USER']}"
        + (f" password={dsn['PASSWORD']}" if dsn.get("PASSWORD") else "")
    )
    with tempfile.TemporaryFile() as spool, psycopg.connect(conninfo, autocommit=True) as conn:
        with conn.cursor() as cursor:
            with cursor.copy("COPY billing_costlineitem TO STDOUT WITH (FORMAT csv)") as copy:
                for data in copy:
                    spool.write(data)
            conn.execute("DROP TABLE IF EXISTS bench_litellm_lines")
            conn.execute(
                "CREATE TABLE bench_litellm_lines (LIKE billing_costlineitem INCLUDING ALL)"
            )
            conn.execute("CHECKPOINT")
            spool.seek(0)
            started = time.perf_counter()
            with cursor.copy("COPY bench_litellm_lines FROM STDIN WITH (FORMAT csv)") as copy:
                while chunk := spool.read(1 << 20):
                    copy.write(chunk)
            seconds = time.perf_counter() - started
        conn.execute("DROP TABLE bench_litellm_lines")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description="LiteLLM spend logs against a typed COPY.")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "costsite-bench"
    )
    parser.add_argument(
        "--compare",
        type=Path,
        help="another checkout (its .venv's Python) whose import runs beside this one's, on the "
        "same file in the same run: before and after a change",
    )
    args = parser.parse_args()

    # The import's follow-up work (findings) is queued for the worker, as in production, not
    # run inside the measured process.
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "false"
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
    path = args.data_dir / f"litellm-spend-{args.rows}.csv"
    if not path.exists():
        started = time.perf_counter()
        write_spend_logs(path, args.rows)
        print(
            f"wrote {path} ({path.stat().st_size / 1e6:,.0f} MB) in "
            f"{time.perf_counter() - started:.0f} s"
        )
    from bench.import_focus import compile_sources

    compile_sources()
    if args.compare:
        compile_sources(args.compare.resolve())
    copies, imports, baselines, line_copies = [], [], [], []
    for attempt in range(args.repeat):
        copies.append(copy_once(path))
        floor = copies[-1]["seconds"]
        if args.compare:
            baselines.append(import_once(path, args.compare.resolve()))
            print(
                f"  {args.rows:,} rows, try {attempt + 1}: typed COPY {floor:6.1f} s, "
                f"{args.compare} import {baselines[-1]['wall']:6.1f} s "
                f"({baselines[-1]['wall'] / floor:.2f}x), peak {baselines[-1]['peak_mb']:.0f} MB",
                flush=True,
            )
        imports.append(import_once(path))
        line_copies.append(line_copy_once())
        print(
            f"  {args.rows:,} rows, try {attempt + 1}: typed COPY {floor:6.1f} s, import "
            f"{imports[-1]['wall']:6.1f} s with process start ({imports[-1]['wall'] / floor:.2f}x;"
            f" {imports[-1]['seconds']:.1f} s inside), peak {imports[-1]['peak_mb']:.0f} MB; "
            f"COPY of its {imports[-1]['line_items']:,} lines alone {line_copies[-1]:.1f} s",
            flush=True,
        )
    count, spend = copies[-1]["sums"]
    last = imports[-1]
    assert last["rows"] == count == args.rows, (last["rows"], count)
    assert Decimal(last["billed_cost"]["USD"]) == spend, (last["billed_cost"], spend)
    assert last["rollup"][0] == last["line_items"], (last["rollup"], last["line_items"])
    assert Decimal(last["rollup"][1]) == spend, last["rollup"]
    requests, billed = model_api_totals()
    assert (requests, billed) == (args.rows, spend), (requests, billed)
    print(
        f"  totals checked: {count:,} requests, ${spend} in the lines, the daily rollup and "
        f"the model API rollup ({last['line_items']:,} lines: a day's requests per key, model "
        "and tags)"
    )
    floor = statistics.median(c["seconds"] for c in copies)
    took = statistics.median(i["wall"] for i in imports)
    peak = max(i["peak_mb"] for i in imports)
    ok = took / floor <= GOAL_RATIO and peak <= GOAL_MEMORY_MB
    lines_floor = statistics.median(line_copies)
    print(
        f"\nCOPY of the line table's rows alone: {lines_floor:.1f} s "
        f"({lines_floor / floor:.2f}x the typed COPY); the import is {took / lines_floor:.2f}x it"
    )
    if baselines:
        before = statistics.median(b["wall"] for b in baselines)
        print(
            f"{args.compare}: import {before:.1f} s, {before / floor:.2f}x, peak "
            f"{max(b['peak_mb'] for b in baselines):.0f} MB (before)"
        )
    print(
        f"\n{args.rows:,} rows: typed COPY {floor:.1f} s ({args.rows / floor:,.0f} rows/s), "
        f"import {took:.1f} s ({args.rows / took:,.0f} rows/s), {took / floor:.2f}x, peak "
        f"{peak:.0f} MB\ngoal: within {GOAL_RATIO}x of a typed COPY and at most "
        f"{GOAL_MEMORY_MB} MB: {'met' if ok else 'NOT met'} (medians of {args.repeat} tries)"
    )


if __name__ == "__main__":
    main()
