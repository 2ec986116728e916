"""Polled hosted-API sources: a provider's admin API pulled into the same JSON pages a user saves.

A source of kind `openai_api`, `anthropic_api`, `openrouter_api` or `litellm_api` has no files of
its own: each poll asks the provider's API for a window of days, writes what it answered as the
saved pages the importers already read (`json_pages.py`), and hands those files to the poll like
a folder's (`services_sources.billing_source_poll`):

- the window starts `restate_days` before the last good poll (before today on a first poll), so
  the days the provider still corrects are pulled again on every poll and a source that was down
  catches up on every day it missed; a month never pulled from its first day is pulled whole
  (its file replaces the month's delivery, so it must hold all of it). It ends with today
  (OpenRouter: yesterday, its last completed day, and at most 30 days back);
- every page is followed (`has_more`/`next_page`, LiteLLM's `total_pages`) and the answer is split
  by day (UTC): one file per day under COSTSITE_DATA_DIR/sources/<source>/api/days/. A day in the
  window is replaced whole by what the provider answers now; a day it no longer lists is removed;
- a delivery is one provider account and calendar month (api_common), so the files handed to the
  importer are one per month, the month's day files appended page after page
  (api/<report>-<YYYY-MM>.json). A month whose content did not change keeps its signature (its
  SHA-256) and starts no run; a restated month replaces its delivery exactly;
- nothing is written until every page of the window has been read: a provider that is down, slow
  or refuses the key raises SourceUnavailable (the poll turns the source unhealthy and backs off),
  and the days already pulled stay as they were.

Keys come from the environment of the web and worker processes (OPENAI_ADMIN_KEY,
ANTHROPIC_ADMIN_KEY, OPENROUTER_MANAGEMENT_KEY, LITELLM_MASTER_KEY by default; a source can name
another variable), never from the database.
"""

import contextlib
import hashlib
import html
import http.client
import json
import os
import re
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from urllib.parse import urlencode

from django.conf import settings

from .models import BillingSource
from .sources import ListedFile, Listing, SourceUnavailable

