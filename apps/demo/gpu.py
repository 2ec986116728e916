"""GPU metrics for the demo organisation, written as the files real collectors leave behind.

For every instance registered on an experiment or a deployment, over its whole window in the
demo's span (the full demo: the 88 days its runs and bill cover; the small one, for tests: two
days), the GPUs it has report what their run would make them do:
  - training and fine-tuning runs keep their GPUs busy (85-97%), except one data-starved run whose
    GPUs wait on the input pipeline, near 30%;
  - notebooks are used for an hour or two after they start, then sit idle for days;
  - evaluation jobs are moderately busy;
  - deployments follow the day: busy in the afternoon, quiet at night; the document embedder's
    three L4s are sized for a peak that never comes (about 20% busy), so a day's embedding fits
    a batch window of a few hours (the batch_not_realtime and batch_requests levers).
Runs write nvidia-smi CSV logs (one per host, with a hostname column, timestamps in the
organisation's time zone as a host set to it would write them); deployments are pulled from
Prometheus, one query_range response per metric per day, with an `instance_id` label; running
training runs also leave a dcgm-exporter scrape (its file time is when it was taken). Two
workstations nobody registered report too, so the mapping page has hosts to map.

The last two weeks are sampled every five minutes; older days every half hour, as an archive that
keeps fewer points would (so the seed stays quick, and every hour still has samples). Prometheus
answers come one query_range response per metric per week.

Every file imports with the defaults of `import_gpu_metrics`. Deterministic for a given database
and moment: a fixed seed, values from the resource ids.
"""

import hashlib
import json
import os
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from django.utils import timezone

from apps.accounts.models import Organization
from apps.deployments.models import DeploymentResource
from apps.experiments.models import Experiment, ExperimentResource

# gpu_type on experiments/deployments -> (nvidia-smi name, memory MiB, idle W, busy W)
GPU_MODELS = {
    "H100-80GB": ("NVIDIA H100 80GB HBM3", 81559, 70.0, 690.0),
    "A100-80GB": ("NVIDIA A100-SXM4-80GB", 81920, 60.0, 390.0),
    "A100-40GB": ("NVIDIA A100-SXM4-40GB", 40960, 55.0, 380.0),
    "A10G": ("NVIDIA A10G", 23028, 18.0, 290.0),
    "L4": ("NVIDIA L4", 23034, 16.0, 70.0),
    "T4": ("Tesla T4", 15360, 10.0, 68.0),
}
SMI_FIELDS = (
    "timestamp, hostname, index, uuid, name, utilization.gpu [%], memory.total [MiB], "
    "memory.used [MiB], power.draw [W], temperature.gpu"
)
PULL_METRICS = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_POWER_USAGE",
)
UNREGISTERED_HOSTS = ("ml-workstation-07", "ml-workstation-12")
SEED = 6
HISTORY_DAYS = 88  # seed.DEMO_HISTORY_DAYS: the span the runs and the bill cover
PULL_CHUNK = timedelta(days=7)  # one query_range response per metric per week


@dataclass(frozen=True)
class Scale:
    days: int  # how far back the metrics reach
    step_seconds: int  # one sample per GPU every step, in the recent days
    max_gpus: int  # per instance
    recent_days: int  # sampled every step_seconds; older days every old_step_seconds
    old_step_seconds: int


FULL = Scale(days=HISTORY_DAYS, step_seconds=300, max_gpus=8, recent_days=14, old_step_seconds=1800)
SMALL = Scale(days=2, step_seconds=900, max_gpus=2, recent_days=2, old_step_seconds=900)


@dataclass(frozen=True)
class Box:
    """One instance in the window: what it runs and how its GPUs behave."""

    host: str
    resource_id: str
    gpu_type: str
    gpus: int
    start: datetime
    end: datetime
    behaviour: str  # busy, starved, notebook, moderate, daily, light


# Deployments whose GPUs do not follow the day (the others are "daily").
SERVING_BEHAVIOUR = {"embedder-api": "light"}


