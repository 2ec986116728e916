import copy
from datetime import UTC, datetime, timedelta
from functools import partial

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_POST

from apps.accounts.guards import staff_only, staff_or_lead_only
from apps.accounts.models import Organization, Team
from apps.insights.figures import page_fragment
from apps.insights.models import InsightsSettings
from apps.insights.selectors import findings_section, idle_gpu_dollars
from apps.projects.selectors import projects_visible_to
from apps.spend import selectors as spend_selectors
from apps.spend.figures import in_background
from apps.spend.filters import SpendFilters, spend_filters_from
from apps.spend.sections import today as spend_today
from costsite.htmx import form_page, redirect_after_save
from costsite.links import link_to
from costsite.paging import page_asked

from . import selectors, services, tasks
from .charts import fleet_charts, gpu_usage_chart
from .daily import days_ensure
from .forms import HostMappingForm, MetricSourceForm
from .models import MetricSource

# (sort key, heading, numeric)
GPU_COLUMNS = [
    ("gpu", "GPU", False),
    ("model", "Model", False),
    ("", "Resource", False),
    ("hours", "GPU-hours", True),
    ("util", "Mean utilisation", True),
    ("idle", "Idle", True),
]
DEFAULT_SORT = "-hours"
UNMAPPED_SINCE_DAYS = 30


def _gpu_columns(sort: str, filters: SpendFilters) -> list[dict]:
    return [
        {
            "label": label,
            "numeric": numeric,
            "query": filters.query(sort=f"-{key}" if sort == key else key) if key else "",
            "active": "ascending" if sort == key else "descending" if sort == f"-{key}" else "",
        }
        for key, label, numeric in GPU_COLUMNS
    ]


def _utc_midnight(day) -> datetime:
    return datetime.combine(day, datetime.min.time(), tzinfo=UTC)


def _fleet_filters(request: HttpRequest) -> SpendFilters:
    """The spend pages' range and their team and project filters (the GPU figures have no
    provider or workload)."""
    user = request.user
    teams = Team.objects.all() if user.is_staff else Team.objects.filter(memberships__user=user)
    return spend_filters_from(
        request.GET,
        today=spend_today(),
        dimensions=("team", "project"),
        teams=teams.distinct().order_by("name"),
        projects=projects_visible_to(user=user).order_by("name"),
    )


@login_required
def fleet(request: HttpRequest) -> HttpResponse:
    filters = _fleet_filters(request)
    sort = request.GET.get("sort", DEFAULT_SORT)
    if sort.removeprefix("-") not in selectors.GPU_SORTS:
        sort = DEFAULT_SORT
    # The figures, cached as HTML per data and findings version (apps/insights/figures.py) and
    # per build of the GPU rollup: a rebuild (new GPU-hours, a change of who used what, of the
    # idle threshold) is done first, here, and its count keys what it makes.
    builds = days_ensure()
    idle_min_percent = InsightsSettings.get().idle_gpu_min_share_percent
    body = page_fragment(
        request,
        "gpu-fleet",
        lambda: render_to_string(
            "gpu/fleet.html#fleet-body",
            _fleet_body(request, filters, sort, idle_min_percent),
            request=request,
        ),
        builds=builds,
        idle_min_percent=idle_min_percent,
    )
    if request.htmx:
        return HttpResponse(body)
    return render(
        request,
        "gpu/fleet.html",
        {
            "body_html": body,
            "can_map": selectors.can_map_hosts(user=request.user),
            "can_see_sources": selectors.can_see_sources(user=request.user),
        },
    )


def _fleet_body(request: HttpRequest, filters: SpendFilters, sort: str, idle_min_percent) -> dict:
    period = filters.period
    scope = {
        "user": request.user,
        "start": period.start,
        "end": period.end,
        "team": filters.team,
        "project": filters.project,
    }
    # The rows the user sees, found once for the summary and the table.
    rows = selectors.fleet_scope(**scope)
    # The table's page (its ranking is the heaviest statement), then the GPUs per model, on
    # the figures thread's own connection while the summary is built here
    # (apps/spend/figures.py); asked for in the reverse order.
    page = page_asked(request.GET)
    gpus = in_background(
        partial(selectors.fleet_gpus, **scope, sort=sort, page=page, scope=rows.copy())
    )
    model_gpus = in_background(partial(selectors.fleet_model_gpus, scope=rows.copy()))
    # The filters' line says how far the bill has got (spend/_filters.html).
    bill_freshness = spend_selectors.bill_freshness()
    idle_dollars = idle_gpu_dollars(user=request.user, start=period.start, end=period.end)
    summary = selectors.fleet(**scope, scope=rows, model_gpus=model_gpus)
    # The sort and the page travel with the filters; a new filter starts at the first page.
    keep = filters.query(sort="" if sort == DEFAULT_SORT else sort)
    charts = fleet_charts(fleet=summary)
    table = gpus()  # asked for last
    gpu_link, project_link = link_to("gpu_detail"), link_to("project_detail")
    return {
        "filters": filters,
        "form": filters.form,
        "bill_freshness": bill_freshness,
        "fleet": summary,
        "sort": sort,
        "sort_query": keep,
        **charts,
        "idle_dollars": idle_dollars,
        "gpus": table,
        # Each row with its link, reversed once for the table (costsite/links.py).
        "gpu_rows": [(row, gpu_link(row.gpu.pk)) for row in table.rows],
        "project_rows": [(group, project_link(group.url)) for group in summary.projects],
        "idle_min_percent": idle_min_percent,
        "gpu_columns": _gpu_columns(sort, filters),
        # Staff and leads (the part's key names the role).
        "can_map": selectors.can_map_hosts(user=request.user),
    }


