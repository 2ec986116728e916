"""The waste page, a finding's page, their actions and the CSV export."""

import csv
from datetime import timedelta
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from apps.accounts.guards import staff_or_lead_only
from apps.accounts.models import Organization, Team
from apps.projects.selectors import projects_visible_to
from apps.spend.filters import SpendFilters, spend_filters_from
from costsite.paging import page_asked, page_window
from costsite.spreadsheet import neutralised

from . import selectors, selectors_part3, services
from .charts import evidence_chart
from .charts_levers import lever_chart
from .charts_part2 import part2_chart
from .charts_part3 import commitment_chart, coverage_chart, loss_chart
from .charts_storage import storage_chart
from .figures import page_fragment
from .forms import ActionForm, BulkForm, WasteFilterForm
from .models import INFERENCE_LEVER_KINDS, STORAGE_KINDS, Finding, Kind


def _filters(request: HttpRequest) -> SpendFilters:
    """The spend pages' period presets and custom range, and their team and project filters (all
    in the URL). Presets count back from the last day the bill covers, so the default "Last 30
    days" is the 30 days ending at its "data as of"; a range refused falls back to it."""
    user = request.user
    _start, end = selectors.default_period(
        as_of=selectors.data_as_of(), today=timezone.now().date()
    )
    teams = Team.objects.all() if user.is_staff else Team.objects.filter(memberships__user=user)
    return spend_filters_from(
        request.GET,
        today=end - timedelta(days=1),
        dimensions=("team", "project"),
        teams=teams.distinct().order_by("name"),
        projects=projects_visible_to(user=user).order_by("name"),
    )


def _waste_rows(request: HttpRequest):
    data = request.GET.copy()
    data.setdefault("status", "active")  # "Any status" is status= (empty)
    form = WasteFilterForm(data)
    filters = form.cleaned_data if form.is_valid() else {"status": "active"}
    spend = _filters(request)
    findings = selectors.findings_filtered(
        selectors.findings_visible_to(user=request.user),
        kind=filters.get("kind", ""),
        project=spend.project.slug if spend.project else "",
        team=spend.team.slug if spend.team else "",
        status=filters.get("status", ""),
        minimum=filters.get("minimum"),
    )
    return form, spend, findings


PAGE_SIZE = 50  # findings listed a page, the costliest first


@login_required
def waste(request: HttpRequest) -> HttpResponse:
    can_act = selectors.can_act_on_any(user=request.user)
    body = page_fragment(
        request,
        "waste-body",
        lambda: render_to_string(
            "insights/waste.html#waste-body", _waste_context(request, can_act), request=request
        ),
    )
    if request.htmx:
        return HttpResponse(body)
    return render(
        request, "insights/waste.html", {"waste_body": body, "query": request.GET.urlencode()}
    )


def _waste_context(request: HttpRequest, can_act: bool) -> dict:
    form, filters, findings = _waste_rows(request)
    start, end = filters.period.start, filters.period.end
    org = Organization.get()
    page = page_window(
        count=selectors.findings_count(findings), asked=page_asked(request.GET), per_page=PAGE_SIZE
    )
    # The list shows no evidence (a finding's page does): not read, nor the runs' and
    # deployments' tags.
    listed = findings.defer("evidence", "experiment__tags", "deployment__tags")
    rows = list(listed[page.offset : page.stop])
    period_wasted = selectors.wasted_in_period(
        findings=Finding.objects.filter(pk__in=[finding.pk for finding in rows]),
        start=start,
        end=end,
    )
    # The filters and range without the page: the pager's links add theirs.
    kept = request.GET.copy()
    kept.pop("page", None)
    return {
        "form": form,
        "filters": filters,
        # The waste filters of this page, kept by the period presets' links.
        "waste_query": urlencode(
            {key: form.data[key] for key in form.fields if form.data.get(key) not in (None, "")}
        ),
        "data_as_of": selectors.data_as_of(),
        "currency": org.currency,
        "rows": [(finding, period_wasted.get(finding.pk, {})) for finding in rows],
        "page": page,
        "page_query": kept.urlencode(),
        "totals": selectors.waste_totals(
            findings=findings, start=start, end=end, today=timezone.now().date()
        ),
        "can_act": can_act,
        "query": request.GET.urlencode(),
        "failed": selectors_part3.failed_wasted(
            findings=selectors.findings_visible_to(user=request.user), start=start, end=end
        ),
        "coverage_chart": coverage_chart(
            rows=selectors_part3.gpu_coverage(
                user=request.user, start=start, end=end, currency=org.currency
            ),
            currency=org.currency,
        ),
    }


