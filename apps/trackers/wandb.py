"""Weights & Biases runs read from files (no network access to W&B): the runs table the W&B UI
exports as CSV, and the runs of its public API written out as JSON.

The CSV has summary values only, so no loss history; the JSON carries each run's `history`
where the script that wrote it asked for it. Either file is read whole before anything is
written, and any fault is reported with the row (or run) and column (or field) it is in."""

import csv
import io
import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

from apps.experiments.models import Experiment

from .models import TrackedRun
from .records import WANDB_STATES, RunRecord

MAX_ERRORS = 20
# The columns of the W&B runs table export that are the run's own, not its config or summary.
CSV_RUN_COLUMNS = {"Name", "ID", "State", "Notes", "User", "Tags", "Created", "Runtime", "Sweep"}
FORMATS = ("wandb-csv", "wandb-json")


class WandbFileError(Exception):
    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("\n".join(errors))


def detect_format(name: str, head: bytes) -> str:
    if name.lower().endswith(".json") or head.lstrip()[:1] in (b"[", b"{"):
        return "wandb-json"
    return "wandb-csv"


def read_runs(*, name: str, data: bytes, file_format: str = "auto") -> list[RunRecord]:
    """The runs in the file; WandbFileError listing the faults (file, row, column) if any."""
    if file_format == "auto":
        file_format = detect_format(name, data[:64])
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise WandbFileError([f"{name}: not UTF-8 text (byte {exc.start})."]) from exc
    if file_format == "wandb-json":
        return _read_json(name, text)
    return _read_csv(name, text)


def read_path(path: str | Path, file_format: str = "auto") -> list[RunRecord]:
    path = Path(path)
    return read_runs(name=path.name, data=path.read_bytes(), file_format=file_format)


def _moment(value: str) -> datetime:
    moment = datetime.fromisoformat(value.strip())
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _state(value: str) -> str:
    state = value.strip().lower()
    if state not in WANDB_STATES:
        raise ValueError(
            f"unknown state “{value}”; W&B's states are {', '.join(sorted(WANDB_STATES))}"
        )
    return state


def _text(value) -> str:
    if isinstance(value, dict) and "value" in value:  # the API's raw config: {"value": ..., "desc"}
        value = value["value"]
    if value is None or isinstance(value, (dict, list)):
        return ""
    return str(value)


def _record(
    *,
    run_id: str,
    name: str,
    state: str,
    created: datetime,
    ended: datetime | None,
    tags: list[str],
    project: str,
    values: dict[str, str],
    history: dict | None = None,
) -> RunRecord:
    status = WANDB_STATES[state]
    return RunRecord(
        tracker=TrackedRun.Tracker.WANDB,
        run_id=run_id,
        name=name or run_id,
        tracker_status=state,
        status=status,
        tracker_experiment=project,
        started_at=created,
        ended_at=ended if status != Experiment.Status.RUNNING else None,
        tags={f"wandb.tag.{tag}": "" for tag in tags if tag} | {"wandb.run": run_id},
        params={key: value for key, value in values.items() if value},
        lookup=values,
        history=history,
    )


def _read_csv(name: str, text: str) -> list[RunRecord]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = reader.fieldnames or []
    missing = [column for column in ("State", "Created") if column not in header]
    if "ID" not in header and "Name" not in header:
        missing.insert(0, "ID or Name")
    if missing:
        raise WandbFileError(
            [
                f"{name}, row 1: no {' and no '.join(missing)} column; export the runs table "
                "from W&B with the Name, State and Created columns shown."
            ]
        )
    errors: list[str] = []
    records: list[RunRecord] = []
    seen: dict[str, int] = {}
    for row in reader:
        line = reader.line_num
        run_id = (row.get("ID") or row.get("Name") or "").strip()
        key_column = "ID" if "ID" in header else "Name"

        def fault(column: str, message: str, line=line) -> None:
            errors.append(f"{name}, row {line}, column {column}: {message}")

        if not run_id:
            fault(key_column, "empty; every run needs its id.")
        elif run_id in seen:
            fault(key_column, f"run “{run_id}” is also in row {seen[run_id]}.")
        else:
            seen[run_id] = line
        try:
            state = _state(row.get("State") or "")
        except ValueError as exc:
            fault("State", f"{exc}.")
            state = ""
        try:
            created = _moment(row.get("Created") or "")
        except ValueError:
            fault("Created", f"“{row.get('Created')}” is not a date and time (ISO 8601).")
            created = None
        ended = None
        runtime = (row.get("Runtime") or "").strip()
        if runtime:
            try:
                seconds = float(runtime)
                if not math.isfinite(seconds) or seconds < 0:
                    raise ValueError
                if created:
                    ended = created + timedelta(seconds=seconds)
            except ValueError:
                fault("Runtime", f"“{runtime}” is not a number of seconds.")
        if len(errors) >= MAX_ERRORS:
            break
        if errors:
            continue
        values = {key: (value or "") for key, value in row.items() if key not in CSV_RUN_COLUMNS}
        records.append(
            _record(
                run_id=run_id,
                name=(row.get("Name") or "").strip(),
                state=state,
                created=created,
                ended=ended,
                tags=[tag.strip() for tag in (row.get("Tags") or "").split(",")],
                project="",
                values={key: value for key, value in values.items() if key},
            )
        )
    if errors:
        raise WandbFileError(errors)
    if not records:
        raise WandbFileError([f"{name}: no runs in the file."])
    return records


