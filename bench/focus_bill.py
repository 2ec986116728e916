"""The benchmark's FOCUS bill: N hourly rows of one month (January 2025) for one payer account,
in the demo bill's shape (apps/demo/billing.py: GPU and CPU instances on demand, spot and on a
savings plan, buckets, volumes, egress, monitoring; some untagged, some tag keys messy).

Only the benchmarks and the tests use it, so it lives here rather than in the demo app. Import it
after Django is set up (the demo's resources read the FOCUS format's columns).
"""

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from apps.demo.billing import (
    ACCOUNT_ID,
    CPU_INSTANCES,
    GPU_INSTANCES,
    HEADER,
    REGIONS,
    SUB_ACCOUNTS,
    Resource,
    focus_csv_write,
    hour_rows,
)

BENCH_PROJECTS = ("vision", "nlp", "speech", "recsys", "search", "forecasting")


def _bench_resources(count: int, rng: random.Random) -> list[Resource]:
    """A fleet of `count` resources with a realistic mix and tagging."""
    resources = []
    for i in range(count):
        roll = rng.random()
        project = BENCH_PROJECTS[i % len(BENCH_PROJECTS)]
        tags: dict | None = {"project": project, "team": f"team-{i % 4}", "env": "prod"}
        if i % 3 == 0:
            tags["experiment"] = f"exp-{i:05d}"
        if i % 11 == 0:
            tags = {" Project ": project, "cost-center": f"cc-{i % 9}"}  # a messy key
        if i % 7 == 0:
            tags = None  # untagged: unattributed unless registered or claimed by a rule
        region = REGIONS[i % 2]
        sub = SUB_ACCOUNTS[i % 2]
        if roll < 0.35:
            itype, price, gpus, vcpus = GPU_INSTANCES[i % len(GPU_INSTANCES)]
            pricing = ("Standard", "Dynamic", "Committed")[i % 3]
            resources.append(
                Resource(
                    f"arn:aws:ec2:{region[0]}:{sub[0]}:instance/i-{i:017x}",
                    f"gpu-{i}",
                    "gpu",
                    price,
                    itype,
                    gpus,
                    vcpus,
                    region,
                    sub,
                    tags,
                    pricing,
                )
            )
        elif roll < 0.60:
            itype, price, gpus, vcpus = CPU_INSTANCES[i % len(CPU_INSTANCES)]
            resources.append(
                Resource(
                    f"arn:aws:ec2:{region[0]}:{sub[0]}:instance/i-{i:017x}",
                    f"cpu-{i}",
                    "cpu",
                    price,
                    itype,
                    gpus,
                    vcpus,
                    region,
                    sub,
                    tags,
                )
            )
        elif roll < 0.70:
            resources.append(
                Resource(
                    f"arn:aws:s3:::acme-{project}-data-{i}",
                    f"acme-{project}-data-{i}",
                    "bucket",
                    Decimal(rng.randint(500, 50000)),
                    region=region,
                    sub_account=sub,
                    tags=tags,
                )
            )
        elif roll < 0.80:
            resources.append(
                Resource(
                    f"arn:aws:ec2:{region[0]}:{sub[0]}:volume/vol-{i:017x}",
                    f"vol-{i}",
                    "volume",
                    Decimal(rng.randint(100, 4000)),
                    region=region,
                    sub_account=sub,
                    tags=tags,
                )
            )
        elif roll < 0.90:
            resources.append(
                Resource(
                    "",
                    "",
                    "egress",
                    Decimal(0),
                    region=region,
                    sub_account=sub,
                    tags=None,
                )
            )
        else:
            resources.append(
                Resource(
                    f"arn:aws:cloudwatch:{region[0]}:{sub[0]}:metrics/{i}",
                    "",
                    "monitoring",
                    Decimal(0),
                    region=region,
                    sub_account=sub,
                    tags=tags,
                )
            )
    return resources


def focus_benchmark_write(
    path: Path,
    *,
    rows: int,
    seed: int = 7,
    account: str = ACCOUNT_ID,
    month: datetime = datetime(2025, 1, 1, tzinfo=UTC),
) -> Path:
    """Write `rows` hourly lines of one month (January 2025, or the `month` starting then) for one
    payer account (the demo's, or `account`: a bill of its own, which replaces none a database
    already holds)."""
    rng = random.Random(seed)
    following = (month + timedelta(days=32)).replace(day=1)
    hours = [month + timedelta(hours=h) for h in range((following - month).days * 24)]
    resources = _bench_resources(-(-rows // len(hours)), rng)
    lines = hour_rows(resources, hours, rng, limit=rows)
    if account != ACCOUNT_ID:
        lines = _billed_to(lines, account)
    return focus_csv_write(path, lines)


def _billed_to(lines: Iterator[list[str]], account: str) -> Iterator[list[str]]:
    """The same lines with another payer account (each row is a list of its own)."""
    column = HEADER.index("BillingAccountId")
    for row in lines:
        row[column] = account
        yield row
