import copy
from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse

from apps.accounts.selectors import teams_led_by
from apps.deployments.selectors import deployment_for_user, model_for_user, models_visible_to
from apps.insights.figures import page_fragment
from apps.projects.selectors import project_for_user
from apps.spend.sections import (
    DEPLOYMENT_PRESET,
    deployment_spend,
    model_spend,
    request_organization,
    today,
)
from apps.spend.storage import model_storage, period_end
from apps.spend.views import owner_spend_html
from costsite.htmx import form_page, redirect_after_save

from . import selectors, services
from .charts import traffic_chart
from .forms import DeploymentForm, MLModelForm, RequestLogForm

# A model trained again and again has hundreds of runs: the page lists them a page at a time.
RUNS_PER_PAGE = 25


def _crumbs(project, *more: tuple[str, str]) -> list[tuple[str, str]]:
    return [
        ("Projects", reverse("project_list")),
        (project.name, reverse("project_detail", args=[project.slug])),
        *more,
    ]


@login_required
def model_detail(request: HttpRequest, model_pk: int) -> HttpResponse:
    model = model_for_user(user=request.user, pk=model_pk)
    # Its spend section (also what a filter change fetches), and its storage, runs and
    # deployments: each cached whole, as HTML, per data version (apps/insights/figures.py).
    # Neither shows findings: a recompute leaves both cached.
    spend = page_fragment(
        request,
        f"model-spend:{model.pk}",
        lambda: render_to_string(
            "deployments/model_detail.html#spend",
            model_spend(
                model=model,
                user=request.user,
                params=request.GET,
                currency=request_organization(request).currency,
            ).context(),
            request=request,
        ),
        findings=False,
    )
    if request.htmx and request.htmx.target == "spend":
        return HttpResponse(spend)
    body = page_fragment(
        request,
        f"model-body:{model.pk}",
        lambda: render_to_string(
            "deployments/model_detail.html#body", _model_body(request, model), request=request
        ),
        findings=False,
    )
    return render(
        request,
        "deployments/model_detail.html",
        {"model": model, "project": model.project, "spend_html": spend, "body_html": body},
    )


def _model_body(request: HttpRequest, model) -> dict:
    # Its last day is the bill's last whole day, as on the storage page.
    storage_end = period_end(today())
    currency = request_organization(request).currency
    return {
        "currency": currency,
        "model": model,
        "project": model.project,
        "experiments": Paginator(
            selectors.model_experiments(model=model, user=request.user), RUNS_PER_PAGE
        ).get_page(request.GET.get("runs")),
        "deployments": selectors.model_deployments(model=model, user=request.user),
        "storage": model_storage(
            model=model,
            currency=currency,
            start=storage_end - timedelta(days=90),
            end=storage_end,
        ),
    }