HTTP_TIMEOUT_SECONDS = 60
MAX_PAGES = 10_000  # a provider that keeps answering "more" past this is not paging
ERROR_BODY_BYTES = 2048
ANTHROPIC_VERSION = "2023-06-01"
LITELLM_PAGE_SIZE = 100  # /spend/logs/ui's largest page in the version read
OPENROUTER_DAYS = 30  # activity covers the last 30 completed UTC days
TAG = re.compile(r"<[^>]*>")
TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
SCRIPT = re.compile(r"<(script|style)[^>]*>.*?</\1>", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Report:
    """One report a provider's API pulls: its endpoint and how its answer is paged and dated."""

    format: str  # the billing format that reads the saved pages
    path: str
    shape: str  # "buckets" (data[] of day buckets) or "records" (data[] of rows)
    paging: str  # "next_page" (OpenAI, Anthropic), "total_pages" (LiteLLM) or "none"
    params: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Provider:
    kind: str
    label: str
    base_url: str
    key_env: str
    reports: tuple[Report, ...]

    def report(self, format_name: str) -> Report:
        for report in self.reports:
            if report.format == format_name:
                return report
        return self.reports[0]  # "auto": the provider's cost report


PROVIDERS = {
    BillingSource.Kind.OPENAI_API: Provider(
        kind=BillingSource.Kind.OPENAI_API,
        label="OpenAI",
        base_url="https://api.openai.com",
        key_env="OPENAI_ADMIN_KEY",
        reports=(
            Report(
                "openai_costs",
                "/v1/organization/costs",
                "buckets",
                "next_page",
                (("bucket_width", "1d"), ("group_by", "project_id"), ("group_by", "line_item")),
            ),
            Report(
                "openai_usage",
                "/v1/organization/usage/completions",
                "buckets",
                "next_page",
                (
                    ("bucket_width", "1d"),
                    ("group_by", "project_id"),
                    ("group_by", "api_key_id"),
                    ("group_by", "model"),
                ),
            ),
        ),
    ),
    BillingSource.Kind.ANTHROPIC_API: Provider(
        kind=BillingSource.Kind.ANTHROPIC_API,
        label="Anthropic",
        base_url="https://api.anthropic.com",
        key_env="ANTHROPIC_ADMIN_KEY",
        reports=(
            Report(
                "anthropic_cost",
                "/v1/organizations/cost_report",
                "buckets",
                "next_page",
                (
                    ("bucket_width", "1d"),
                    ("group_by[]", "workspace_id"),
                    ("group_by[]", "description"),
                ),
            ),
            Report(
                "anthropic_usage",
                "/v1/organizations/usage_report/messages",
                "buckets",
                "next_page",
                (
                    ("bucket_width", "1d"),
                    ("group_by[]", "model"),
                    ("group_by[]", "workspace_id"),
                    ("group_by[]", "api_key_id"),
                ),
            ),
        ),
    ),
    BillingSource.Kind.OPENROUTER_API: Provider(
        kind=BillingSource.Kind.OPENROUTER_API,
        label="OpenRouter",
        base_url="https://openrouter.ai",
        key_env="OPENROUTER_MANAGEMENT_KEY",
        reports=(Report("openrouter_activity", "/api/v1/activity", "records", "none"),),
    ),
    BillingSource.Kind.LITELLM_API: Provider(
        kind=BillingSource.Kind.LITELLM_API,
        label="LiteLLM",
        base_url="",  # the team's own proxy: the source gives its URL
        key_env="LITELLM_MASTER_KEY",
        reports=(Report("litellm_spend_logs", "/spend/logs/ui", "records", "total_pages"),),
    ),
}
API_KINDS = frozenset(PROVIDERS)


def is_api(source: BillingSource) -> bool:
    return source.kind in API_KINDS


def report_formats(kind: str) -> list[str]:
    provider = PROVIDERS.get(kind)
    return [report.format for report in provider.reports] if provider else []


def state_dir(source: BillingSource) -> Path:
    """Where the source's pulled days and month files live (beside, never inside, the spool
    folders of bucket polls, which are numbered)."""
    return Path(settings.COSTSITE_DATA_DIR) / "sources" / str(source.pk) / "api"


def window(source: BillingSource, *, now: datetime) -> tuple[date, date]:
    """[first day, day after the last) to pull: `restate_days` before the last good poll, to
    today included (OpenRouter: to yesterday, its last completed day). A month the source never
    pulled from its first day is pulled whole (a month file replaces the month's delivery, so it
    must hold all of it), within what the provider keeps (OpenRouter: 30 days)."""
    today = now.astimezone(UTC).date()
    last = source.last_success_at.astimezone(UTC).date() if source.last_success_at else today
    first = min(last, today) - timedelta(days=source.restate_days)
    if not _covered(source, first.replace(day=1)):
        first = first.replace(day=1)
    end = today + timedelta(days=1)
    if source.kind == BillingSource.Kind.OPENROUTER_API:
        end = today
        first = max(first, today - timedelta(days=OPENROUTER_DAYS))
    return first, max(first, end)


def _covered_marker(source: BillingSource, month: date) -> Path:
    report = PROVIDERS[source.kind].report(source.format)
    return state_dir(source) / "days" / report.format / f"{month:%Y-%m}.covered"


def _covered(source: BillingSource, month: date) -> bool:
    """Whether a pull has reached back to the month's first day (its day files are complete)."""
    return _covered_marker(source, month).exists()


# -- HTTP ------------------------------------------------------------------------------------


class ApiClient:
    def __init__(self, source: BillingSource, provider: Provider):
        self.base = (source.endpoint_url or provider.base_url).rstrip("/")
        if not self.base:
            raise SourceUnavailable(f"{provider.label}: give the API's URL (the source has none).")
        variable = source.api_key_env or provider.key_env
        key = os.environ.get(variable, "")
        if not key:
            raise SourceUnavailable(
                f"{provider.label}: no API key; set {variable} in the environment of the web and "
                "worker processes."
            )
        self.headers = {"Accept": "application/json"}
        if provider.kind == BillingSource.Kind.ANTHROPIC_API:
            self.headers |= {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION}
        else:
            self.headers["Authorization"] = f"Bearer {key}"

    def get(self, path: str, params: list[tuple[str, str]]) -> dict:
        url = f"{self.base}{path}?{urlencode(params)}"
        shown = f"{self.base}{path}"
        # Only http(s) reaches here: the source form refuses any other URL.
        request = urllib.request.Request(url, headers=self.headers)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_SECONDS) as response:  # noqa: S310
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = ""
            with contextlib.suppress(
                OSError, ValueError, AttributeError, http.client.HTTPException
            ):
                detail = _error_text(exc.read(ERROR_BODY_BYTES).decode("utf-8", "replace"))
            detail = f": {detail[:300]}" if detail else ""
            raise SourceUnavailable(
                f"{shown} answered HTTP {exc.code} {exc.reason}{detail}"
            ) from exc
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            raise SourceUnavailable(f"{shown} cannot be reached: {reason}") from exc
        except http.client.HTTPException as exc:
            # A connection that answers no valid HTTP, or closes in the middle of the body.
            name = exc.__class__.__name__
            raise SourceUnavailable(f"{shown} answered a broken HTTP response ({name}).") from exc
        except ValueError as exc:  # a URL urllib cannot parse (an IPv6 host without its ])
            raise SourceUnavailable(f"{shown} is not a URL that can be reached: {exc}") from exc
        try:
            answer = json.loads(raw, parse_constant=_no_constant)
        except (ValueError, RecursionError) as exc:
            raise SourceUnavailable(f"{shown} answered something that is not JSON.") from exc
        if not isinstance(answer, dict) or not isinstance(answer.get("data"), list):
            raise SourceUnavailable(f"{shown} answered JSON without a data list.")
        return answer


