"""The benchmark organisation: one mid-size organisation's year, for this and later benchmarks.

40 projects in 8 teams, about 100 models, 2,000 experiments (training, fine-tuning, evaluation,
notebooks; some failed, some on spot) and 30 deployments, with:
  - the bill: hourly FOCUS 1.2 lines of every resource (the runs' and deployments' GPU instances,
    each project's buckets, volumes, CPU boxes and monitoring, untagged strays, cross-region
    transfer), one CSV per month, loaded through the real import (`import_run_execute`: parse,
    validate, attribute by tags, registered resources and rules, COPY, roll up). At --scale 1 and
    365 days this is about 10 million line items;
  - GPU metrics: the hourly GPU rollup (GpuHour) of every GPU of every run and deployment, as the
    GPU import leaves it (raw samples at a 15-second scrape would be ~700 million a year; the GPU
    import has its own benchmark, bench/gpu_import.py, so the rows are written directly);
  - serving traffic (TrafficHour) of every deployment, every hour;
  - a loss series (MetricPoint) of 100 steps per training run.

--scale multiplies what is always on (per project: 25 resources at 1.0; 80 untagged strays);
the runs and deployments stay as the issue describes them. --days is the span, ending today.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/costsite_bench \\
        python bench/attribution_org.py --scale 1 --days 365

The database must be migrated and empty of projects (a dedicated one): the generator refuses
otherwise. It prints what it made and how long each part took.
"""

import argparse
import json
import math
import os
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")

TEAMS = (
    "Vision",
    "Language",
    "Speech",
    "Recommendations",
    "Search",
    "Forecasting",
    "Robotics",
    "Platform",
)
PASSWORD = "bench-password"
EXPERIMENTS = 2000
DEPLOYMENTS = 30
PROJECTS_PER_TEAM = 5
ALWAYS_ON_PER_PROJECT = 25  # at --scale 1
STRAYS = 80  # untagged, unregistered resources at --scale 1
LOSS_POINTS = 100
GPU_INSTANCES = {1: "g5.xlarge", 4: "g5.12xlarge", 8: "p4d.24xlarge"}


def log(message: str) -> None:
    print(message, flush=True)


class Timer:
    def __init__(self, what: str):
        self.what = what

    def __enter__(self):
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.started
        log(f"  {self.what}: {self.seconds:,.1f} s")