@login_required
def gpu_detail(request: HttpRequest, gpu_pk: int) -> HttpResponse:
    gpu, resolution = selectors.gpu_resolved_for_user(user=request.user, pk=gpu_pk)
    # A GPU that stopped reporting shows its last days, not an empty chart of the present.
    last_day = spend_today()
    if gpu.last_seen_at is not None:
        last_day = min(
            last_day, (gpu.last_seen_at - timedelta(microseconds=1)).astimezone(UTC).date()
        )
    filters = spend_filters_from(request.GET, today=last_day, default_preset="7d", dimensions=())
    period = filters.period
    start = _utc_midnight(period.start or (gpu.first_seen_at or _utc_midnight(last_day)).date())
    end = _utc_midnight(period.end)
    # The findings on its resource, on the figures thread while the rest is built here
    # (apps/spend/figures.py): after a recompute of findings, half of the page.
    findings = (
        in_background(
            partial(
                findings_section,
                user=request.user,
                start=start.date(),
                end=end.date(),
                resource_id=resolution.resource_id,
            )
        )
        if resolution
        else lambda: None
    )
    threshold = float(Organization.get().idle_threshold_percent)
    by_day = end - start > timedelta(days=selectors.HOURLY_UP_TO_DAYS)
    points = selectors.gpu_usage_points(gpu=gpu, start=start, end=end, by_day=by_day)
    context = {
        "gpu": gpu,
        "filters": filters,
        "form": filters.form,
        # The filters' line says how far the bill has got (spend/_filters.html).
        "bill_freshness": spend_selectors.bill_freshness(),
        "chart": gpu_usage_chart(
            points=points, threshold=threshold, by_day=by_day, period=(start, end)
        ),
        "by_day": by_day,
        "usage": selectors.usage_of(gpu.hours.filter(hour__gte=start, hour__lt=end)),
        # The days the figures cover, as UTC dates: the template's dates are the organisation's
        # time, in which a UTC midnight may fall on the day before.
        "first_day": start.date(),
        "last_day": (end - timedelta(days=1)).date(),
        "resolution": resolution,
        "owners": selectors.gpu_owners(
            gpu=gpu, user=request.user, start=start, end=end, resolution=resolution
        ),
        "mig_instances": gpu.mig_instances.all(),
        "can_map": selectors.can_map_hosts(user=request.user),
    }
    context["findings"] = findings()  # asked for last
    template = "gpu/gpu_detail.html#gpu-body" if request.htmx else "gpu/gpu_detail.html"
    return render(request, template, context)


# Metric sources -------------------------------------------------------------------------------


@login_required
@staff_or_lead_only
def source_list(request: HttpRequest) -> HttpResponse:
    template = "gpu/source_list.html#source-rows" if request.htmx else "gpu/source_list.html"
    return render(request, template, {"sources": selectors.metric_sources()})


def _source_form_page(request: HttpRequest, form, *, title: str, submit: str) -> HttpResponse:
    list_url = reverse("gpu_source_list")
    return form_page(
        request,
        form=form,
        title=title,
        submit_label=submit,
        cancel_url=list_url,
        breadcrumbs=[("GPUs", reverse("gpu_fleet")), ("Metric sources", list_url)],
        intro="costsite scrapes a dcgm-exporter's /metrics or pulls a Prometheus server's "
        "query_range on this schedule and rolls the samples up per GPU per hour.",
    )


