"""A deployment's Prometheus traffic sources, set up on the deployment's pages: the lead of the
deployment's team (or staff) adds one (URL and PromQL request counter query), sees its health and
last poll, pauses it and polls it now. Anyone else, a member of the team included, gets 404 (as
on every lead page): a source makes the server fetch a URL of the lead's choosing."""

import copy

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from apps.accounts.selectors import teams_led_by
from apps.deployments.models import Deployment
from apps.deployments.selectors import deployment_for_user
from costsite.htmx import form_page, redirect_after_save

from . import services_traffic, tasks
from .forms import TrafficSourceForm
from .models import TrafficSource


def _led_deployment(request: HttpRequest, deployment_pk: int) -> Deployment:
    """The deployment, if the user sees it and leads its project's team (or is staff)."""
    deployment = deployment_for_user(user=request.user, pk=deployment_pk)
    if not teams_led_by(user=request.user).filter(pk=deployment.project.team_id).exists():
        raise Http404("No such page: the team's lead sets up its deployments' traffic sources.")
    return deployment


def _source(deployment: Deployment, source_pk: int) -> TrafficSource:
    return get_object_or_404(TrafficSource, pk=source_pk, deployment=deployment)


def _crumbs(deployment: Deployment, *more: tuple[str, str]) -> list[tuple[str, str]]:
    return [
        ("Projects", reverse("project_list")),
        (deployment.project.name, reverse("project_detail", args=[deployment.project.slug])),
        (deployment.name, reverse("deployment_detail", args=[deployment.pk])),
        *more,
    ]


def _list_url(deployment: Deployment) -> str:
    return reverse("deployment_traffic_sources", args=[deployment.pk])


INTRO = (
    "costsite pulls the query from the Prometheus server's query_range, a point at the end of "
    "each whole UTC hour, and stores it as that hour's requests; an hour pulled again replaces "
    'its figures. Example: sum(increase(vllm:request_success_total{model_name="chat"}[1h])).'
)


@login_required
def traffic_sources(request: HttpRequest, deployment_pk: int) -> HttpResponse:
    deployment = _led_deployment(request, deployment_pk)
    context = {
        "deployment": deployment,
        "sources": TrafficSource.objects.filter(deployment=deployment).order_by("pk"),
        "breadcrumbs": _crumbs(deployment),
    }
    template = (
        "gpu/traffic_sources.html#traffic-source-rows"
        if request.htmx
        else "gpu/traffic_sources.html"
    )
    return render(request, template, context)


@login_required
def traffic_source_create(request: HttpRequest, deployment_pk: int) -> HttpResponse:
    deployment = _led_deployment(request, deployment_pk)
    form = TrafficSourceForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        values = dict(form.cleaned_data)
        paused = values.pop("is_paused")
        services_traffic.traffic_source_create(deployment=deployment, paused=paused, **values)
        messages.success(
            request,
            f"Traffic source of “{deployment.name}” added"
            + ("; it is paused." if paused else "; the first poll is due now."),
        )
        return redirect_after_save(request, _list_url(deployment))
    return form_page(
        request,
        form=form,
        title=f"New traffic source for {deployment.name}",
        intro=INTRO,
        submit_label="Add source",
        cancel_url=_list_url(deployment),
        breadcrumbs=_crumbs(deployment, ("Traffic sources", _list_url(deployment))),
    )


@login_required
def traffic_source_edit(
    request: HttpRequest, deployment_pk: int, traffic_source_pk: int
) -> HttpResponse:
    deployment = _led_deployment(request, deployment_pk)
    source = _source(deployment, traffic_source_pk)
    form = TrafficSourceForm(request.POST or None, instance=copy.copy(source))
    if request.method == "POST" and form.is_valid():
        values = dict(form.cleaned_data)
        paused = values.pop("is_paused")
        services_traffic.traffic_source_update(source=source, paused=paused, **values)
        messages.success(request, f"Traffic source of “{deployment.name}” saved.")
        return redirect_after_save(request, _list_url(deployment))
    return form_page(
        request,
        form=form,
        title=f"Edit the traffic source of {deployment.name}",
        intro=INTRO,
        submit_label="Save source",
        cancel_url=_list_url(deployment),
        breadcrumbs=_crumbs(deployment, ("Traffic sources", _list_url(deployment))),
    )


@login_required
@require_POST
def traffic_source_pause(
    request: HttpRequest, deployment_pk: int, traffic_source_pk: int
) -> HttpResponse:
    deployment = _led_deployment(request, deployment_pk)
    source = _source(deployment, traffic_source_pk)
    services_traffic.traffic_source_update(source=source, paused=not source.is_paused)
    state = "paused" if source.is_paused else "resumed"
    messages.success(request, f"Traffic source {source.url} {state}.")
    return redirect(_list_url(deployment))


@login_required
@require_POST
def traffic_source_poll(
    request: HttpRequest, deployment_pk: int, traffic_source_pk: int
) -> HttpResponse:
    """Queue a poll now (on the imports queue, as the schedule's are); the list shows how it
    went once it ran."""
    deployment = _led_deployment(request, deployment_pk)
    source = _source(deployment, traffic_source_pk)
    if source.is_paused:
        messages.error(request, f"Traffic source {source.url} is paused: resume it to poll it.")
    else:
        tasks.traffic_source_poll_task.delay_on_commit(source.pk)
        messages.success(
            request, f"A poll of {source.url} is queued; its health below says how it went."
        )
    return redirect(_list_url(deployment))
