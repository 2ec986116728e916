"""The model API keys' mapping page (staff and team leads): the keys billed that nothing maps,
the mappings, and their changes, each re-attributing the key's history."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from apps.accounts.guards import staff_or_lead_only
from apps.accounts.models import Organization
from apps.projects.selectors import projects_editable_by
from costsite.htmx import form_page, redirect_after_save

from . import selectors_model_api_keys as selectors
from . import services_model_api_keys as services
from .forms_model_api_keys import KeyMappingForm
from .models import ModelApiKey

SINCE_DAYS = 30


def _mapping_for(request: HttpRequest, pk: int) -> ModelApiKey:
    try:
        return services.key_mappings_editable_by(user=request.user).get(pk=pk)
    except ModelApiKey.DoesNotExist:
        raise Http404("No such mapping that you may change.") from None


def _saved(request: HttpRequest, mapping: ModelApiKey) -> None:
    messages.success(
        request,
        f"{mapping.key} now maps to {mapping.deployment or mapping.project}: its history is "
        "being attributed again.",
    )


@login_required
@staff_or_lead_only
def key_mapping_list(request: HttpRequest) -> HttpResponse:
    projects = projects_editable_by(user=request.user)
    initial = {"key": request.GET.get("key", "")}
    if request.GET.get("kind") in ModelApiKey.Kind.values:
        initial["kind"] = request.GET["kind"]
    form = KeyMappingForm(request.POST or None, projects=projects, initial=initial)
    if request.method == "POST" and form.is_valid():
        arguments = form.mapping_arguments()
        if services.key_mapping_of(arguments["key"]) is not None:
            form.add_error("key", "This key is mapped already: edit its mapping in the list below.")
        else:
            try:
                mapping = services.key_mapping_create(created_by=request.user, **arguments)
            except services.KeyMappingError as error:
                form.add_error(None, str(error))
            else:
                if mapping is not None:
                    _saved(request, mapping)
                    return redirect_after_save(request, reverse("model_api_key_list"))
                form.add_error(
                    "key", "This key is mapped already: edit its mapping in the list below."
                )
    # The last 30 days of model API spend loaded (the bill lags the calendar).
    since = selectors.recent_since(days=SINCE_DAYS) or timezone.now().date()
    editable = set(
        services.key_mappings_editable_by(user=request.user).values_list("pk", flat=True)
    )
    currency = Organization.get().currency
    context = {
        "form": form,
        "currency": currency,
        "unmapped": selectors.unmapped_keys(since=since),
        "mappings": selectors.key_mapping_rows(
            editable_ids=editable, since=since, currency=currency
        ),
        "since_days": SINCE_DAYS,
    }
    if request.htmx and request.method == "POST":
        return render(request, "billing/model_api_keys.html#mapping-form", context)
    return render(request, "billing/model_api_keys.html", context)


@login_required
@staff_or_lead_only
def key_mapping_edit(request: HttpRequest, key_mapping_pk: int) -> HttpResponse:
    mapping = _mapping_for(request, key_mapping_pk)
    form = KeyMappingForm(
        request.POST or None,
        projects=projects_editable_by(user=request.user),
        initial=KeyMappingForm.initial_for(mapping),
    )
    if request.method == "POST" and form.is_valid():
        arguments = form.mapping_arguments()
        other = services.key_mapping_of(arguments["key"])
        if other is not None and other.pk != mapping.pk:
            form.add_error("key", "This key is mapped already: edit its mapping in the list.")
        else:
            try:
                mapping = services.key_mapping_update(
                    mapping=mapping, changed_by=request.user, **arguments
                )
            except services.KeyMappingError as error:
                form.add_error(None, str(error))
            else:
                _saved(request, mapping)
                return redirect_after_save(request, reverse("model_api_key_list"))
    list_url = reverse("model_api_key_list")
    return form_page(
        request,
        form=form,
        title=f"Edit the mapping of {mapping.key}",
        submit_label="Save mapping",
        cancel_url=list_url,
        breadcrumbs=[("Model API keys", list_url)],
    )


@login_required
@staff_or_lead_only
@require_POST
def key_mapping_delete(request: HttpRequest, key_mapping_pk: int) -> HttpResponse:
    mapping = _mapping_for(request, key_mapping_pk)
    services.key_mapping_delete(mapping=mapping, deleted_by=request.user)
    messages.success(request, f"{mapping.key} is no longer mapped: its spend is unattributed.")
    return redirect("model_api_key_list")
