import copy
import functools

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString

from apps.accounts.selectors import teams_led_by
from apps.digests.selectors import project_alerts
from apps.insights.figures import FINDINGS_SLOT, page_fragment, page_fragment_with_findings
from apps.insights.selectors import findings_section
from apps.insights.selectors_part3 import project_failed_share
from apps.projects.selectors import can_create_project, can_edit_project, project_for_user
from apps.spend.filters import PRESET_LABELS
from apps.spend.sections import (
    PROJECT_LIST_PRESETS,
    project_filters,
    project_list_spend,
    project_spend,
    request_organization,
)
from apps.spend.views import overview
from costsite.htmx import form_page, redirect_after_save

from . import selectors, services
from .charts import experiments_by_month_chart
from .forms import ProjectForm

EXPERIMENTS_PER_PAGE = 25
# (sort key, heading, numeric, hidden on a phone)
PROJECT_COLUMNS = [
    ("name", "Project", False, False),
    ("team", "Team", False, False),
    ("budget", "Budget", True, False),
    ("experiments", "Experiments", True, False),
    ("running", "Running", True, True),
    ("models", "Models", True, True),
    ("deployments", "Deployments", True, True),
]


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The spend overview (apps/spend/views.py): the first thing a lead opens."""
    return overview(request)


@login_required
def project_list(request: HttpRequest) -> HttpResponse:
    sort = request.GET.get("sort", "name")
    columns = [
        {
            "label": label,
            "numeric": numeric,
            "narrow_hidden": narrow_hidden,
            "sort": f"-{key}" if sort == key else key,
            "active": "ascending" if sort == key else "descending" if sort == f"-{key}" else "",
        }
        for key, label, numeric, narrow_hidden in PROJECT_COLUMNS
    ]
    spend = project_list_spend(
        user=request.user,
        preset=request.GET.get("preset", ""),
        currency=request_organization(request).currency,
    )
    projects = list(selectors.project_list(user=request.user, sort=sort))
    return render(
        request,
        "projects/project_list.html",
        {
            "projects": spend.rows(projects),
            "columns": columns,
            "can_create": can_create_project(user=request.user),
            "spend": spend,
            "presets": [(key, PRESET_LABELS[key]) for key in PROJECT_LIST_PRESETS],
            "sort": sort,
        },
    )


@login_required
def project_detail(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_for_user(user=request.user, slug=slug)
    if request.htmx and request.htmx.target == "spend":
        return HttpResponse(_spend_html(request, project))
    if request.htmx:
        return render(
            request,
            "projects/project_detail.html#experiment-table",
            {"project": project, "experiments": _experiments_page(request, project)},
        )
    return render(
        request,
        "projects/project_detail.html",
        {
            "project": project,
            "spend_html": _spend_html(request, project),
            "body_html": _body_html(request, project),
            "can_edit": can_edit_project(user=request.user, project=project),
            "alerts": project_alerts(project=project),
        },
    )


def _experiments_page(request: HttpRequest, project):
    return Paginator(selectors.project_experiments(project=project), EXPERIMENTS_PER_PAGE).get_page(
        request.GET.get("page")
    )


def _body_html(request: HttpRequest, project) -> SafeString:
    """The experiments chart and the project's runs, models and deployments: no spend, so
    cached until a run, model, deployment or registered resource is saved or deleted (an import
    leaves it)."""
    return page_fragment(
        request,
        f"project-body:{project.pk}",
        lambda: render_to_string(
            "projects/project_detail.html#body",
            {
                "project": project,
                "experiments": _experiments_page(request, project),
                "models": selectors.project_models(project=project),
                "deployments": selectors.project_deployments(project=project),
                "experiments_chart": experiments_by_month_chart(
                    rows=selectors.project_experiments_by_month(project=project)
                ),
            },
            request=request,
        ),
        spend=False,
        findings=False,
    )


def _spend_html(request: HttpRequest, project) -> SafeString:
    """The spend section (#spend, also what a filter change fetches), cached per data version,
    and its findings section per findings version."""
    filters = functools.cache(lambda: project_filters(request.GET))  # read once, if at all

    def section():
        period = filters().period
        return findings_section(
            user=request.user, start=period.start, end=period.end, project=project
        )

    return page_fragment_with_findings(
        request,
        f"project-spend:{project.pk}",
        lambda: render_to_string(
            "projects/project_detail.html#spend",
            {"project": project, **_spend(request, project, filters())},
            request=request,
        ),
        section,
    )


def _spend(request: HttpRequest, project, filters) -> dict:
    spend = project_spend(
        project=project,
        params=request.GET,
        currency=request_organization(request).currency,
        filters=filters,
    ).context()
    period = spend["filters"].period
    failed = project_failed_share(project=project, start=period.start, end=period.end)
    return {
        **spend,
        "findings_slot": FINDINGS_SLOT,
        "failed_share": failed,
        "rule_gpu_workload": selectors.project_rule_gpu_workload(project=project),
    }


@login_required
def project_create(request: HttpRequest) -> HttpResponse:
    teams = teams_led_by(user=request.user)
    if not teams.exists():
        raise Http404("Only a team's lead creates its projects.")
    form = ProjectForm(request.POST or None, teams=teams)
    if request.method == "POST" and form.is_valid():
        project = services.project_create(**form.cleaned_data)
        # Bills loaded before may have tags that name it: their history is attributed again, as
        # when a project is added in the admin.
        services.ownership_announce(
            reason=f"Project “{project.name}” created", created_by=request.user
        )
        messages.success(
            request,
            f"Project “{project.name}” created. Spend already billed under tags that name it "
            "moves to it in the background, as the bill's history is attributed again.",
        )
        return redirect_after_save(request, reverse("project_detail", args=[project.slug]))
    return form_page(
        request,
        form=form,
        title="New project",
        submit_label="Create project",
        cancel_url=reverse("project_list"),
        breadcrumbs=[("Projects", reverse("project_list"))],
    )


@login_required
def project_edit(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_for_user(user=request.user, slug=slug, edit=True)
    teams = teams_led_by(user=request.user)
    # A copy, so that a form with errors does not rename the project in the page's own heading.
    form = ProjectForm(request.POST or None, instance=copy.copy(project), teams=teams)
    if request.method == "POST" and form.is_valid():
        named = (project.slug, project.name)
        project = services.project_update(project=project, **form.cleaned_data)
        if named != (project.slug, project.name):
            # Tags name a project by its slug or name: the history is attributed again.
            services.ownership_announce(
                reason=f"Project “{project.name}” renamed", created_by=request.user
            )
        messages.success(request, f"Project “{project.name}” saved.")
        return redirect_after_save(request, reverse("project_detail", args=[project.slug]))
    return form_page(
        request,
        form=form,
        title=f"Edit {project.name}",
        submit_label="Save project",
        cancel_url=reverse("project_detail", args=[project.slug]),
        breadcrumbs=[
            ("Projects", reverse("project_list")),
            (project.name, reverse("project_detail", args=[project.slug])),
        ],
    )
