"""costsite's client: a training script registers its run, its resources and its loss; a serving
stack reports its hourly traffic.

One file, Python 3.9+ standard library only: copy it next to your script.

    import os
    from costsite_client import Costsite

    costsite = Costsite("https://costsite.example.com", token=os.environ["COSTSITE_TOKEN"])
    with costsite.run(
        "image-ranking",              # the project's slug
        "ranker-v3-2025-03-01",       # your id for this run: a retry with it updates the same run
        name="ranker v3",
        gpu_type="H100",
        gpu_count=8,
        resources=["i-0a1b2c3d4e5f67890"],
        flush_every=50,
    ) as run:
        for step in range(10_000):
            loss = train_step()
            run.log_metrics(step, loss=loss)
    # Leaving the block marks the run succeeded; an exception marks it failed (and goes on up);
    # Ctrl-C marks it stopped.

Calls that fail on a connection error or a 5xx answer are retried with a growing pause; a 4xx
answer raises CostsiteError with the server's messages by field. Metric points are sent in
batches; a batch that cannot be sent stays buffered and goes with the next one, so a dashboard
outage never stops the training (finish() and fail() still raise if they cannot reach it).
"""

# A script may run on Python 3.9, which has no datetime.UTC.
# ruff: noqa: UP017
from __future__ import annotations

import json
import logging
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from typing import Any

__all__ = ["Costsite", "CostsiteError", "Run"]
__version__ = "1.0"

log = logging.getLogger("costsite_client")


class CostsiteError(Exception):
    """The server refused a call (status 4xx), or it could not be reached after all retries
    (status None). `errors` holds the messages by field of a 400."""

    def __init__(self, message: str, *, status: int | None = None, errors: dict | None = None):
        super().__init__(message)
        self.status = status
        self.errors = errors or {}


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        if value.tzinfo is None:  # a naive time is taken as UTC, as the server stores times
            value = value.replace(tzinfo=timezone.utc)
        return value.isoformat()
    raise TypeError(f"cannot send {type(value).__name__} as JSON")


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _resources(resources: list | None) -> list[dict] | None:
    """Resource ids as plain strings or as {"resource_id", "started_at", "ended_at"} dicts."""
    if resources is None:
        return None
    return [{"resource_id": r} if isinstance(r, str) else dict(r) for r in resources]


