"""The billing sources pages (staff only: everybody else gets 404): the list with each source's
health and data freshness, the form, and a source's polls and deliveries with its actions; and
the read-only data freshness page that team leads see too."""

import copy

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts.guards import staff_only, staff_or_lead_only
from costsite.htmx import form_page, redirect_after_save

from . import freshness, services_sources, tasks
from .forms_sources import BillingSourceForm, RerunForm
from .models import BillingSource


def _source(request: HttpRequest, source_pk: int) -> BillingSource:
    return get_object_or_404(BillingSource, pk=source_pk)


def _list_context() -> dict:
    groups = freshness.freshness()
    return {
        "groups": groups,
        "sources": freshness.sources_with_last_poll(groups=groups),
        "data_as_of": freshness.overall_as_of(groups),
    }


@login_required
@require_GET
@staff_only
def source_list(request: HttpRequest) -> HttpResponse:
    template = (
        "billing/sources/source_list.html#source-rows"
        if request.htmx
        else "billing/sources/source_list.html"
    )
    return render(request, template, _list_context())


@login_required
@require_GET
@staff_or_lead_only
def data_freshness(request: HttpRequest) -> HttpResponse:
    """Read-only: how far the bill has got per billing account, and each source's health. A lead
    sees why the numbers stop where they do without the sources' settings and actions."""
    return render(request, "billing/sources/data_freshness.html", _list_context())


def _form_page(request: HttpRequest, form, *, title: str, submit: str) -> HttpResponse:
    list_url = reverse("billing_source_list")
    return form_page(
        request,
        form=form,
        title=title,
        submit_label=submit,
        cancel_url=list_url,
        breadcrumbs=[("Billing sources", list_url)],
        intro="costsite looks into this folder or bucket prefix on this schedule and imports "
        "every new or changed export once (a CUR manifest with its parts as one delivery). "
        "S3 credentials come from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY).",
    )


@login_required
@require_http_methods(["GET", "POST"])
@staff_only
def source_create(request: HttpRequest) -> HttpResponse:
    form = BillingSourceForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        source = services_sources.billing_source_create(**form.cleaned_data)
        messages.success(
            request, f"Billing source “{source.name}” added; the first poll is due now."
        )
        return redirect_after_save(request, reverse("billing_source_detail", args=[source.pk]))
    return _form_page(request, form, title="New billing source", submit="Add source")


@login_required
@require_http_methods(["GET", "POST"])
@staff_only
def source_edit(request: HttpRequest, source_pk: int) -> HttpResponse:
    source = _source(request, source_pk)
    # The form fills its instance as it validates: a copy keeps `source` as saved, so that the
    # pause below compares with what was stored.
    form = BillingSourceForm(request.POST or None, instance=copy.copy(source))
    if request.method == "POST" and form.is_valid():
        values = dict(form.cleaned_data)
        paused = values.pop("is_paused")
        source = services_sources.billing_source_update(source=source, **values)
        if paused != source.is_paused:
            services_sources.billing_source_pause(source=source, paused=paused)
        messages.success(request, f"Billing source “{source.name}” saved.")
        return redirect_after_save(request, reverse("billing_source_detail", args=[source.pk]))
    return _form_page(request, form, title=f"Edit {source.name}", submit="Save source")


def _detail_context(source: BillingSource, rerun_form: RerunForm | None = None) -> dict:
    [group] = freshness.freshness(source=source)
    return {
        "source": source,
        "freshness": group,
        "freshness_groups": [group],
        "polls": freshness.source_polls(source=source),
        "deliveries": freshness.source_deliveries(source=source),
        "rerun_form": rerun_form or RerunForm(),
    }


@login_required
@require_GET
@staff_only
def source_detail(request: HttpRequest, source_pk: int) -> HttpResponse:
    source = _source(request, source_pk)
    template = (
        "billing/sources/source_detail.html#source-activity"
        if request.htmx
        else "billing/sources/source_detail.html"
    )
    return render(request, template, _detail_context(source))


@login_required
@require_POST
@staff_only
def source_pause(request: HttpRequest, source_pk: int) -> HttpResponse:
    source = _source(request, source_pk)
    services_sources.billing_source_pause(source=source, paused=not source.is_paused)
    if request.htmx:
        return render(request, "billing/sources/source_list.html#source-rows", _list_context())
    state = "paused" if source.is_paused else "resumed"
    messages.success(request, f"Billing source “{source.name}” {state}.")
    return redirect("billing_source_detail", source_pk=source.pk)


@login_required
@require_POST
@staff_only
def source_poll(request: HttpRequest, source_pk: int) -> HttpResponse:
    source = _source(request, source_pk)
    tasks.billing_source_poll_task.delay_on_commit(
        source.pk, requested_by_id=request.user.pk, manual=True
    )
    messages.success(request, f"A poll of “{source.name}” is queued.")
    return redirect("billing_source_detail", source_pk=source.pk)


@login_required
@require_POST
@staff_only
def source_rerun(request: HttpRequest, source_pk: int) -> HttpResponse:
    source = _source(request, source_pk)
    form = RerunForm(request.POST)
    if not form.is_valid():
        context = _detail_context(source, rerun_form=form)
        if request.htmx:
            return render(request, "billing/sources/source_detail.html#rerun-form", context)
        return render(request, "billing/sources/source_detail.html", context, status=400)
    start, end = form.cleaned_data["period_start"], form.cleaned_data["period_end"]
    tasks.billing_source_poll_task.delay_on_commit(
        source.pk,
        period_start=start.isoformat(),
        period_end=end.isoformat(),
        requested_by_id=request.user.pk,
        manual=True,
    )
    messages.success(
        request,
        f"A re-run of “{source.name}” for the billing periods from {start.day} {start:%b %Y} "
        f"to {end.day} {end:%b %Y} is queued.",
    )
    return redirect_after_save(request, reverse("billing_source_detail", args=[source.pk]))
