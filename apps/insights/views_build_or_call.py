"""The models page (deployments ranked by monthly cost, with their verdicts) and a deployment's
build-or-call page, whose inputs recompute the verdict live (htmx, nothing saved) until a lead
saves them."""

import copy
from datetime import date

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from apps.accounts.models import Organization
from apps.deployments.selectors import deployment_for_user
from apps.projects.selectors import can_edit_project
from apps.spend.filters import EARLIEST_DAY, LATEST_DAY

from . import selectors_build_or_call as selectors
from .charts_build_or_call import build_or_call_chart
from .forms_build_or_call import FIELDS, BuildOrCallForm
from .selectors_levers import deployment_levers
from .services_build_or_call import build_or_call_inputs_save


def _period(request: HttpRequest) -> tuple[date, date]:
    try:
        start = date.fromisoformat(request.GET.get("start", ""))
        end = date.fromisoformat(request.GET.get("end", ""))
        if EARLIEST_DAY <= start < end <= LATEST_DAY:
            return start, end
    except ValueError:
        pass
    return selectors.default_period()


@login_required
def build_or_call_list(request: HttpRequest) -> HttpResponse:
    start, end = _period(request)
    context = {
        "start": start,
        "end": end,
        "rows": selectors.build_or_call_ranking(user=request.user, start=start, end=end),
    }
    return render(request, "insights/build_or_call_list.html", context)


def _defaults(deployment, org: Organization) -> dict:
    return {
        "expected_requests_per_hour": "the real volume",
        "engineering_hours_per_month": f"{org.engineering_hours_per_month} (the organisation's)",
        "capacity_per_replica_hour": "the busiest hour per replica",
        "latency_objective_ms": str(deployment.latency_objective_ms or "none"),
    }


@login_required
def build_or_call_detail(request: HttpRequest, deployment_pk: int) -> HttpResponse:
    deployment = deployment_for_user(user=request.user, pk=deployment_pk)
    org = Organization.get()
    start, end = _period(request)
    saved = selectors.inputs_for(deployment=deployment)
    can_save = can_edit_project(user=request.user, project=deployment.project)
    live = request.method == "POST" or any(name in request.GET for name in FIELDS)
    data = request.POST if request.method == "POST" else (request.GET if live else None)
    form = BuildOrCallForm(
        data,
        instance=copy.copy(saved),  # a preview changes this copy only
        defaults=_defaults(deployment, org),
        # The htmx partial does not show the suggestions: not worked out for each keystroke.
        suggestions=[]
        if request.htmx and request.method == "GET"
        else selectors.api_model_suggestions(deployment=deployment),
    )
    choices = saved
    if live and form.is_valid():
        choices = form.instance
        if request.method == "POST" and can_save:
            build_or_call_inputs_save(
                deployment=deployment,
                by=request.user,
                **{name: form.cleaned_data[name] for name in FIELDS},
            )
            messages.success(request, "Build-or-call inputs saved.")
            back = reverse("build_or_call_detail", args=[deployment.pk])
            if "start" in request.GET:
                back += f"?start={start.isoformat()}&end={end.isoformat()}"
            return redirect(back)
    if request.method == "POST" and not can_save:
        messages.error(request, "Only the team's lead (or staff) saves these inputs.")
    result = selectors.build_or_call_result(
        deployment=deployment, start=start, end=end, choices=choices, organization=org
    )
    context = {
        "deployment": deployment,
        "project": deployment.project,
        "start": start,
        "end": end,
        "form": form,
        "saved": saved,
        "can_save": can_save,
        "result": result,
        "chart": build_or_call_chart(result=result),
        "currency": org.currency,
        "unsaved": live and request.method == "GET",
        "levers": deployment_levers(user=request.user, deployment=deployment),
    }
    if request.htmx and request.method == "GET":
        return render(request, "insights/build_or_call_detail.html#result", context)
    return render(request, "insights/build_or_call_detail.html", context)