class Costsite:
    """A connection to costsite's API (`url`: the site's address; `token`: from the API tokens
    page)."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 10.0,
        retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
    ):
        if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise ValueError(f"costsite's address must start with http:// or https://: {url!r}")
        self.base = url.rstrip("/") + "/api/v1"
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff

    # ---- HTTP ----

    def request(self, method: str, path: str, body: Any = None, query: dict | None = None) -> Any:
        """Send one call and return its JSON answer, retrying connection errors and 5xx."""
        url = self.base + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body, default=_json_default).encode()
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/json",
            "User-Agent": f"costsite-client/{__version__}",
        }
        if data is not None:
            headers["Content-Type"] = "application/json"
        last_problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(self.backoff * 2 ** (attempt - 1), self.max_backoff))
            # The scheme was checked in __init__: http or https only.
            request = urllib.request.Request(url, data=data, headers=headers, method=method)  # noqa: S310
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                    payload = response.read()
                    return json.loads(payload) if payload else None
            except urllib.error.HTTPError as error:
                payload = error.read()
                if error.code >= 500 or error.code == 429:
                    last_problem = f"{method} {path} answered {error.code}"
                    log.warning("costsite: %s; retrying", last_problem)
                    continue
                raise self._refusal(method, path, error.code, payload) from None
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as error:
                last_problem = f"{method} {path} failed: {getattr(error, 'reason', error)}"
                log.warning("costsite: %s; retrying", last_problem)
        raise CostsiteError(f"{last_problem} (gave up after {self.retries + 1} tries)")

    @staticmethod
    def _refusal(method: str, path: str, status: int, payload: bytes) -> CostsiteError:
        try:
            answer = json.loads(payload)
        except ValueError:
            answer = {"detail": payload.decode(errors="replace")}
        errors = answer.get("errors") or {}
        lines = [f"{method} {path} answered {status}: {answer.get('detail', '')}"]
        lines += [f"  {field}: {'; '.join(messages)}" for field, messages in errors.items()]
        return CostsiteError("\n".join(lines), status=status, errors=errors)

    @staticmethod
    def _path(*parts: str) -> str:
        return "/" + "/".join(urllib.parse.quote(part, safe="") for part in parts)

    # ---- registrations ----

    def projects(self) -> list[dict]:
        """The projects this token may register in."""
        return self.request("GET", "/projects")

    def register_experiment(self, project: str, external_id: str, **fields: Any) -> dict:
        """Create or update the experiment `external_id` in `project` with the given fields
        (name, kind, status, started_at, ended_at, model, instance_type, gpu_type, gpu_count,
        is_spot, region, tags, resources)."""
        if "resources" in fields:
            fields["resources"] = _resources(fields["resources"])
        return self.request(
            "PUT", self._path("projects", project, "experiments", external_id), fields
        )

    def log_metrics(self, project: str, external_id: str, points: list[dict]) -> dict:
        """Send metric points: [{"step": 100, "values": {"loss": 1.9}}, ...]."""
        path = self._path("projects", project, "experiments", external_id, "metrics")
        return self.request("POST", path, {"points": points})

    def register_model(self, project: str, external_id: str, **fields: Any) -> dict:
        return self.request("PUT", self._path("projects", project, "models", external_id), fields)

    def register_deployment(self, project: str, external_id: str, **fields: Any) -> dict:
        """Create or update the deployment (a new one needs model={"external_id": ...})."""
        if "resources" in fields:
            fields["resources"] = _resources(fields["resources"])
        return self.request(
            "PUT", self._path("projects", project, "deployments", external_id), fields
        )

    def report_traffic(self, project: str, external_id: str, hours: list[dict]) -> dict:
        """Send hourly traffic: [{"hour": datetime, "requests": 1200, "duplicate_requests": 30,
        "tokens_in": ..., "tokens_out": ..., "latency_p95_ms": ...}, ...]."""
        path = self._path("projects", project, "deployments", external_id, "traffic")
        return self.request("POST", path, {"hours": hours})

    def run(self, project: str, external_id: str, *, flush_every: int = 100, **fields: Any) -> Run:
        """A training run to start, log metrics to and finish; use it as a context manager."""
        return Run(self, project, external_id, flush_every=flush_every, fields=fields)


class Run:
    """One training run. `start()` registers it as running; `log_metrics(step, **values)` buffers
    points and sends them every `flush_every` steps; `finish()`, `fail()` or `stop()` send the
    rest and the final status."""

    # Points kept while the server cannot be reached; the oldest go first past this.
    MAX_BUFFER = 100_000

    def __init__(
        self,
        costsite: Costsite,
        project: str,
        external_id: str,
        *,
        flush_every: int = 100,
        fields: dict | None = None,
    ):
        if flush_every < 1:
            raise ValueError("flush_every must be at least 1")
        self.costsite = costsite
        self.project = project
        self.external_id = external_id
        self.flush_every = flush_every
        self.fields = fields or {}
        self.buffer: list[dict] = []
        self.experiment: dict | None = None

    def start(self, **fields: Any) -> dict:
        """Register the run as running (with the fields given here and to `Costsite.run`)."""
        self.experiment = self.costsite.register_experiment(
            self.project, self.external_id, **{**self.fields, **fields, "status": "running"}
        )
        return self.experiment

    def log_metrics(self, step: int, **values: float) -> None:
        """Buffer the values of this step (loss=1.93, lr=3e-4); send when `flush_every` points
        are waiting. Values that are not finite numbers (a diverged loss) are skipped."""
        finite = {}
        for name, value in values.items():
            number = float(value)
            if math.isfinite(number):
                finite[name] = number
            else:
                log.warning(
                    "costsite: skipped %s=%s at step %s (not a finite number)", name, value, step
                )
        if not finite:
            return
        self.buffer.append({"step": int(step), "values": finite, "time": _now()})
        if len(self.buffer) > self.MAX_BUFFER:
            del self.buffer[: len(self.buffer) - self.MAX_BUFFER]
            log.warning("costsite: buffer full; dropped the oldest points")
        if len(self.buffer) >= self.flush_every:
            try:
                self.flush()
            except CostsiteError as error:
                if error.status is not None:
                    raise  # the server refused the points: retrying them will not help
                log.warning("costsite: metrics not sent yet, kept for the next try: %s", error)

    def flush(self) -> None:
        """Send the buffered points now (in batches the server accepts)."""
        while self.buffer:
            batch = self.buffer[:5000]
            self.costsite.log_metrics(self.project, self.external_id, batch)
            del self.buffer[: len(batch)]

    def _end(self, status: str, fields: dict) -> dict:
        self.flush()
        self.experiment = self.costsite.register_experiment(
            self.project, self.external_id, **{**fields, "status": status}
        )
        return self.experiment

    def finish(self, **fields: Any) -> dict:
        """Send the rest of the points and mark the run succeeded."""
        return self._end("succeeded", fields)

    def fail(self, **fields: Any) -> dict:
        """Send the rest of the points and mark the run failed (its cost counts as waste)."""
        return self._end("failed", fields)

    def stop(self, **fields: Any) -> dict:
        """Send the rest of the points and mark the run stopped (it may resume later)."""
        return self._end("stopped", fields)

    def __enter__(self) -> Run:
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self.finish()
        elif issubclass(exc_type, KeyboardInterrupt):
            self.stop()
        else:
            try:
                self.fail()
            except CostsiteError as error:
                # The training's own exception is the one to see; this one is only logged.
                log.warning("costsite: could not mark the run failed: %s", error)
        return False