@login_required
def model_create(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_for_user(user=request.user, slug=slug)
    form = MLModelForm(request.POST or None, project=project)
    if request.method == "POST" and form.is_valid():
        model = services.model_create(project=project, **form.cleaned_data)
        messages.success(request, f"Model “{model.name}” added.")
        return redirect_after_save(request, reverse("model_detail", args=[model.pk]))
    return form_page(
        request,
        form=form,
        title=f"New model in {project.name}",
        intro="A model is what experiments produce and deployments serve.",
        submit_label="Add model",
        cancel_url=reverse("project_detail", args=[project.slug]),
        breadcrumbs=_crumbs(project),
    )


@login_required
def model_edit(request: HttpRequest, model_pk: int) -> HttpResponse:
    model = model_for_user(user=request.user, pk=model_pk)
    form = MLModelForm(request.POST or None, instance=copy.copy(model), project=model.project)
    if request.method == "POST" and form.is_valid():
        model = services.model_update(model=model, **form.cleaned_data)
        messages.success(request, f"Model “{model.name}” saved.")
        return redirect_after_save(request, reverse("model_detail", args=[model.pk]))
    model_url = reverse("model_detail", args=[model.pk])
    return form_page(
        request,
        form=form,
        title=f"Edit {model.name}",
        submit_label="Save model",
        cancel_url=model_url,
        breadcrumbs=_crumbs(model.project, (model.name, model_url)),
    )


@login_required
def deployment_detail(request: HttpRequest, deployment_pk: int) -> HttpResponse:
    deployment = deployment_for_user(user=request.user, pk=deployment_pk)
    # Its spend section (also what a filter change fetches) and its traffic, cached as HTML per
    # data version (a traffic import moves it too).
    spend = owner_spend_html(
        request,
        name=f"deployment-spend:{deployment.pk}",
        template="deployments/deployment_detail.html#spend",
        spend=lambda: deployment_spend(
            deployment=deployment,
            params=request.GET,
            currency=request_organization(request).currency,
        ),
        preset=DEPLOYMENT_PRESET,
        deployment=deployment,
    )
    if request.htmx and request.htmx.target == "spend":
        return HttpResponse(spend)
    return render(
        request,
        "deployments/deployment_detail.html",
        {
            "deployment": deployment,
            "project": deployment.project,
            "spend_html": spend,
            "traffic_html": page_fragment(
                request,
                f"deployment-traffic:{deployment.pk}",
                lambda: _traffic_html(request, deployment),
                findings=False,
            ),
            "model": selectors.deployment_model_for_user(deployment=deployment, user=request.user),
            "resources": selectors.deployment_resources(deployment=deployment),
            # Its team's lead (or staff) sets up its Prometheus traffic sources.
            "leads_team": teams_led_by(user=request.user)
            .filter(pk=deployment.project.team_id)
            .exists(),
        },
    )


def _traffic_html(request: HttpRequest, deployment) -> str:
    traffic = selectors.deployment_recent_traffic(deployment=deployment)
    return render_to_string(
        "deployments/deployment_detail.html#traffic",
        {
            "traffic": traffic,
            "traffic_chart": traffic_chart(deployment=deployment, traffic=traffic),
            "traffic_days": selectors.TRAFFIC_PAGE_DAYS,
        },
        request=request,
    )


@login_required
def deployment_create(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_for_user(user=request.user, slug=slug)
    form = DeploymentForm(
        request.POST or None,
        project=project,
        models=models_visible_to(user=request.user),
        user=request.user,
        initial={"model": request.GET.get("model")},
    )
    if request.method == "POST" and form.is_valid():
        deployment = services.deployment_create(project=project, **form.cleaned_data)
        messages.success(request, f"Deployment “{deployment.name}” registered.")
        return redirect_after_save(request, reverse("deployment_detail", args=[deployment.pk]))
    return form_page(
        request,
        form=form,
        title=f"New deployment in {project.name}",
        intro="A deployment serves one model; register the resources it runs on so that its "
        "spend is attributed to it.",
        submit_label="Register deployment",
        cancel_url=reverse("project_detail", args=[project.slug]),
        breadcrumbs=_crumbs(project),
    )


@login_required
def deployment_edit(request: HttpRequest, deployment_pk: int) -> HttpResponse:
    deployment = deployment_for_user(user=request.user, pk=deployment_pk)
    # A copy, so that a form with errors does not rename the deployment in the page's heading.
    form = DeploymentForm(
        request.POST or None,
        instance=copy.copy(deployment),
        project=deployment.project,
        models=models_visible_to(user=request.user),
        user=request.user,
    )
    if request.method == "POST" and form.is_valid():
        deployment = services.deployment_update(deployment=deployment, **form.cleaned_data)
        messages.success(request, f"Deployment “{deployment.name}” saved.")
        return redirect_after_save(request, reverse("deployment_detail", args=[deployment.pk]))
    deployment_url = reverse("deployment_detail", args=[deployment.pk])
    return form_page(
        request,
        form=form,
        title=f"Edit {deployment.name}",
        submit_label="Save deployment",
        cancel_url=deployment_url,
        breadcrumbs=_crumbs(deployment.project, (deployment.name, deployment_url)),
    )


@login_required
def deployment_traffic_upload(request: HttpRequest, deployment_pk: int) -> HttpResponse:
    """A request log counted into hourly traffic: all or nothing, an hour sent again replaced."""
    deployment = deployment_for_user(user=request.user, pk=deployment_pk)
    form = RequestLogForm(request.POST or None, request.FILES or None)
    errors: list[str] = []
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            written = services.deployment_traffic_import_log(
                deployment=deployment, stream=upload.file, name=upload.name
            )
        except ValidationError as error:
            errors = error.messages
        else:
            messages.success(
                request,
                f"{upload.name}: {written.created} hour{'s' if written.created != 1 else ''} "
                f"added, {written.updated} replaced.",
            )
            return redirect_after_save(request, reverse("deployment_detail", args=[deployment.pk]))
    template = (
        "deployments/traffic_upload.html#upload-form"
        if request.htmx
        else "deployments/traffic_upload.html"
    )
    return render(
        request,
        template,
        {
            "form": form,
            "errors": errors,
            "deployment": deployment,
            "breadcrumbs": _crumbs(
                deployment.project,
                (deployment.name, reverse("deployment_detail", args=[deployment.pk])),
            ),
        },
    )