def _no_constant(name: str):
    """NaN and Infinity are not JSON (Python's reader takes them): no amount is one."""
    raise ValueError(f"{name} is not a JSON number")


def _error_text(body: str) -> str:
    """An error page's text for the message: an HTML page (a proxy's 502) by its title, else
    its text without tags; JSON and plain text as they are."""
    text = body.strip()
    if not text.startswith("<"):
        return " ".join(text.split())
    title = TITLE.search(text)
    text = title.group(1) if title else TAG.sub(" ", SCRIPT.sub(" ", text))
    text = " ".join(html.unescape(text).split())
    return f"an HTML page: {text}" if text else "an HTML page"


def _pages(client: ApiClient, report: Report, params: list[tuple[str, str]]) -> Iterator[dict]:
    """Every page of the report for the window, following its paging."""
    if report.paging == "none":
        yield client.get(report.path, params)
        return
    if report.paging == "total_pages":
        # Pages up to the count the proxy gives (each answer's own: requests logged while we
        # page add to it). A request that moves across a page boundary meanwhile is listed
        # twice (counted once: request ids are the key) or missed until the next poll, which
        # pulls its day again.
        page = 1
        while True:
            answer = client.get(
                report.path, [*params, ("page", str(page)), ("page_size", str(LITELLM_PAGE_SIZE))]
            )
            yield answer
            try:
                total = int(answer.get("total_pages") or 1)
            except (TypeError, ValueError, OverflowError):
                raise SourceUnavailable(f"{report.path}: total_pages is not a number.") from None
            if page >= total or not answer["data"]:
                return
            if page >= MAX_PAGES:
                raise SourceUnavailable(f"{report.path}: more than {MAX_PAGES} pages.")
            page += 1
    cursor, seen = None, set()
    for _ in range(MAX_PAGES):
        answer = client.get(report.path, [*params, *([("page", cursor)] if cursor else [])])
        yield answer
        cursor = answer.get("next_page")
        if not answer.get("has_more") or not cursor:
            return
        if not isinstance(cursor, str):
            raise SourceUnavailable(
                f"{report.path}: next_page is not a page cursor: {json.dumps(cursor)[:100]}"
            )
        if cursor in seen:
            raise SourceUnavailable(f"{report.path}: the page {cursor!r} was answered twice.")
        seen.add(cursor)
    raise SourceUnavailable(f"{report.path}: more than {MAX_PAGES} pages.")


def _window_params(kind: str, first: date, end: date) -> list[tuple[str, str]]:
    start = datetime.combine(first, time(), UTC)
    stop = datetime.combine(end, time(), UTC)
    days = (end - first).days
    if kind == BillingSource.Kind.OPENAI_API:
        return [
            ("start_time", str(int(start.timestamp()))),
            ("end_time", str(int(stop.timestamp()))),
            ("limit", str(min(max(days, 1), 31))),
        ]
    if kind == BillingSource.Kind.ANTHROPIC_API:
        return [
            ("starting_at", start.strftime("%Y-%m-%dT%H:%M:%SZ")),
            ("ending_at", stop.strftime("%Y-%m-%dT%H:%M:%SZ")),
            ("limit", str(min(max(days, 1), 31))),
        ]
    if kind == BillingSource.Kind.LITELLM_API:
        last = stop - timedelta(seconds=1)
        return [
            ("start_date", start.strftime("%Y-%m-%d %H:%M:%S")),
            ("end_date", last.strftime("%Y-%m-%d %H:%M:%S")),
        ]
    return []  # OpenRouter: the last 30 completed days, filtered here


def _day_of(kind: str, report: Report, item: dict) -> date | None:
    """The UTC day a bucket (OpenAI, Anthropic) or a record (OpenRouter, LiteLLM) belongs to."""
    try:
        if report.shape == "buckets":
            if kind == BillingSource.Kind.OPENAI_API:
                return datetime.fromtimestamp(int(item["start_time"]), UTC).date()
            return _iso_day(item["starting_at"])
        if kind == BillingSource.Kind.OPENROUTER_API:
            return date.fromisoformat(str(item["date"])[:10])
        return _iso_day(item["startTime"])
    except (KeyError, TypeError, ValueError, OverflowError, OSError):
        return None  # OverflowError, OSError: a timestamp beyond what a date holds


