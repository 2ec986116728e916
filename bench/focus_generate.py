"""Write a realistic FOCUS 1.2 CSV of N rows (hourly lines of one month, AWS "FOCUS with AWS
columns" shape: GPU and CPU instances on demand, spot and on a savings plan, buckets, volumes,
egress, monitoring; a sixth untagged, some tag keys messy).

    python bench/focus_generate.py 1000000 bench/out/focus-1m.csv
"""

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", type=int)
    parser.add_argument("path", type=Path)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    import django

    django.setup()
    from bench.focus_bill import focus_benchmark_write

    started = time.perf_counter()
    focus_benchmark_write(args.path, rows=args.rows, seed=args.seed)
    size = args.path.stat().st_size
    print(
        f"{args.rows:,} rows, {size / 1e6:,.0f} MB in {time.perf_counter() - started:.1f} s: "
        f"{args.path}"
    )


if __name__ == "__main__":
    main()
