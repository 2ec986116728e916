"""The allocation page (staff only): tag key aliases and allocation rules, each change previewed
before it is saved, and the re-attribution that saving starts, with its progress."""

import copy

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseStopPolling

from apps.accounts.guards import staff_only
from apps.projects import services as project_services
from apps.projects.models import AllocationRule, TagKeyAlias
from costsite.htmx import redirect_after_save

from . import selectors_allocation as selectors
from . import services_allocation
from .forms_allocation import AllocationRuleForm, TagKeyAliasForm, wants_preview
from .models import AttributionRun

PAGE = "billing/allocation/page.html"
FORM = "billing/allocation/form.html"


def _run_context(run: AttributionRun | None) -> dict:
    movement = selectors.attribution_run_movement(run=run) if run and run.is_done else None
    return {"run": run, "run_movement": movement}


def _page(request: HttpRequest, **forms) -> HttpResponse:
    runs = selectors.attribution_runs()
    run = runs[0] if runs else None
    if request.GET.get("run", "").isdigit():
        run = AttributionRun.objects.filter(pk=int(request.GET["run"])).first() or run
    context = {
        "aliases": selectors.tag_key_aliases(),
        "rules": selectors.allocation_rules(),
        "runs": runs,
        "alias_form": forms.get("alias_form") or TagKeyAliasForm(),
        "rule_form": forms.get("rule_form") or AllocationRuleForm(initial={"priority": 100}),
        "alias_action": reverse("allocation_alias_create"),
        "rule_action": reverse("allocation_rule_create"),
        "preview_max_lines": services_allocation.PREVIEW_MAX_LINES,
        "alias_preview": forms.get("alias_preview"),
        "rule_preview": forms.get("rule_preview"),
        **_run_context(run),
    }
    return render(request, PAGE, context)


def _saved(request: HttpRequest, message: str, run: AttributionRun) -> HttpResponse:
    messages.success(request, f"{message} Re-attributing the history now.")
    return redirect_after_save(request, f"{reverse('allocation')}?run={run.pk}#reattribution")


def _change_form(
    request: HttpRequest, *, form, preview, kind: str, action: str, title: str
) -> HttpResponse:
    """The form with its preview: in place for htmx; else the edit page, or the whole
    allocation page for a new alias or rule."""
    context = {
        "form": form,
        "preview": preview,
        "kind": kind,
        "action": action,
        "title": title,
        "preview_max_lines": services_allocation.PREVIEW_MAX_LINES,
    }
    if request.htmx:
        return render(request, f"{FORM}#change-form", context)
    if form.instance.pk:
        return render(request, FORM, context)
    return _page(request, **{f"{kind}_form": form, f"{kind}_preview": preview})


@login_required
@staff_only
def allocation(request: HttpRequest) -> HttpResponse:
    return _page(request)


@login_required
@staff_only
def attribution_run_status(request: HttpRequest, attribution_run_pk: int) -> HttpResponse:
    run = get_object_or_404(AttributionRun, pk=attribution_run_pk)
    if not request.htmx:
        return redirect(f"{reverse('allocation')}?run={run.pk}#reattribution")
    response = render(request, f"{PAGE}#run-status", _run_context(run))
    if run.is_done:
        stopped = HttpResponseStopPolling(response.content)
        return stopped
    return response


# Tag key aliases ------------------------------------------------------------------------------


@login_required
@require_POST
@staff_only
def alias_create(request: HttpRequest) -> HttpResponse:
    form = TagKeyAliasForm(request.POST)
    preview = None
    if form.is_valid():
        if wants_preview(request.POST):
            preview = services_allocation.tag_key_alias_preview(alias=form.candidate())
        else:
            saved = project_services.tag_key_alias_create(
                dimension=form.cleaned_data["dimension"],
                key=form.cleaned_data["key"],
                created_by=request.user,
            )
            return _saved(request, f"Tag key alias “{saved.subject.key}” added.", saved.run)
    return _change_form(
        request,
        form=form,
        preview=preview,
        kind="alias",
        action=reverse("allocation_alias_create"),
        title="New tag key alias",
    )


@login_required
@staff_only
def alias_edit(request: HttpRequest, alias_pk: int) -> HttpResponse:
    alias = get_object_or_404(TagKeyAlias, pk=alias_pk)
    form = TagKeyAliasForm(request.POST or None, instance=copy.copy(alias))
    preview = None
    if request.method == "POST" and form.is_valid():
        if wants_preview(request.POST):
            preview = services_allocation.tag_key_alias_preview(
                alias=form.candidate(), original=alias
            )
        else:
            saved = project_services.tag_key_alias_update(
                alias=alias,
                dimension=form.cleaned_data["dimension"],
                key=form.cleaned_data["key"],
                created_by=request.user,
            )
            return _saved(request, f"Tag key alias “{saved.subject.key}” saved.", saved.run)
    return _change_form(
        request,
        form=form,
        preview=preview,
        kind="alias",
        action=reverse("allocation_alias_edit", args=[alias.pk]),
        title=f"Edit the tag key alias “{alias.key}”",
    )


@login_required
@require_POST
@staff_only
def alias_delete(request: HttpRequest, alias_pk: int) -> HttpResponse:
    alias = get_object_or_404(TagKeyAlias, pk=alias_pk)
    saved = project_services.tag_key_alias_delete(alias=alias, created_by=request.user)
    return _saved(request, f"Tag key alias “{alias.key}” deleted.", saved.run)


# Allocation rules -----------------------------------------------------------------------------


@login_required
@require_POST
@staff_only
def rule_create(request: HttpRequest) -> HttpResponse:
    form = AllocationRuleForm(request.POST)
    preview = None
    if form.is_valid():
        if wants_preview(request.POST):
            preview = services_allocation.allocation_rule_preview(rule=form.candidate())
        else:
            saved = project_services.allocation_rule_create(
                **form.rule_values(), created_by=request.user
            )
            return _saved(request, f"Allocation rule “{saved.subject.name}” added.", saved.run)
    return _change_form(
        request,
        form=form,
        preview=preview,
        kind="rule",
        action=reverse("allocation_rule_create"),
        title="New allocation rule",
    )


@login_required
@staff_only
def rule_edit(request: HttpRequest, rule_pk: int) -> HttpResponse:
    rule = get_object_or_404(AllocationRule, pk=rule_pk)
    form = AllocationRuleForm(request.POST or None, instance=copy.copy(rule))
    preview = None
    if request.method == "POST" and form.is_valid():
        if wants_preview(request.POST):
            preview = services_allocation.allocation_rule_preview(
                rule=form.candidate(), original=rule
            )
        else:
            saved = project_services.allocation_rule_update(
                rule=rule, **form.rule_values(), created_by=request.user
            )
            return _saved(request, f"Allocation rule “{saved.subject.name}” saved.", saved.run)
    return _change_form(
        request,
        form=form,
        preview=preview,
        kind="rule",
        action=reverse("allocation_rule_edit", args=[rule.pk]),
        title=f"Edit the allocation rule “{rule.name}”",
    )


@login_required
@require_POST
@staff_only
def rule_delete(request: HttpRequest, rule_pk: int) -> HttpResponse:
    rule = get_object_or_404(AllocationRule, pk=rule_pk)
    saved = project_services.allocation_rule_delete(rule=rule, created_by=request.user)
    return _saved(request, f"Allocation rule “{rule.name}” deleted.", saved.run)