def _seed(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def _uuid(resource_id: str, index: int) -> str:
    digest = hashlib.sha256(f"{resource_id}/{index}".encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _host(resource_id: str) -> str:
    """EC2 hosts named after their instance id; a GCP VM as the last part of its resource name."""
    return resource_id.rstrip("/").rsplit("/", 1)[-1]


def _utilisation(behaviour: str, moments: np.ndarray, start: datetime, rng) -> np.ndarray:
    hours_in = (moments - start.timestamp()) / 3600.0
    noise = rng.normal(0, 4, len(moments))
    if behaviour == "busy":
        util = rng.uniform(85, 97) + noise
        # A checkpoint every few hours stalls the GPUs for a few minutes.
        util[(hours_in % 4) < 0.08] = rng.uniform(5, 15)
    elif behaviour == "starved":
        # The data loader cannot keep up: short bursts, long waits, about 30% on the whole.
        util = 30 + 22 * np.sin(moments / 97.0) + noise
    elif behaviour == "notebook":
        util = np.where(hours_in < 1.5, 45 + noise * 5, np.abs(noise) * 0.3)
    elif behaviour == "moderate":
        util = 60 + noise * 2
    elif behaviour == "light":  # serving far below its capacity, round the clock
        util = 20 + noise
    else:  # daily: inference traffic peaks mid-afternoon UTC and bottoms out at night
        hour_of_day = (moments / 3600.0) % 24
        util = 12 + 58 * (1 + np.cos((hour_of_day - 15) / 24 * 2 * np.pi)) / 2 + noise
    return np.clip(np.rint(util), 0, 100)


def _boxes(*, scale: Scale, now: datetime) -> list[Box]:
    since = now - timedelta(days=scale.days)
    boxes: list[Box] = []
    trainings: list[int] = []
    uses = ExperimentResource.objects.select_related("experiment").order_by("pk")
    for use in uses:
        experiment = use.experiment
        start = use.started_at or experiment.started_at
        end = use.ended_at or experiment.ended_at or now
        if start is None or end <= since or start >= now or not experiment.gpu_count:
            continue
        if experiment.kind in (Experiment.Kind.TRAINING, Experiment.Kind.FINE_TUNING):
            behaviour = "busy"
            if experiment.kind == Experiment.Kind.TRAINING:
                if experiment.pk not in trainings:
                    trainings.append(experiment.pk)
                # The second training run (all its nodes) is the data-starved one.
                if trainings.index(experiment.pk) == 1:
                    behaviour = "starved"
        elif experiment.kind == Experiment.Kind.NOTEBOOK:
            behaviour = "notebook"
        else:
            behaviour = "moderate"
        boxes.append(
            Box(
                host=_host(use.resource_id),
                resource_id=use.resource_id,
                gpu_type=experiment.gpu_type,
                gpus=min(experiment.gpu_count, scale.max_gpus),
                start=max(start, since),
                end=min(end, now),
                behaviour=behaviour,
            )
        )
    for use in DeploymentResource.objects.select_related("deployment").order_by("pk"):
        deployment = use.deployment
        start = use.started_at or deployment.started_at or since
        end = use.ended_at or deployment.ended_at or now
        if end <= since or start >= now or not deployment.gpu_count:
            continue
        boxes.append(
            Box(
                host=_host(use.resource_id),
                resource_id=use.resource_id,
                gpu_type=deployment.gpu_type,
                gpus=min(deployment.gpu_count, scale.max_gpus),
                start=max(start, since),
                end=min(end, now),
                behaviour=SERVING_BEHAVIOUR.get(deployment.name, "daily"),
            )
        )
    for host in UNREGISTERED_HOSTS:
        boxes.append(
            Box(
                host=host,
                resource_id="",
                gpu_type="A10G",
                gpus=1,
                start=since,
                end=now,
                behaviour="notebook",
            )
        )
    return boxes


def _grid(start: float, end: float, step: int) -> np.ndarray:
    first = -(-int(start) // step) * step
    return np.arange(first, end, step, dtype=np.float64)


def _moments(box: Box, scale: Scale, now: datetime) -> np.ndarray:
    """The box's sample times: every old_step_seconds before the recent days, then every
    step_seconds (both on whole multiples of their step, as a collector's timer would be)."""
    recent = (now - timedelta(days=scale.recent_days)).timestamp()
    start, end = box.start.timestamp(), float(int(box.end.timestamp()))
    older = _grid(start, min(end, recent), scale.old_step_seconds)
    newer = _grid(max(start, recent), end, scale.step_seconds)
    return np.concatenate([older, newer])


def _readings(box: Box, index: int, moments: np.ndarray) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(_seed(f"{SEED}/{box.resource_id or box.host}/{index}"))
    name, total, idle_watts, busy_watts = GPU_MODELS.get(box.gpu_type, GPU_MODELS["A10G"])
    util = _utilisation(box.behaviour, moments, box.start, rng)
    used = np.where(util > 3, total * rng.uniform(0.55, 0.9), total * 0.02) + rng.normal(
        0, 200, len(moments)
    )
    used = np.clip(np.rint(used), 0, total - 1)
    power = idle_watts + (busy_watts - idle_watts) * util / 100 + rng.normal(0, 3, len(moments))
    return {"util": util, "used": used, "total": total, "power": np.round(power, 2), "name": name}


def _write_smi(
    path: Path, boxes: list[Box], scale: Scale, now: datetime, zone: zoneinfo.ZoneInfo
) -> None:
    with path.open("w") as out:
        out.write(SMI_FIELDS + "\n")
        for box in boxes:
            moments = _moments(box, scale, now)
            for index in range(box.gpus):
                values = _readings(box, index, moments)
                uuid = _uuid(box.resource_id or box.host, index)
                for k, moment in enumerate(moments.tolist()):
                    local = datetime.fromtimestamp(moment, tz=UTC).astimezone(zone)
                    out.write(
                        f"{local:%Y/%m/%d %H:%M:%S}.{(index * 37) % 1000:03d}, {box.host}, "
                        f"{index}, {uuid}, {values['name']}, {values['util'][k]:.0f} %, "
                        f"{values['total']} MiB, {values['used'][k]:.0f} MiB, "
                        f"{values['power'][k]:.2f} W, {40 + values['util'][k] * 0.35:.0f}\n"
                    )


def _write_prometheus(directory: Path, boxes: list[Box], scale: Scale, now: datetime) -> list[Path]:
    paths = []
    series_of = {}
    for box in boxes:
        moments = _moments(box, scale, now)
        for index in range(box.gpus):
            series_of[(box, index)] = (moments, _readings(box, index, moments))
    since = min(box.start for box in boxes)
    day = since.replace(hour=0, minute=0, second=0, microsecond=0)
    while day < now:
        day_end = min(day + PULL_CHUNK, now)
        for metric in PULL_METRICS:
            result = []
            for box in boxes:
                for index in range(box.gpus):
                    all_moments, values = series_of[(box, index)]
                    keep = (all_moments >= day.timestamp()) & (all_moments < day_end.timestamp())
                    moments = all_moments[keep]
                    if not len(moments):
                        continue
                    series = {
                        "DCGM_FI_DEV_GPU_UTIL": values["util"][keep],
                        "DCGM_FI_DEV_FB_USED": values["used"][keep],
                        "DCGM_FI_DEV_FB_FREE": values["total"] - values["used"][keep],
                        "DCGM_FI_DEV_POWER_USAGE": values["power"][keep],
                    }[metric]
                    labels = {
                        "__name__": metric,
                        "gpu": str(index),
                        "UUID": _uuid(box.resource_id, index),
                        "device": f"nvidia{index}",
                        "modelName": values["name"],
                        "Hostname": box.host,
                        "instance_id": box.resource_id,
                        "instance": f"{box.host}:9400",
                        "job": "nvidia-dcgm-exporter",
                    }
                    result.append(
                        {
                            "metric": labels,
                            "values": [
                                [int(moment), f"{value:g}"]
                                for moment, value in zip(
                                    moments.tolist(), series.tolist(), strict=True
                                )
                            ],
                        }
                    )
            if result:
                path = directory / f"prometheus-{metric}-{day:%Y-%m-%d}.json"
                path.write_text(
                    json.dumps(
                        {"status": "success", "data": {"resultType": "matrix", "result": result}}
                    )
                )
                paths.append(path)
        day += PULL_CHUNK
    return paths


def _write_scrape(path: Path, boxes: list[Box], taken: datetime) -> None:
    lines = []
    for metric, help_text in (
        ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
        ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
        ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."),
        ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."),
    ):
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]
        for box in boxes:
            moment = np.array([float(int(taken.timestamp()))])
            for index in range(box.gpus):
                values = _readings(box, index, moment)
                value = {
                    "DCGM_FI_DEV_GPU_UTIL": f"{values['util'][0]:.0f}",
                    "DCGM_FI_DEV_FB_USED": f"{values['used'][0]:.0f}",
                    "DCGM_FI_DEV_FB_FREE": f"{values['total'] - values['used'][0]:.0f}",
                    "DCGM_FI_DEV_POWER_USAGE": f"{values['power'][0]:.6f}",
                }[metric]
                lines.append(
                    f'{metric}{{gpu="{index}",UUID="{_uuid(box.resource_id, index)}",'
                    f'device="nvidia{index}",modelName="{values["name"]}",'
                    f'Hostname="{box.host}",DCGM_FI_DRIVER_VERSION="580.105.08"}} {value}'
                )
    path.write_text("\n".join(lines) + "\n")
    os.utime(path, (taken.timestamp(), taken.timestamp()))


def demo_gpu_metrics_write(
    *, directory: Path, small: bool, now: datetime | None = None
) -> list[Path]:
    """Write the demo's GPU metrics files into `directory` and return their paths, in the order to
    import them."""
    scale = SMALL if small else FULL
    now = (now or timezone.now()).astimezone(UTC)
    directory.mkdir(parents=True, exist_ok=True)
    zone = zoneinfo.ZoneInfo(Organization.get().time_zone)
    boxes = _boxes(scale=scale, now=now)
    paths: list[Path] = []

    runs = [box for box in boxes if box.behaviour not in ("daily", "light")]
    for number, first in enumerate(range(0, len(runs), 8), start=1):
        path = directory / f"nvidia-smi-{number:02d}.csv"
        _write_smi(path, runs[first : first + 8], scale, now, zone)
        paths.append(path)

    serving = [box for box in boxes if box.behaviour in ("daily", "light")]
    if serving:
        paths += _write_prometheus(directory, serving, scale, now)

    running = [box for box in runs if box.behaviour in ("busy", "starved") and box.end >= now]
    if running:
        # Taken between two logged samples, as a live scrape would be.
        taken = now - timedelta(seconds=scale.step_seconds // 2)
        path = directory / "dcgm-scrape-latest.prom"
        _write_scrape(path, running, taken)
        paths.append(path)
    return paths


def demo_gpu_metrics_load(*, directory: Path, small: bool, log: Callable[[str], None]) -> None:
    """The seed_demo step: write the files, then import each through the real importer."""
    from apps.gpu import services
    from apps.gpu.models import MetricImport

    for path in demo_gpu_metrics_write(directory=directory, small=small):
        metric_import = services.metric_import_execute(
            metric_import=services.metric_import_create(path=str(path))
        )
        if metric_import.status == MetricImport.Status.FAILED:
            raise RuntimeError(f"GPU metrics demo import failed: {metric_import.error}")
        log(
            f"{path.name}: {metric_import.samples:,} samples, {metric_import.gpus} GPUs, "
            f"{metric_import.hours} GPU-hours"
        )
