"""Runs a team tracked in Weights & Biases, imported from the runs JSON its public API gives, as
an operator would import them (no W&B, and no MLflow server, is needed by the demo)."""

import hashlib
import json
import math
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from django.utils import timezone

WANDB_FILE = "wandb-runs.json"

# (id, name, state, project, GPUs, started days ago, hours run, first loss, in the small demo)
RUNS = (
    ("3kq9zt1a", "yolo-v8-sweep-7", "finished", "defect-detection", 4, 20, 9, 2.4, True),
    ("8hd2ma0c", "intent-llama-lora", "crashed", "support-assistant", 2, 12, 3, 1.9, True),
    ("p0x7ne4r", "colbert-distill", "running", "doc-search", 1, 1, 0, 3.1, True),
    ("m4vb8s2k", "unet-3d-baseline", "killed", "medical-segmentation", 8, 30, 5, 1.2, False),
    ("c1z5wq9y", "tokenizer-ablation", "finished", "llm-pretraining", 8, 40, 14, 6.5, False),
)
STEPS = 40


def _instance_id(run_id: str) -> str:
    """An EC2 instance id (i- and 17 hex digits), the same for the same run every time."""
    return "i-0" + hashlib.sha256(run_id.encode()).hexdigest()[:16]


def demo_wandb_runs_write(*, path: Path, small: bool, now: datetime) -> Path:
    runs = []
    for run_id, name, state, project, gpus, days_ago, hours, loss, in_small in RUNS:
        if small and not in_small:
            continue
        created = now - timedelta(days=days_ago)
        ran = timedelta(hours=hours) if state != "running" else now - created
        # A loss that falls and levels off; a crashed run's history stops early.
        steps = STEPS // 3 if state == "crashed" else STEPS
        history = [
            {
                "_step": step * 50,
                "_timestamp": (created + ran * step / STEPS).timestamp(),
                "loss": round(loss * (0.25 + 0.75 * math.exp(-step / 8)), 4),
            }
            for step in range(steps)
        ]
        runs.append(
            {
                "id": run_id,
                "name": name,
                "state": state,
                "project": project,
                "entity": "northwind-ml",
                "created_at": created.isoformat(),
                "heartbeat_at": (created + ran).isoformat() if state != "running" else None,
                "tags": ["tracked-in-wandb"],
                "config": {"gpu_count": gpus, "instance_id": _instance_id(run_id), "lr": 3e-4},
                "summary": {"loss": history[-1]["loss"], "_runtime": ran.total_seconds()},
                "history": history,
            }
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(runs, indent=1))
    return path


def demo_tracker_runs_load(*, directory: Path, small: bool, log: Callable[[str], None]) -> None:
    """The seed_demo step (before the bill, which then bills these runs' machines too)."""
    from apps.trackers.services import RunMapping, wandb_runs_import

    now = timezone.now().replace(second=0, microsecond=0)
    path = demo_wandb_runs_write(path=directory / WANDB_FILE, small=small, now=now)
    tally = wandb_runs_import(
        name=path.name,
        data=path.read_bytes(),
        mapping=RunMapping(resource_tags=("instance_id",)),
    )
    log(f"{path.name}: {tally.created} W&B runs imported as experiments")
