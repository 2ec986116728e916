"""The storage and egress page: what is stored and moved, how fast it grows, where it will be in
90 days, and which buckets and region pairs drive it (apps/spend/storage.py reads the rollup)."""

from datetime import date, timedelta
from decimal import Decimal

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from apps.projects.selectors import project_for_user, projects_visible_to

from . import storage
from .charts_storage import (
    egress_weekly_chart,
    forecast_chart,
    storage_bytes_chart,
    storage_spend_chart,
)
from .figures import cached
from .sections import request_organization, today

PERIODS = {"30": 30, "90": 90, "180": 180, "365": 365}
DEFAULT_DAYS = 90


def growth_section(*, scope: storage.StorageScope, start: date, end: date, currency: str) -> dict:
    """The growth figures, their 90-day forecasts and the three charts drawn from them: one cache
    entry per data version, holding the charts as written text (a year of daily bars per data
    class is thousands of decimals, slower to unpickle and encode again than to keep written)."""
    rows = storage.growth_rows(scope=scope, start=start, end=end)

    def build() -> dict:
        growth = storage.growth_from_rows(rows, start=start, end=end)
        bytes_forecast = storage.forecast(growth.days, growth.total_bytes)
        spend_forecast = storage.forecast(growth.days, growth.total_spend)
        totals = growth.total_bytes
        week_ago = totals[-8] if len(totals) >= 8 else Decimal(0)
        return {
            "bytes_now": totals[-1] if totals else Decimal(0),
            "growth_week": (totals[-1] - week_ago) if totals else Decimal(0),
            "storage_30": sum(growth.total_spend[-30:], Decimal(0)),
            "bytes_in_90": _decimal(bytes_forecast.mean[-1]) if bytes_forecast else None,
            "bytes_in_90_low": _decimal(bytes_forecast.lower[-1]) if bytes_forecast else None,
            "bytes_in_90_high": _decimal(bytes_forecast.upper[-1]) if bytes_forecast else None,
            "monthly_in_90": Decimal(str(round(sum(spend_forecast.mean[-30:]), 2)))
            if spend_forecast
            else None,
            "spend_forecast": spend_forecast,
            "bytes_chart": storage_bytes_chart(growth).drawn(),
            "spend_chart": storage_spend_chart(growth, currency).drawn(),
            "forecast_chart": forecast_chart(growth, bytes_forecast).drawn(),
        }

    return cached(f"storage-growth-section:{currency}", rows, build)


def _decimal(value: float) -> Decimal:
    return Decimal(str(value))


@login_required
def storage_page(request: HttpRequest) -> HttpResponse:
    currency = request_organization(request).currency
    slug = request.GET.get("project", "")
    project = project_for_user(user=request.user, slug=slug) if slug else None
    days = PERIODS.get(request.GET.get("days", ""), DEFAULT_DAYS)
    end = storage.period_end(today())
    start = end - timedelta(days=days)
    projects = list(projects_visible_to(user=request.user).order_by("name"))
    scope = storage.storage_scope(
        user=request.user, currency=currency, project=project, visible=projects
    )
    growth = growth_section(scope=scope, start=start, end=end, currency=currency)
    spend_forecast = growth["spend_forecast"]
    matrix = storage.egress_matrix(scope=scope, start=start, end=end)
    weekly = storage.egress_by_project_weekly(scope=scope, start=start, end=end)
    context = {
        **growth,
        "currency": currency,
        "project": project,
        "projects": projects,
        "days": days,
        "periods": list(PERIODS.values()),
        "start": start,
        "end": end,
        "bill_lags": end < today(),
        "crossing": storage.budget_crossing(
            project=project,
            spend_forecast=spend_forecast,
            recent_storage=growth["storage_30"],
            end=end,
        )
        if project is not None
        else None,
        "egress_chart": egress_weekly_chart(weekly, currency),
        "buckets": storage.fastest_buckets(scope=scope, end=end),
        "matrix": matrix,
        "per_project": storage.per_project(scope=scope, start=start, end=end, known=projects)
        if project is None
        else [],
    }
    return render(request, "spend/storage.html", context)
