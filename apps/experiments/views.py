import copy

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from apps.deployments.selectors import models_visible_to
from apps.experiments.selectors import experiment_for_user
from apps.projects.selectors import project_for_user
from apps.spend.sections import EXPERIMENT_PRESET, experiment_spend, request_organization
from apps.spend.views import owner_spend_html
from apps.trackers.selectors import tracked_run_for
from costsite.htmx import form_page, redirect_after_save

from . import selectors, services
from .charts import metrics_chart
from .forms import ExperimentForm


@login_required
def experiment_detail(request: HttpRequest, experiment_pk: int) -> HttpResponse:
    experiment = experiment_for_user(user=request.user, pk=experiment_pk)
    spend = owner_spend_html(
        request,
        name=f"experiment-spend:{experiment.pk}",
        template="experiments/experiment_detail.html#spend",
        spend=lambda: experiment_spend(
            experiment=experiment,
            params=request.GET,
            currency=request_organization(request).currency,
        ),
        preset=EXPERIMENT_PRESET,
        experiment=experiment,
    )
    if request.htmx and request.htmx.target == "spend":
        return HttpResponse(spend)
    return render(
        request,
        "experiments/experiment_detail.html",
        {
            "spend_html": spend,
            "experiment": experiment,
            "project": experiment.project,
            "model": selectors.experiment_model_for_user(experiment=experiment, user=request.user),
            "resources": selectors.experiment_resources(experiment=experiment),
            "tracked_run": tracked_run_for(experiment=experiment),
            "metrics_chart": metrics_chart(
                series=selectors.experiment_metric_series(experiment=experiment)
            ),
        },
    )


@login_required
def experiment_create(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_for_user(user=request.user, slug=slug)
    form = ExperimentForm(
        request.POST or None,
        project=project,
        models=models_visible_to(user=request.user),
        user=request.user,
        initial={"model": request.GET.get("model")},
    )
    if request.method == "POST" and form.is_valid():
        experiment = services.experiment_create(
            project=project, created_by=request.user, **form.cleaned_data
        )
        messages.success(request, f"Experiment “{experiment.name}” registered.")
        return redirect_after_save(request, reverse("experiment_detail", args=[experiment.pk]))
    project_url = reverse("project_detail", args=[project.slug])
    return form_page(
        request,
        form=form,
        title=f"New experiment in {project.name}",
        intro="Training scripts can register their runs themselves; this form is for the rest.",
        submit_label="Register experiment",
        cancel_url=project_url,
        breadcrumbs=[("Projects", reverse("project_list")), (project.name, project_url)],
    )


@login_required
def experiment_edit(request: HttpRequest, experiment_pk: int) -> HttpResponse:
    experiment = experiment_for_user(user=request.user, pk=experiment_pk)
    project = experiment.project
    # A copy, so that a form with errors does not rename the run in the page's own heading.
    form = ExperimentForm(
        request.POST or None,
        instance=copy.copy(experiment),
        project=project,
        models=models_visible_to(user=request.user),
        user=request.user,
    )
    if request.method == "POST" and form.is_valid():
        experiment = services.experiment_update(experiment=experiment, **form.cleaned_data)
        messages.success(request, f"Experiment “{experiment.name}” saved.")
        return redirect_after_save(request, reverse("experiment_detail", args=[experiment.pk]))
    experiment_url = reverse("experiment_detail", args=[experiment.pk])
    return form_page(
        request,
        form=form,
        title=f"Edit {experiment.name}",
        submit_label="Save experiment",
        cancel_url=experiment_url,
        breadcrumbs=[
            ("Projects", reverse("project_list")),
            (project.name, reverse("project_detail", args=[project.slug])),
            (experiment.name, experiment_url),
        ],
    )
