import copy

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from apps.accounts.guards import staff_only
from apps.projects.models import Project
from costsite.htmx import form_page, redirect_after_save

from . import selectors, services, tasks
from .forms import TrackerSourceForm, WandbUploadForm
from .models import TrackerSource
from .wandb import WandbFileError


@login_required
@staff_only
def source_list(request: HttpRequest) -> HttpResponse:
    template = (
        "trackers/source_list.html#source-rows" if request.htmx else "trackers/source_list.html"
    )
    return render(request, template, {"sources": selectors.tracker_sources()})


def _source_form_page(request: HttpRequest, form, *, title: str, submit: str) -> HttpResponse:
    list_url = reverse("tracker_source_list")
    return form_page(
        request,
        form=form,
        title=title,
        submit_label=submit,
        cancel_url=list_url,
        breadcrumbs=[("Experiment trackers", list_url)],
        intro="costsite reads the MLflow server's runs through its REST API on this schedule: "
        "each run becomes an experiment, and its cost can be written back as run tags.",
    )


def _save(form, source: TrackerSource | None) -> TrackerSource:
    values = dict(form.cleaned_data)
    paused = values.pop("is_paused")
    if source is not None and not values["token"]:
        values.pop("token")  # left empty: kept
    if source is None:
        source = services.tracker_source_create(**values)
    else:
        source = services.tracker_source_update(source=source, **values)
    if paused != source.is_paused:
        services.tracker_source_pause(source=source, paused=paused)
    return source


@login_required
@staff_only
def source_create(request: HttpRequest) -> HttpResponse:
    form = TrackerSourceForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        source = _save(form, None)
        messages.success(
            request, f"MLflow server “{source.name}” added; the first poll is due now."
        )
        return redirect_after_save(request, reverse("tracker_source_list"))
    return _source_form_page(request, form, title="New MLflow server", submit="Add server")


@login_required
@staff_only
def source_edit(request: HttpRequest, source_pk: int) -> HttpResponse:
    source = get_object_or_404(TrackerSource, pk=source_pk)
    form = TrackerSourceForm(request.POST or None, instance=copy.copy(source))
    if request.method == "POST" and form.is_valid():
        source = _save(form, source)
        messages.success(request, f"MLflow server “{source.name}” saved.")
        return redirect_after_save(request, reverse("tracker_source_list"))
    return _source_form_page(request, form, title=f"Edit {source.name}", submit="Save server")


@login_required
@require_POST
@staff_only
def source_pause(request: HttpRequest, source_pk: int) -> HttpResponse:
    source = get_object_or_404(TrackerSource, pk=source_pk)
    services.tracker_source_pause(source=source, paused=not source.is_paused)
    if request.htmx:
        return render(
            request,
            "trackers/source_list.html#source-rows",
            {"sources": selectors.tracker_sources()},
        )
    state = "paused" if source.is_paused else "resumed"
    messages.success(request, f"MLflow server “{source.name}” {state}.")
    return redirect("tracker_source_list")


@login_required
@require_POST
@staff_only
def source_poll(request: HttpRequest, source_pk: int) -> HttpResponse:
    source = get_object_or_404(TrackerSource, pk=source_pk)
    full = request.POST.get("full") == "1"
    tasks.tracker_source_poll_task.delay_on_commit(source.pk, full)
    what = "A full re-read" if full else "A poll"
    messages.success(request, f"{what} of “{source.name}” is queued.")
    return redirect("tracker_source_list")


@login_required
@staff_only
def wandb_upload(request: HttpRequest) -> HttpResponse:
    form = WandbUploadForm(
        request.POST or None, request.FILES or None, projects=Project.objects.order_by("name")
    )
    errors: list[str] = []
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        upload = data["file"]
        mapping = services.RunMapping(
            project_tag=data["project_tag"].strip(),
            default_project=data["default_project"],
            resource_tags=tuple(k.strip() for k in data["resource_tags"].split(",") if k.strip()),
            gpu_count_tag=data["gpu_count_tag"].strip(),
            loss_metric=data["loss_metric"].strip(),
        )
        try:
            tally = services.wandb_runs_import(
                name=upload.name,
                data=upload.read(),
                mapping=mapping,
                file_format=data["file_format"],
            )
        except WandbFileError as exc:
            errors = exc.errors
        else:
            messages.success(
                request,
                f"{upload.name}: {tally.created} run(s) added, {tally.updated} updated, "
                f"{tally.unchanged} unchanged, {tally.unassigned} skipped (no project).",
            )
            return redirect_after_save(request, reverse("wandb_upload"))
    template = (
        "trackers/wandb_upload.html#upload-form" if request.htmx else "trackers/wandb_upload.html"
    )
    return render(request, template, {"form": form, "errors": errors})
