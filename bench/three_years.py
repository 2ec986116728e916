"""Benchmark: does a third year of bills cost more than its size? (issue 24)

The benchmark organisation (bench/attribution_org.py) built twice, over one year (--days 365,
10.25M line items) and over three (--days 1095, about 30M), each in a database of its own. For
each round, one database after the other, it runs three benchmarks as a user runs them and takes
each one's ratio to its own limit, measured in the same run:
  - the import: bench/import_focus.py --command (`manage.py import_billing` of a new 300,000-row
    FOCUS bill into the database as it is, process start and the work the import starts included)
    against (b), COPY of the same typed rows into the line item table. The bill is of a month
    both organisations hold (--month, October 2026): the work an import starts recomputes that
    month's findings, which for a month nobody billed before is next to nothing;
  - the pages: bench/attribution_pages.py, every spend page and partial cold and warm, p95
    against the trivial view's;
  - the findings recompute: bench/findings_recompute.py (`manage.py findings_recompute`, all
    findings new, then all there) against its SQL pass over the same lines.
It prints the ratio of each at one year and at three, and the change: the goal is within 10%.
Each benchmark checks its own figures (the import's totals against the file, the pages' status
and queries, the recompute's kinds). Outputs go to bench/out/three_years/.

    python bench/three_years.py \\
        --one-year postgresql://postgres@127.0.0.1:5432/costsite_bench \\
        --three-years postgresql://postgres@127.0.0.1:5432/costsite_bench3y --requests 20
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
OUT = ROOT / "bench" / "out" / "three_years"
GOAL_CHANGE = 0.10


def run(command: list[str], url: str, log: Path) -> str:
    """A benchmark in a process of its own against `url`; its output, also written to `log`."""
    env = {**os.environ, "DATABASE_URL": url}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *command], env=env, cwd=ROOT, capture_output=True, text=True
    )
    log.write_text(done.stdout + done.stderr)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}); see {log}")
    print(f"  {command[0]} in {time.perf_counter() - started:.0f} s", flush=True)
    return done.stdout


def importing(url: str, name: str, repeat: int, month: str, queued: bool) -> dict:
    way = "queued" if queued else "eager"
    path = OUT / f"import-{way}-{name}.json"
    run(
        [
            "bench/import_focus.py",
            "--command",
            "--rows",
            "300000",
            "--repeat",
            str(repeat),
            "--json",
            str(path),
            "--month",
            month,
            *(["--queued"] if queued else []),
        ],
        url,
        OUT / f"import-{way}-{name}.log",
    )
    tries = json.loads(path.read_text())["tries"]
    return {f"import ({way}), x (b)": [t["seconds"] / t["b_s"] for t in tries]}


def pages(url: str, name: str, requests: int) -> dict:
    run(
        [
            "bench/attribution_pages.py",
            "--requests",
            str(requests),
            "--label",
            name,
            "--out",
            str(OUT),
        ],
        url,
        OUT / f"pages-{name}.log",
    )
    summary = json.loads((OUT / f"pages-{name}.json").read_text())
    out: dict[str, list[float]] = {}
    for results in summary["runs"]:
        for result in results[1:]:  # the first is the trivial view itself
            key = f"{result['page']}, {result['variant']}, {result['mode']}: p95 x trivial"
            out.setdefault(key, []).append(result["p95_ratio"])
    return out


def findings(url: str, name: str, runs: int) -> dict:
    output = run(
        ["bench/findings_recompute.py", "--runs", str(runs)], url, OUT / f"findings-{name}.log"
    )
    summary = json.loads(output[output.index("\n{\n") + 1 :])
    sql = summary["seconds"]["sql_pass"]
    return {
        "findings recompute (all new), x SQL pass": [
            f / s for f, s in zip(summary["seconds"]["first"], sql, strict=True)
        ],
        "findings recompute (all there), x SQL pass": [
            a / s for a, s in zip(summary["seconds"]["again"], sql, strict=True)
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one-year", required=True, help="DATABASE_URL of the one-year org")
    parser.add_argument("--three-years", required=True, help="DATABASE_URL of the three-year org")
    parser.add_argument("--requests", type=int, default=20, help="per page, cold and warm")
    parser.add_argument("--repeat", type=int, default=3, help="imports and recomputes each")
    parser.add_argument("--only", default="import,pages,findings")
    parser.add_argument(
        "--month",
        default="2026-10",
        help="the month of the imported bill: one both organisations hold (the import's work "
        "includes recomputing that month's findings)",
    )
    parser.add_argument(
        "--queued",
        action="store_true",
        help="the import as compose runs it: the command returns once the import commits, the "
        "work it starts (the month's findings) left queued for a worker",
    )
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    measures = {
        "import": lambda url, name: importing(url, name, args.repeat, args.month, args.queued),
        "pages": lambda url, name: pages(url, name, args.requests),
        "findings": lambda url, name: findings(url, name, args.repeat),
    }
    figures: dict[str, dict[str, list[float]]] = {"1y": {}, "3y": {}}
    for measure in args.only.split(","):
        for name, url in (("1y", args.one_year), ("3y", args.three_years)):
            print(f"{measure} at {name}", flush=True)
            for key, values in measures[measure](url, name).items():
                figures[name].setdefault(key, []).extend(values)
    rows = []
    print(
        f"\n{'ratio (median of the tries; worst)':<66} {'1 year':>13} {'3 years':>13} {'change':>7}"
    )
    for key in figures["1y"]:
        one, three = figures["1y"][key], figures["3y"].get(key)
        if not three:
            continue
        change = statistics.median(three) / statistics.median(one) - 1
        rows.append(
            {
                "ratio": key,
                "one_year": one,
                "three_years": three,
                "change": round(change, 3),
            }
        )
        print(
            f"{key[:66]:<66} {statistics.median(one):>6.2f} ({max(one):>4.1f}) "
            f"{statistics.median(three):>6.2f} ({max(three):>4.1f}) {change:>+6.0%}"
        )
    within = [r for r in rows if r["change"] <= GOAL_CHANGE]
    print(f"\nwithin {GOAL_CHANGE:.0%} of the one-year ratio: {len(within)} of {len(rows)}")
    (OUT / "three_years.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
