"""MLflow's tracking REST API (`/api/2.0/mlflow/...`), spoken over plain HTTP: costsite does
not depend on the mlflow package. Only what a poll needs: experiments, runs, one metric's
history, and setting a tag."""

import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

HTTP_TIMEOUT_SECONDS = 30
# runs/search accepts up to 50,000 a page; 1,000 keeps one answer small.
RUNS_PAGE = 1000
EXPERIMENTS_PAGE = 1000
HISTORY_PAGE = 25000
# run ids per `attributes.run_id IN (...)` filter
RUN_IDS_PER_FILTER = 100


class TrackerError(Exception):
    """The tracker cannot be reached, refused the request, or answered something unreadable."""


class MlflowClient:
    def __init__(self, *, url: str, token: str = "") -> None:
        self.base = url.rstrip("/") + "/api/2.0/mlflow/"
        self.token = token

    def _call(self, method: str, path: str, body: dict | None = None, query: str = "") -> dict:
        url = self.base + path + (f"?{query}" if query else "")
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = json.dumps(body).encode() if body is not None else None
        # Only http(s) reaches here: the source model's validator refuses the rest.
        request = urllib.request.Request(url, data=data, method=method, headers=headers)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_SECONDS) as response:  # noqa: S310
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = ""
            with contextlib.suppress(OSError, ValueError, AttributeError):
                answer = json.loads(exc.read(4096))
                detail = f": {answer.get('error_code', 'error')}: {answer.get('message', '')}"
            raise TrackerError(f"{url} answered HTTP {exc.code} {exc.reason}{detail}") from exc
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            raise TrackerError(f"{url} cannot be reached: {reason}") from exc
        try:
            answer = json.loads(raw or b"{}")
        except ValueError as exc:
            raise TrackerError(f"{url} answered something that is not JSON.") from exc
        if not isinstance(answer, dict):
            raise TrackerError(f"{url} answered JSON that is not an object.")
        return answer

    def experiments(self) -> list[dict]:
        """Every active experiment: {experiment_id, name, ...}."""
        found, token = [], None
        while True:
            body: dict[str, Any] = {"max_results": EXPERIMENTS_PAGE, "view_type": "ACTIVE_ONLY"}
            if token:
                body["page_token"] = token
            answer = self._call("POST", "experiments/search", body)
            found.extend(answer.get("experiments", []))
            token = answer.get("next_page_token")
            if not token:
                return found

    def runs(self, *, experiment_ids: list[str], filter_string: str = "") -> Iterator[dict]:
        """The runs of the experiments matching the filter, every page of them."""
        if not experiment_ids:
            return
        token = None
        while True:
            body: dict[str, Any] = {
                "experiment_ids": experiment_ids,
                "filter": filter_string,
                "max_results": RUNS_PAGE,
                "run_view_type": "ACTIVE_ONLY",
                "order_by": ["attributes.start_time ASC"],
            }
            if token:
                body["page_token"] = token
            answer = self._call("POST", "runs/search", body)
            yield from answer.get("runs", [])
            token = answer.get("next_page_token")
            if not token:
                return

    def metric_history(self, *, run_id: str, key: str) -> list[dict]:
        """Every value of the run's metric: {key, value, timestamp, step}."""
        points, token = [], None
        while True:
            params = {"run_id": run_id, "metric_key": key, "max_results": str(HISTORY_PAGE)}
            if token:
                params["page_token"] = token
            answer = self._call("GET", "metrics/get-history", query=urlencode(params))
            points.extend(answer.get("metrics", []))
            token = answer.get("next_page_token")
            if not token:
                return points

    def set_tag(self, *, run_id: str, key: str, value: str) -> None:
        self._call("POST", "runs/set-tag", {"run_id": run_id, "key": key, "value": value})


def run_id_filters(run_ids: list[str]) -> list[str]:
    """`attributes.run_id IN (...)` filters, a bounded number of ids each (ids are hex)."""
    ids = [run_id for run_id in run_ids if run_id.isalnum()]
    return [
        "attributes.run_id IN ({})".format(
            ", ".join(f"'{run_id}'" for run_id in ids[i : i + RUN_IDS_PER_FILTER])
        )
        for i in range(0, len(ids), RUN_IDS_PER_FILTER)
    ]
