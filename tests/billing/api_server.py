"""A hosted-API provider on loopback for the polled sources' tests: it serves the documented
pages (shared/reference/api-spend-formats.md) from what a test puts in it, pages them, and can
be taken down, made to fail one page, or made to answer something else entirely (`raw`; the
loopback server under it can also be slow or cut its answers short)."""

import json
from datetime import UTC, date, datetime, time, timedelta

from tests.gpu.servers import LoopbackServer

BUCKETS_PER_PAGE = 2  # small pages, so that every poll follows several
RECORDS_PER_PAGE = 2


def _unix(day: date) -> int:
    return int(datetime.combine(day, time(), UTC).timestamp())


def _iso(day: date) -> str:
    return f"{day.isoformat()}T00:00:00Z"


class FakeProvider(LoopbackServer):
    """`days[day]` holds the results (buckets) or records of a day as the provider knows them
    now; a test changes them to play late figures. `calls` records each request's path, query
    pairs and headers."""

    def __init__(self, kind: str):
        super().__init__(self._route)
        self.kind = kind
        self.days: dict[date, list[dict]] = {}
        self.down = False
        self.fail_page: int | None = None  # answer 500 on this page number (1-based)
        # (status, content type, body) answered to every request instead of the pages.
        self.raw: tuple[int, str, str] | None = None
        # A function of a page's JSON body returning what to answer instead (a wrong shape).
        self.mangle = None

    def __enter__(self) -> "FakeProvider":
        super().__enter__()
        return self

    def _route(self, path: str, query: dict) -> tuple[int, str, str]:
        if self.raw is not None:
            return self.raw
        status, body = self.answer(path, query)
        if self.mangle is not None and status == 200:
            body = self.mangle(body)
        return status, "application/json", json.dumps(body)

    # -- answers ---------------------------------------------------------------------------

    def answer(self, path: str, params: dict) -> tuple[int, dict]:
        if self.down:
            return 503, {"error": {"type": "overloaded_error", "message": "Overloaded"}}
        if self.kind in ("openai", "anthropic"):
            return self._buckets(params)
        if self.kind == "openrouter":
            return self._activity()
        return self._spend_logs(params)

    def _buckets(self, params: dict) -> tuple[int, dict]:
        if self.kind == "openai":
            first = datetime.fromtimestamp(int(params["start_time"]), UTC).date()
            end = datetime.fromtimestamp(int(params["end_time"]), UTC).date()
        else:
            first = date.fromisoformat(params["starting_at"][:10])
            end = date.fromisoformat(params["ending_at"][:10])
        days = [first + timedelta(days=n) for n in range((end - first).days)]
        page = int(params.get("page", "page-1").split("-")[1])
        if page == self.fail_page:
            return 500, {"error": {"message": "internal error"}}
        size = min(int(params.get("limit", 7)), BUCKETS_PER_PAGE)
        chunk = days[(page - 1) * size : page * size]
        more = page * size < len(days)
        buckets = []
        for day in chunk:
            if self.kind == "openai":
                bucket = {
                    "object": "bucket",
                    "start_time": _unix(day),
                    "end_time": _unix(day) + 86_400,
                }
            else:
                bucket = {"starting_at": _iso(day), "ending_at": _iso(day + timedelta(days=1))}
            buckets.append({**bucket, "results": self.days.get(day, [])})
        body = {
            "data": buckets,
            "has_more": more,
            "next_page": f"page-{page + 1}" if more else None,
        }
        if self.kind == "openai":
            body["object"] = "page"
        return 200, body

    def _activity(self) -> tuple[int, dict]:
        return 200, {"data": [item for day in sorted(self.days) for item in self.days[day]]}

    def _spend_logs(self, params: dict) -> tuple[int, dict]:
        first = date.fromisoformat(params["start_date"][:10])
        last = date.fromisoformat(params["end_date"][:10])
        rows = [row for day in sorted(self.days) if first <= day <= last for row in self.days[day]]
        page, size = int(params["page"]), min(int(params["page_size"]), RECORDS_PER_PAGE)
        if page == self.fail_page:
            return 500, {"detail": "internal error"}
        total_pages = max(-(-len(rows) // size), 1)
        return 200, {
            "data": rows[(page - 1) * size : page * size],
            "total": len(rows),
            "page": page,
            "page_size": size,
            "total_pages": total_pages,
        }