def _read_json(name: str, text: str) -> list[RunRecord]:
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise WandbFileError([f"{name}: not JSON ({exc})."]) from exc
    runs = document.get("runs") if isinstance(document, dict) else document
    if not isinstance(runs, list):
        raise WandbFileError([f'{name}: expected a list of runs (or {{"runs": [...]}}).'])
    errors: list[str] = []
    records: list[RunRecord] = []
    seen: dict[str, int] = {}
    for number, run in enumerate(runs, start=1):

        def fault(field: str, message: str, number=number) -> None:
            errors.append(f"{name}, run {number}, field {field}: {message}")

        if not isinstance(run, dict):
            fault("(run)", "not an object.")
            continue
        run_id = str(run.get("id") or "").strip()
        if not run_id:
            fault("id", "missing; every run needs its id.")
        elif run_id in seen:
            fault("id", f"run “{run_id}” is also run {seen[run_id]}.")
        else:
            seen[run_id] = number
        try:
            state = _state(str(run.get("state") or ""))
        except ValueError as exc:
            fault("state", f"{exc}.")
            state = ""
        created = ended = None
        for field in ("created_at", "heartbeat_at"):
            value = run.get(field)
            if value in (None, "") and field == "heartbeat_at":
                continue
            try:
                moment = _moment(str(value or ""))
            except ValueError:
                fault(field, f"“{value}” is not a date and time (ISO 8601).")
                continue
            if field == "created_at":
                created = moment
            else:
                ended = moment
        config = run.get("config") or {}
        summary = run.get("summary") or {}
        metadata = run.get("metadata") or {}
        for field, value in (("config", config), ("summary", summary), ("metadata", metadata)):
            if not isinstance(value, dict):
                fault(field, "not an object.")
        if ended is None and created and isinstance(summary, dict):
            runtime = summary.get("_runtime")
            if isinstance(runtime, (int, float)) and math.isfinite(runtime) and runtime >= 0:
                ended = created + timedelta(seconds=runtime)
        history = _history(run.get("history"), fault)
        if len(errors) >= MAX_ERRORS:
            break
        if errors:
            continue
        values = {str(key): _text(value) for key, value in config.items()}
        if metadata.get("host"):
            values.setdefault("host", str(metadata["host"]))
        tags = run.get("tags") or []
        records.append(
            _record(
                run_id=run_id,
                name=str(run.get("name") or ""),
                state=state,
                created=created,
                ended=ended,
                tags=[str(tag) for tag in tags] if isinstance(tags, list) else [],
                project=str(run.get("project") or ""),
                values={key: value for key, value in values.items() if not key.startswith("_")},
                history=history,
            )
        )
    if errors:
        raise WandbFileError(errors)
    if not records:
        raise WandbFileError([f"{name}: no runs in the file."])
    return records


def _history(history, fault) -> dict | None:
    """The history rows as {metric: [(step, value, time)]}; every numeric metric is kept, the
    import picks the loss metric."""
    if history in (None, []):
        return None
    if not isinstance(history, list):
        fault("history", "not a list of rows.")
        return None
    series: dict[str, list] = {}
    for position, row in enumerate(history, start=1):
        if not isinstance(row, dict):
            fault(f"history[{position}]", "not an object.")
            return None
        step = row.get("_step", position - 1)
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            fault(f"history[{position}]._step", f"“{step}” is not a step (a whole number ≥ 0).")
            return None
        at = row.get("_timestamp")
        moment = (
            datetime.fromtimestamp(at, tz=UTC)
            if isinstance(at, (int, float)) and math.isfinite(at)
            else None
        )
        for key, value in row.items():
            if key.startswith("_") or value is None:
                continue
            numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
            if numeric and math.isfinite(value):
                series.setdefault(key, []).append((step, float(value), moment))
    return series