@login_required
def waste_csv(request: HttpRequest) -> HttpResponse:
    _form, filters, findings = _waste_rows(request)
    start, end = filters.period.start, filters.period.end
    period_wasted = selectors.wasted_in_period(findings=findings, start=start, end=end)
    response = HttpResponse(content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="waste-{start or "all"}-{end}.csv"'
    writer = csv.writer(response)
    writer.writerow(
        [
            "id",
            "kind",
            "project",
            "resource_id",
            "status",
            "currency",
            "wasted_in_period",
            "wasted_since_first_seen",
            "savings_per_month",
            "reason",
            "first_seen",
            "last_seen",
        ]
    )
    for finding in findings:
        currencies = sorted(set(finding.wasted) | set(period_wasted.get(finding.pk, {})))
        for currency in currencies or [""]:
            writer.writerow(
                [
                    finding.pk,
                    finding.kind,
                    finding.project.slug if finding.project else "",
                    neutralised(finding.resource_id),
                    finding.status,
                    currency,
                    period_wasted.get(finding.pk, {}).get(currency, ""),
                    finding.wasted.get(currency, ""),
                    finding.savings_per_month.get(currency, ""),
                    neutralised(finding.reason),
                    finding.first_seen.isoformat() if finding.first_seen else "",
                    finding.last_seen.isoformat() if finding.last_seen else "",
                ]
            )
    return response


@login_required
def finding_detail(request: HttpRequest, finding_pk: int) -> HttpResponse:
    finding = selectors.finding_for_user(user=request.user, pk=finding_pk)
    currency = finding.evidence.get("currency") or Organization.get().currency
    if finding.kind == Kind.STALLED_RUN:
        chart = loss_chart(evidence=finding.evidence)
    elif finding.kind == Kind.UNUSED_COMMITMENT:
        chart = commitment_chart(evidence=finding.evidence, currency=currency)
    elif finding.kind in {Kind.SPOT_CANDIDATE, Kind.CHEAPER_REGION}:
        chart = None  # the price comparison table is the evidence
    elif finding.kind in INFERENCE_LEVER_KINDS:
        chart = lever_chart(finding=finding)
    elif finding.kind in STORAGE_KINDS:
        chart = storage_chart(evidence=finding.evidence, currency=currency)  # or its table
    else:
        hours = selectors.finding_hours(finding=finding)
        chart = part2_chart(finding=finding, hours=hours, currency=currency) or evidence_chart(
            hours=hours, currency=currency
        )
    context = {
        "finding": finding,
        "events": finding.events.select_related("by"),
        "chart": chart,
        "realised": selectors.realised_savings(finding=finding, as_of=selectors.data_as_of()),
        "can_act": selectors.can_act_on(user=request.user, finding=finding),
        "form": ActionForm(),
    }
    return render(request, "insights/finding_detail.html", context)


def _apply(*, finding, user, action: str, until, note: str) -> None:
    if action == "acknowledge":
        services.finding_acknowledge(finding=finding, by=user)
    elif action == "snooze":
        services.finding_snooze(finding=finding, by=user, until=until)
    elif action == "resolve":
        services.finding_resolve(finding=finding, by=user, note=note)
    else:
        services.finding_reopen(finding=finding, by=user, note=note)


@login_required
@require_POST
def finding_action(request: HttpRequest, finding_pk: int) -> HttpResponse:
    finding = selectors.finding_for_user(user=request.user, pk=finding_pk)
    if not selectors.can_act_on(user=request.user, finding=finding):
        raise Http404("No such finding.")
    form = ActionForm(request.POST)
    if not form.is_valid():
        for errors in form.errors.values():
            for error in errors:
                messages.error(request, error)
        return redirect("finding_detail", finding_pk=finding.pk)
    try:
        _apply(finding=finding, user=request.user, **form.cleaned_data)
    except services.WorkflowError as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"Finding {finding.get_status_display().lower()}.")
    return redirect("finding_detail", finding_pk=finding.pk)


@login_required
@require_POST
@staff_or_lead_only(message="Only staff and team leads act on findings.")
def waste_bulk(request: HttpRequest) -> HttpResponse:
    form = BulkForm(request.POST)
    back = reverse("waste") + (f"?{request.POST['query']}" if request.POST.get("query") else "")
    if not form.is_valid():
        messages.error(request, "Pick findings and an action (and a date to snooze until).")
        return redirect(back)
    done = 0
    for finding in selectors.findings_visible_to(user=request.user).filter(
        pk__in=form.cleaned_data["ids"]
    ):
        if not selectors.can_act_on(user=request.user, finding=finding):
            continue
        try:
            _apply(
                finding=finding,
                user=request.user,
                action=form.cleaned_data["action"],
                until=form.cleaned_data.get("until"),
                note="",
            )
        except services.WorkflowError:
            continue
        done += 1
    messages.success(request, f"{done} finding{'s' if done != 1 else ''} changed.")
    return redirect(back)