def _floor_hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def build_organisation(rng: random.Random, start: datetime, end: datetime) -> dict:
    """Teams, users, projects, models, experiments with their resources, deployments."""
    from django.contrib.auth import get_user_model

    from apps.accounts.models import Membership, Organization, Team
    from apps.deployments.models import Deployment, DeploymentResource, Model
    from apps.experiments.models import Experiment, ExperimentResource
    from apps.projects.models import Project, TagKeyAlias

    User = get_user_model()
    org = Organization.get()
    org.name, org.currency, org.time_zone = "Bench Org", "USD", "UTC"
    org.save()
    TagKeyAlias.objects.get_or_create(dimension="experiment", key="run-id")
    staff = User.objects.create_user("bench-staff", password=PASSWORD, is_staff=True)
    projects, teams = [], []
    for t, name in enumerate(TEAMS):
        team = Team.objects.create(name=name, slug=name.lower())
        teams.append(team)
        lead = User.objects.create_user(f"bench-lead-{t}", password=PASSWORD)
        member = User.objects.create_user(f"bench-member-{t}", password=PASSWORD)
        Membership.objects.create(user=lead, team=team, role="lead")
        Membership.objects.create(user=member, team=team, role="member")
        for p in range(PROJECTS_PER_TEAM):
            slug = f"{team.slug}-{p}"
            projects.append(
                Project.objects.create(team=team, name=f"{name} project {p}", slug=slug)
            )
    models = []
    for project in projects:
        for m in range(rng.choice((2, 2, 3))):
            models.append(
                Model.objects.create(
                    project=project, name=f"{project.slug}-model-{m}", external_id=f"m{m}"
                )
            )
    by_project = {p.pk: [m for m in models if m.project_id == p.pk] for p in projects}
    # A few projects drive most of the spend (Pareto): weights fall off as a power law.
    weights = [1 / (rank + 1) ** 1.1 for rank in range(len(projects))]
    when = random.Random(rng.random())
    span_hours = int((end - start).total_seconds() // 3600)
    experiments, uses, instances = [], [], []
    for e in range(EXPERIMENTS):
        project = rng.choices(projects, weights)[0]
        kind = rng.choices(["training", "fine_tuning", "evaluation", "notebook"], [55, 20, 15, 10])[
            0
        ]
        if kind == "notebook":
            hours = rng.randint(72, 24 * 30)
            gpus = 1
        else:
            hours = max(1, min(24 * 14, int(rng.lognormvariate(math.log(24), 1.0))))
            gpus = rng.choice((1, 4, 8, 8)) if kind != "evaluation" else rng.choice((1, 4))
        # Where in the span a run starts comes from a stream of its own: the organisation is
        # then the same at every --days and --scale, only its timeline stretches.
        started = start + timedelta(hours=int(when.random() * max(1, span_hours - 2)))
        ended = min(started + timedelta(hours=hours), end)
        status = rng.choices(["succeeded", "failed", "stopped"], [80, 15, 5])[0]
        if ended >= end - timedelta(hours=1):
            status = "running"
        model_choices = by_project[project.pk]
        experiments.append(
            Experiment(
                project=project,
                name=f"{project.slug}-{kind}-{e:04d}",
                external_id=f"run-{e:04d}",
                kind=kind,
                status=status,
                started_at=started,
                ended_at=None if status == "running" else ended,
                model=rng.choice(model_choices) if kind in ("training", "fine_tuning") else None,
                instance_type=GPU_INSTANCES[gpus],
                gpu_count=gpus,
                is_spot=rng.random() < 0.3,
                region=rng.choice(("us-east-1", "us-west-2")),
            )
        )
    Experiment.objects.bulk_create(experiments, batch_size=500)
    for experiment in experiments:
        nodes = (
            2
            if experiment.gpu_count == 8
            and experiment.kind == "training"
            and (experiment.pk % 3 == 0)
            else 1
        )
        for n in range(nodes):
            rid = (
                f"arn:aws:ec2:{experiment.region}:210987654321:instance/"
                f"i-{experiment.pk:012x}{n:05x}"
            )
            roll = rng.random()
            tagging = "tags" if roll < 0.6 else ("registered" if roll < 0.9 else "nothing")
            if tagging != "nothing":
                uses.append(ExperimentResource(experiment=experiment, resource_id=rid))
            instances.append(("experiment", experiment, rid, tagging))
    ExperimentResource.objects.bulk_create(uses, batch_size=1000)
    deployments, deployment_uses = [], []
    for d in range(DEPLOYMENTS):
        model = rng.choice(models)
        deployments.append(
            Deployment(
                project=model.project,
                model=model,
                name=f"{model.name}-serving-{d}",
                external_id=f"dep-{d}",
                instance_type=rng.choice(("g5.xlarge", "g5.12xlarge")),
                gpu_count=1,
                replicas=rng.choice((1, 2, 2, 3, 4)),
                started_at=start,
                region="us-east-1",
            )
        )
    Deployment.objects.bulk_create(deployments)
    for deployment in deployments:
        for r in range(deployment.replicas):
            rid = f"arn:aws:ec2:us-east-1:345678901234:instance/i-d{deployment.pk:08x}{r:07x}"
            tagging = "tags" if r % 2 == 0 else "registered"
            deployment_uses.append(DeploymentResource(deployment=deployment, resource_id=rid))
            instances.append(("deployment", deployment, rid, tagging))
    DeploymentResource.objects.bulk_create(deployment_uses)
    return {
        "staff": staff,
        "teams": teams,
        "projects": projects,
        "weights": weights,
        "models": models,
        "experiments": experiments,
        "deployments": deployments,
        "instances": instances,
    }


def bill_resources(org: dict, rng: random.Random, scale: float, start: datetime, end: datetime):
    """Every billable thing of the year, as apps.demo.billing's hourly line writer takes them."""
    from apps.demo import billing as demo

    resources = []
    for kind, owner, rid, tagging in org["instances"]:
        project = owner.project
        tags = None
        if tagging == "tags":
            key = "run-id" if kind == "experiment" else "deployment"
            tags = {"project": project.slug, key: owner.external_id}
        itype = owner.instance_type if owner.instance_type in demo.INSTANCE_PRICES else "g5.xlarge"
        price, spot, gpus, vcpus = demo.INSTANCE_PRICES[itype]
        begin = _floor_hour(owner.started_at) if kind == "experiment" else start
        finish = (
            _floor_hour(owner.ended_at) + timedelta(hours=1)
            if kind == "experiment" and owner.ended_at
            else end
        )
        resources.append(
            demo.Resource(
                rid,
                owner.name,
                "notebook" if getattr(owner, "kind", "") == "notebook" else "gpu",
                price,
                itype,
                gpus,
                vcpus,
                (owner.region, dict(demo.REGIONS).get(owner.region, owner.region)),
                demo.SUB_ACCOUNTS[0] if kind == "experiment" else demo.SUB_ACCOUNTS[1],
                tags,
                "Dynamic"
                if getattr(owner, "is_spot", False)
                else ("Committed" if kind == "deployment" else "Standard"),
                start=begin,
                end=finish,
                spot_hourly=spot,
            )
        )
    per_project = max(1, round(ALWAYS_ON_PER_PROJECT * scale))
    checkpoints = {}
    for experiment in org["experiments"]:
        if experiment.model_id and experiment.kind == "training":
            checkpoints.setdefault(experiment.project_id, []).append(experiment)
    for project in org["projects"]:
        runs = checkpoints.get(project.pk, [])
        for n in range(per_project):
            roll = n % 20
            tags = {"project": project.slug, "env": rng.choice(("prod", "dev"))}
            region = demo.REGIONS[n % 2]
            if roll < 7:
                # Checkpoint buckets: tagged with the run that writes them, so a model's
                # storage reaches its page through the run that produced it.
                if runs and n % 2 == 0:
                    tags["run-id"] = rng.choice(runs).external_id
                resource = demo.Resource(
                    f"arn:aws:s3:::{project.slug}-data-{n}",
                    f"{project.slug}-data-{n}",
                    "bucket",
                    Decimal(rng.randint(2000, 200000)),
                    region=region,
                    tags=tags,
                )
            elif roll < 13:
                resource = demo.Resource(
                    f"arn:aws:ec2:{region[0]}:210987654321:volume/vol-{project.pk:06x}{n:06x}",
                    f"{project.slug}-vol-{n}",
                    "volume",
                    Decimal(rng.randint(100, 4000)),
                    region=region,
                    tags=tags,
                )
            elif roll < 18:
                itype, price, gpus, vcpus = demo.CPU_INSTANCES[n % len(demo.CPU_INSTANCES)]
                resource = demo.Resource(
                    f"arn:aws:ec2:{region[0]}:210987654321:instance/i-c{project.pk:06x}{n:09x}",
                    f"{project.slug}-cpu-{n}",
                    "cpu",
                    price,
                    itype,
                    gpus,
                    vcpus,
                    region,
                    demo.SUB_ACCOUNTS[0],
                    tags,
                )
            else:
                resource = demo.Resource(
                    f"arn:aws:cloudwatch:{region[0]}:210987654321:metrics/{project.slug}-{n}",
                    "",
                    "monitoring",
                    Decimal(0),
                    region=region,
                    tags=tags,
                )
            resources.append(resource)
    for n in range(max(1, round(STRAYS * scale))):
        region = demo.REGIONS[n % 2]
        if n % 4 == 0:
            itype, price, gpus, vcpus = demo.GPU_INSTANCES[n % len(demo.GPU_INSTANCES)]
            stray = demo.Resource(
                f"arn:aws:ec2:{region[0]}:210987654321:instance/i-5{n:016x}",
                f"forgotten-gpu-{n}",
                "gpu",
                price,
                itype,
                gpus,
                vcpus,
                region,
            )
        elif n % 4 == 1:
            stray = demo.Resource(
                f"arn:aws:s3:::scratch-{n}",
                f"scratch-{n}",
                "bucket",
                Decimal(rng.randint(500, 50000)),
                region=region,
            )
        else:
            itype, price, gpus, vcpus = demo.CPU_INSTANCES[n % len(demo.CPU_INSTANCES)]
            stray = demo.Resource(
                f"arn:aws:ec2:{region[0]}:210987654321:instance/i-6{n:016x}",
                f"stray-{n}",
                "cpu",
                price,
                itype,
                gpus,
                vcpus,
                region,
            )
        resources.append(stray)
    for region in demo.REGIONS:
        resources.append(demo.Resource("", "", "egress", Decimal(0), region=region))
    return resources


def write_and_import(resources, rng, start: datetime, end: datetime, out: Path) -> dict:
    """One FOCUS file per calendar month, each imported as it is written, then deleted."""
    from apps.billing.services import import_run_create, import_run_execute
    from apps.demo import billing as demo

    out.mkdir(parents=True, exist_ok=True)
    totals = {"rows": 0, "write_s": 0.0, "import_s": 0.0, "files": 0}
    month = start.replace(day=1, hour=0)
    while month < end:
        following = (month + timedelta(days=32)).replace(day=1)
        first, last = max(month, start), min(following, end)
        hours = [
            first + timedelta(hours=h) for h in range(int((last - first).total_seconds() // 3600))
        ]
        active = [
            r
            for r in resources
            if (r.start is None or r.start < last) and (r.end is None or r.end > first)
        ]
        path = out / f"focus-{month:%Y-%m}.csv"
        clock = time.perf_counter()
        demo.focus_csv_write(path, demo.hour_rows(active, hours, rng))
        totals["write_s"] += time.perf_counter() - clock
        clock = time.perf_counter()
        run = import_run_execute(import_run=import_run_create(paths=[str(path)]))
        seconds = time.perf_counter() - clock
        totals["import_s"] += seconds
        if run.status != "succeeded":
            raise SystemExit(f"import of {path} ended {run.status}: {run.error}")
        totals["rows"] += run.rows_done
        totals["files"] += 1
        log(f"  {path.name}: {run.rows_done:,} rows imported in {seconds:,.1f} s")
        path.unlink()
        month = following
    return totals


def _copy(model, columns: list[str], rows) -> int:
    """Rows into a table through COPY (text format), in one statement."""
    from django.db import connection

    table = model._meta.db_table
    count = 0
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row(row)
            count += 1
    return count


def gpu_rollup(org: dict, rng: random.Random, end: datetime) -> int:
    """GPUs of every run's and deployment's instance, and their hourly rollup rows."""
    from apps.gpu.models import Gpu, GpuHour

    gpus = []
    windows = []
    for kind, owner, rid, _tagging in org["instances"]:
        host = rid.rsplit("/", 1)[-1]  # EC2 names the host after the instance
        count = owner.gpu_count if kind == "experiment" else 1
        for index in range(count):
            gpus.append(
                Gpu(
                    uuid=f"GPU-{host}-{index}",
                    host=host,
                    index=index,
                    model_name="NVIDIA A100-SXM4-40GB",
                    first_seen_at=owner.started_at,
                )
            )
            if kind == "experiment":
                begin = _floor_hour(owner.started_at)
                finish = _floor_hour(owner.ended_at or end)
                # Busy, data-starved or idle (a notebook): the utilisation a run shows.
                level = 3 if owner.kind == "notebook" else rng.choice((88, 88, 88, 30))
            else:
                begin, finish, level = _floor_hour(owner.started_at), end, -1
            windows.append((begin, finish, level))
    Gpu.objects.bulk_create(gpus, batch_size=2000)

    def rows():
        now = datetime.now(tz=UTC).isoformat()
        for gpu, (begin, finish, level) in zip(gpus, windows, strict=True):
            hour = begin
            while hour < finish:
                if level < 0:  # serving: a daily cycle
                    util = 20 + 60 * max(0.0, math.sin((hour.hour - 6) / 24 * 2 * math.pi))
                else:
                    util = max(0.0, min(100.0, level + rng.uniform(-8, 8)))
                idle = 1.0 if util < 10 else 0.0
                yield (
                    gpu.pk,
                    hour.isoformat(),
                    240,
                    240,
                    round(util, 2),
                    round(min(100, util + 10), 2),
                    idle,
                    30000.0,
                    40960.0,
                    round(80 + 3 * util, 1),
                    "10",
                    "{}",
                    now,
                )
                hour += timedelta(hours=1)

    return _copy(
        GpuHour,
        [
            "gpu_id",
            "hour",
            "samples",
            "util_samples",
            "util_mean",
            "util_max",
            "idle_share",
            "memory_used_mib",
            "memory_total_mib",
            "power_watts",
            "idle_threshold_percent",
            "state",
            "updated_at",
        ],
        rows(),
    )


def traffic(org: dict, rng: random.Random, start: datetime, end: datetime) -> int:
    from apps.deployments.models import TrafficHour

    def rows():
        now = datetime.now(tz=UTC).isoformat()
        for deployment in org["deployments"]:
            base = rng.randint(200, 20000)
            hour = start
            while hour < end:
                requests = int(
                    base * (0.4 + 0.6 * max(0.0, math.sin((hour.hour - 6) / 24 * 2 * math.pi)))
                )
                yield (
                    deployment.pk,
                    hour.isoformat(),
                    requests,
                    requests // 5,
                    requests * 400,
                    requests * 80,
                    120.0,
                    310.0,
                    700.0,
                    now,
                )
                hour += timedelta(hours=1)

    return _copy(
        TrafficHour,
        [
            "deployment_id",
            "hour",
            "requests",
            "duplicate_requests",
            "tokens_in",
            "tokens_out",
            "latency_p50_ms",
            "latency_p95_ms",
            "latency_p99_ms",
            "updated_at",
        ],
        rows(),
    )


def loss_series(org: dict, rng: random.Random) -> int:
    from apps.experiments.models import MetricPoint

    def rows():
        for experiment in org["experiments"]:
            if experiment.kind not in ("training", "fine_tuning"):
                continue
            loss = rng.uniform(2.0, 4.0)
            for step in range(LOSS_POINTS):
                loss *= rng.uniform(0.97, 1.0)
                yield (experiment.pk, "loss", step * 100, round(loss, 5), None)

    return _copy(MetricPoint, ["experiment_id", "name", "step", "value", "recorded_at"], rows())


def budgets(org: dict) -> None:
    """A monthly budget near each project's last full month, some tight (heading over)."""
    from django.db.models import Sum

    from apps.billing.models import DailyCost
    from apps.projects.models import Project

    today = datetime.now(tz=UTC).date()
    last_month_end = today.replace(day=1)
    last_month_start = (last_month_end - timedelta(days=1)).replace(day=1)
    spend = dict(
        DailyCost.objects.filter(day__gte=last_month_start, day__lt=last_month_end)
        .exclude(project=None)
        .values("project_id")
        .annotate(total=Sum("effective_cost"))
        .values_list("project_id", "total")
    )
    rng = random.Random(3)
    for project in org["projects"]:
        amount = spend.get(project.pk)
        if amount:
            factor = Decimal(str(rng.choice((0.8, 1.1, 1.3, 1.6))))
            Project.objects.filter(pk=project.pk).update(
                monthly_budget=(amount * factor).quantize(Decimal("1"))
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "attribution")
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings
    from django.db import connection

    from apps.billing.models import CostLineItem, DailyCost, DailyResourceCost
    from apps.insights.tasks import on_spend_data_changed as findings_recompute_later
    from apps.projects.models import Project
    from apps.projects.ports import spend_data_changed

    if connection.vendor != "postgresql":
        raise SystemExit("The benchmark runs on PostgreSQL (DATABASE_URL).")
    if Project.objects.exists():
        raise SystemExit(
            f"{settings.DATABASES['default']['NAME']} already has projects: use a fresh database."
        )
    rng = random.Random(args.seed)
    end = datetime.now(tz=UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = end - timedelta(days=args.days)
    log(f"Organisation for {start:%Y-%m-%d} – {end:%Y-%m-%d}, scale {args.scale}:")
    clock = time.perf_counter()
    with Timer("teams, projects, runs, deployments"):
        org = build_organisation(rng, start, end)
    resources = bill_resources(org, rng, args.scale, start, end)
    log(f"  {len(resources):,} billable resources")
    # Each imported month announces spend_data_changed; with tasks run in process (the default)
    # the findings handler would recompute every finding after each of them, twelve growing
    # recomputes that are not the import's work. bench/findings_recompute.py times the recompute.
    with Timer("bill (write + import)"), spend_data_changed.muted(findings_recompute_later):
        totals = write_and_import(resources, rng, start, end, args.out)
    with Timer("GPU hourly rollup"):
        gpu_rows = gpu_rollup(org, rng, end)
    with Timer("traffic"):
        traffic_rows = traffic(org, rng, start, end)
    with Timer("loss series"):
        loss_rows = loss_series(org, rng)
    budgets(org)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    summary = {
        "scale": args.scale,
        "days": args.days,
        "projects": len(org["projects"]),
        "models": len(org["models"]),
        "experiments": len(org["experiments"]),
        "deployments": len(org["deployments"]),
        "line_items": CostLineItem.objects.count(),
        "daily_cost_rows": DailyCost.objects.count(),
        "daily_resource_rows": DailyResourceCost.objects.count(),
        "gpu_hours": gpu_rows,
        "traffic_hours": traffic_rows,
        "loss_points": loss_rows,
        "bill_rows": totals["rows"],
        "bill_write_s": round(totals["write_s"], 1),
        "bill_import_s": round(totals["import_s"], 1),
        "bill_rows_per_s_import": round(totals["rows"] / totals["import_s"])
        if totals["import_s"]
        else None,
        "seconds": round(time.perf_counter() - clock, 1),
    }
    log(json.dumps(summary, indent=2))
    (args.out / "organisation.json").write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
