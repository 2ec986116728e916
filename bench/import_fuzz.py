"""Fuzz every importer, billing and metrics, with thousands of generated malformed files.

The same generator and check as the property tests (tests/fuzz.py; in CI a bounded profile of
about 200 files per importer): each file is a valid one of the format broken one way (a bad
value where the import cannot do without one, a broken structure, or random text). Every import
must end as the rules say: a failed run whose message names the file and the row and column (or
the file's fault), never an internal error, never a partial import (rows are counted before and
after); a file whose random text happens to be valid may load, and then loads whole.

It prints, per importer: how many files ran, how many failed cleanly, how many loaded (random
text that was valid), and how many broke a rule (with the first few, to reproduce).

Run from the repository root against PostgreSQL (it creates and drops its own database,
test_<name of DATABASE_URL's database>, so no data of yours is touched):

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/costsite python bench/import_fuzz.py
    ... --cases 2000 --only focus,gcp --seed 7 --json
"""

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")


def fuzz(importer, folder: Path, tally, problems: list[str], args) -> None:
    """Run `args.cases` generated files of one importer, tallying how each ended."""
    from hypothesis import HealthCheck, Phase, given, seed, settings

    from tests.fuzz import cases, describe, outcome

    @seed(args.seed)
    @settings(
        max_examples=args.cases,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=cases(importer, folder))
    def run(case):
        result = outcome(importer, case)
        tally["ran"] += 1
        if not result.clean:
            tally["broke a rule"] += 1
            if len(problems) < 5:
                problems.append(f"{result.why}: {result.message!r} for {describe(case)}")
        elif result.status == "failed":
            tally["failed cleanly"] += 1
        else:
            tally["loaded"] += 1

    run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000, help="files per importer")
    parser.add_argument("--only", default="", help="comma-separated importers (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="the generator's seed")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import connection, connections
    from django.test.utils import setup_databases, teardown_databases

    from apps.accounts.models import Organization
    from tests.fuzz import importers

    if connection.vendor != "postgresql":
        sys.exit("bench/import_fuzz.py needs PostgreSQL (DATABASE_URL=postgresql://...).")
    chosen = [i for i in importers() if not args.only or i.name in args.only.split(",")]
    databases = setup_databases(verbosity=0, interactive=False, aliases={"default", "progress"})
    figures = []
    try:
        Organization.get()
        for importer in chosen:
            tally: Counter = Counter()
            problems: list[str] = []
            started = time.monotonic()
            with tempfile.TemporaryDirectory(prefix=f"fuzz-{importer.name}-") as folder:
                fuzz(importer, Path(folder), tally, problems, args)
            figures.append(
                {
                    "importer": importer.name,
                    "ran": tally["ran"],
                    "failed_cleanly": tally["failed cleanly"],
                    "loaded": tally["loaded"],
                    "broke_a_rule": tally["broke a rule"],
                    "seconds": round(time.monotonic() - started, 1),
                    "problems": problems,
                }
            )
    finally:
        connections.close_all()  # the progress connection too: the database is dropped
        teardown_databases(databases, verbosity=0)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"{'importer':<18}{'ran':>7}{'failed cleanly':>16}{'loaded':>8}{'broke a rule':>14}")
        for row in figures:
            print(
                f"{row['importer']:<18}{row['ran']:>7}{row['failed_cleanly']:>16}"
                f"{row['loaded']:>8}{row['broke_a_rule']:>14}   ({row['seconds']} s)"
            )
            for problem in row["problems"]:
                print(f"    {problem}")
        total = sum(row["ran"] for row in figures)
        clean = sum(row["ran"] - row["broke_a_rule"] for row in figures)
        print(f"{'all':<18}{total:>7}   {clean} of them ended as the rules say")
    if any(row["broke_a_rule"] for row in figures):
        sys.exit(1)


if __name__ == "__main__":
    main()