@login_required
@staff_only
def source_create(request: HttpRequest) -> HttpResponse:
    form = MetricSourceForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        values = dict(form.cleaned_data)
        paused = values.pop("is_paused")
        source = services.metric_source_create(**values)
        if paused:
            services.metric_source_pause(source=source, paused=True)
        messages.success(
            request, f"Metric source “{source.name}” added; the first poll is due now."
        )
        return redirect_after_save(request, reverse("gpu_source_list"))
    return _source_form_page(request, form, title="New metric source", submit="Add source")


@login_required
@staff_only
def source_edit(request: HttpRequest, source_pk: int) -> HttpResponse:
    source = get_object_or_404(MetricSource, pk=source_pk)
    form = MetricSourceForm(request.POST or None, instance=copy.copy(source))
    if request.method == "POST" and form.is_valid():
        values = dict(form.cleaned_data)
        paused = values.pop("is_paused")
        source = services.metric_source_update(source=source, **values)
        if paused != source.is_paused:
            services.metric_source_pause(source=source, paused=paused)
        messages.success(request, f"Metric source “{source.name}” saved.")
        return redirect_after_save(request, reverse("gpu_source_list"))
    return _source_form_page(request, form, title=f"Edit {source.name}", submit="Save source")


@login_required
@require_POST
@staff_only
def source_pause(request: HttpRequest, source_pk: int) -> HttpResponse:
    source = get_object_or_404(MetricSource, pk=source_pk)
    services.metric_source_pause(source=source, paused=not source.is_paused)
    if request.htmx:
        return render(
            request, "gpu/source_list.html#source-rows", {"sources": selectors.metric_sources()}
        )
    state = "paused" if source.is_paused else "resumed"
    messages.success(request, f"Metric source “{source.name}” {state}.")
    return redirect("gpu_source_list")


@login_required
@require_POST
@staff_only
def source_poll(request: HttpRequest, source_pk: int) -> HttpResponse:
    source = get_object_or_404(MetricSource, pk=source_pk)
    tasks.metric_source_poll_task.delay_on_commit(source.pk)
    messages.success(request, f"A poll of “{source.name}” is queued.")
    return redirect("gpu_source_list")


# Host-to-resource mappings ----------------------------------------------------------------------


@login_required
@staff_or_lead_only
def host_mapping_list(request: HttpRequest) -> HttpResponse:
    form = HostMappingForm(request.POST or None, initial={"host": request.GET.get("host", "")})
    if request.method == "POST" and form.is_valid():
        mapping = services.host_mapping_create(created_by=request.user, **form.cleaned_data)
        if mapping is not None:
            messages.success(request, f"{mapping.host} now maps to {mapping.resource_id}.")
            return redirect_after_save(request, reverse("gpu_host_mapping_list"))
        # Mapped by someone else since the form checked: the same answer as the form's own check.
        form.add_error("host", HostMappingForm.Meta.error_messages["host"]["unique"])
    since = _utc_midnight(spend_today() - timedelta(days=UNMAPPED_SINCE_DAYS - 1))
    context = {
        "form": form,
        # Most GPU-hours first, a page at a time: the ones worth mapping first.
        "unmapped": selectors.unmapped_hosts_page(
            since=since,
            page=page_asked(request.GET),
            per_page=selectors.UNMAPPED_HOSTS_PER_PAGE,
        ),
        "mappings": selectors.host_mapping_rows(user=request.user),
        "since_days": UNMAPPED_SINCE_DAYS,
    }
    if request.htmx and request.method == "POST":
        return render(request, "gpu/host_mapping_list.html#mapping-form", context)
    return render(request, "gpu/host_mapping_list.html", context)


@login_required
def host_mapping_edit(request: HttpRequest, mapping_pk: int) -> HttpResponse:
    mapping = selectors.host_mapping_for_user(user=request.user, pk=mapping_pk)
    form = HostMappingForm(request.POST or None, instance=copy.copy(mapping))
    if request.method == "POST" and form.is_valid():
        mapping = services.host_mapping_update(mapping=mapping, **form.cleaned_data)
        messages.success(request, f"{mapping.host} now maps to {mapping.resource_id}.")
        return redirect_after_save(request, reverse("gpu_host_mapping_list"))
    list_url = reverse("gpu_host_mapping_list")
    return form_page(
        request,
        form=form,
        title=f"Edit the mapping of {mapping.host}",
        submit_label="Save mapping",
        cancel_url=list_url,
        breadcrumbs=[("GPUs", reverse("gpu_fleet")), ("Hosts", list_url)],
    )


@login_required
@require_POST
def host_mapping_delete(request: HttpRequest, mapping_pk: int) -> HttpResponse:
    mapping = selectors.host_mapping_for_user(user=request.user, pk=mapping_pk)
    services.host_mapping_delete(mapping=mapping)
    messages.success(request, f"{mapping.host} is no longer mapped.")
    return redirect("gpu_host_mapping_list")