def _iso_day(value) -> date:
    """The UTC day of an ISO time; one without a zone is UTC (LiteLLM's database keeps UTC)."""
    moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if moment.tzinfo is None:
        return moment.date()
    return moment.astimezone(UTC).date()


# -- the pull --------------------------------------------------------------------------------


def pull(source: BillingSource, *, now: datetime) -> Listing:
    """Pull the source's window, restate its days, and list its month files (as a folder's)."""
    provider = PROVIDERS[source.kind]
    report = provider.report(source.format)
    client = ApiClient(source, provider)
    first, end = window(source, now=now)
    root = state_dir(source)
    days_dir = root / "days" / report.format
    # A folder of this pull's own: another poll of the source (a worker's and a "Poll now" at
    # once, in one process or two) has its own, and neither empties the other's.
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
    writers: dict[date, _DayWriter] = {}
    try:
        params = [*report.params, *_window_params(source.kind, first, end)]
        for page in _pages(client, report, params):
            for item in page["data"]:
                if not isinstance(item, dict):
                    raise SourceUnavailable(f"{report.path}: a data element is not an object.")
                day = _day_of(source.kind, report, item)
                if day is None:
                    raise SourceUnavailable(
                        f"{report.path}: a data element has no readable day: "
                        f"{json.dumps(item, default=str)[:200]}"
                    )
                if not first <= day < end:
                    continue
                if report.shape == "buckets":
                    results = item.get("results")
                    if not results:
                        continue  # a day without spend: no lines
                    if not isinstance(results, list) or not all(
                        isinstance(result, dict) for result in results
                    ):
                        raise SourceUnavailable(
                            f"{report.path}: the results of the bucket of {day} are not a list "
                            "of objects."
                        )
                if day not in writers:
                    writers[day] = _DayWriter(staging / f"{day.isoformat()}.json", report)
                writers[day].add(item)
        for writer in writers.values():
            writer.close()
        # Every page read: the window's days are replaced, the others kept.
        days_dir.mkdir(parents=True, exist_ok=True)
        day = first
        while day < end:
            target = days_dir / f"{day.isoformat()}.json"
            if day in writers:
                os.replace(writers[day].path, target)
            else:
                target.unlink(missing_ok=True)
            day += timedelta(days=1)
    finally:
        for writer in writers.values():
            writer.handle.close()  # a page that failed leaves its days open
        shutil.rmtree(staging, ignore_errors=True)
    for month in _months(first, end):
        if first <= month:
            _covered_marker(source, month).touch()
        _month_write(root, days_dir, report, month)
    return _listing(root, report)


class _DayWriter:
    """One day's page, written as the provider's page shape, element by element."""

    def __init__(self, path: Path, report: Report):
        self.path = path
        self.handle = path.open("w", encoding="utf-8")
        self.count = 0
        if report.shape == "buckets":
            self.handle.write('{"object": "page", "has_more": false, "next_page": null, "data": [')
        else:
            self.handle.write('{"data": [')

    def add(self, item: dict) -> None:
        if self.count:
            self.handle.write(", ")
        self.handle.write(json.dumps(item, separators=(",", ":"), sort_keys=True))
        self.count += 1

    def close(self) -> None:
        self.handle.write("]}\n")
        self.handle.close()


def _months(first: date, end: date) -> list[date]:
    months, month = [], first.replace(day=1)
    while month < end:
        months.append(month)
        month = (month + timedelta(days=32)).replace(day=1)
    return months


def _month_name(report: Report, month: date) -> str:
    return f"{report.format}-{month:%Y-%m}.json"


def _month_write(root: Path, days_dir: Path, report: Report, month: date) -> None:
    """The month's day pages appended into its delivery file; untouched when the same."""
    target = root / _month_name(report, month)
    days = sorted(days_dir.glob(f"{month:%Y-%m}-??.json"))
    if not days:
        target.unlink(missing_ok=True)
        return
    handle_number, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=root)
    temporary = Path(name)
    digest = hashlib.sha256()
    with os.fdopen(handle_number, "wb") as out:
        for path in days:
            with path.open("rb") as handle:
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
    if target.exists() and _sha256(target) == digest.hexdigest():
        temporary.unlink()
        return
    os.replace(temporary, target)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _listing(root: Path, report: Report) -> Listing:
    listing = Listing()
    for path in sorted(root.glob(f"{report.format}-????-??.json")):
        info = path.stat()
        listing.files.append(
            ListedFile(
                key=path.name,
                size=info.st_size,
                signature=_sha256(path),
                last_modified=datetime.fromtimestamp(info.st_mtime, tz=UTC),
            )
        )
    return listing
