"""The upload page and the imports pages (staff only; 404 for everybody else).

A run's progress polls itself: while the run is queued or running its partial carries
`hx-trigger="every 1s"`, and the response that finds it done answers 286
(HttpResponseStopPolling) with the final content, so the polling stops.
"""

from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseStopPolling, push_url

from apps.accounts.guards import staff_only
from costsite.htmx import redirect_after_save

from . import selectors_imports as selectors
from . import services
from .forms_imports import ImportFilterForm, UploadForm
from .models import ImportRun
from .uploads import BillingUploadHandler, display_name_clean, limit_text

RUNS_PER_PAGE = 25


def _run(request: HttpRequest, run_pk: int) -> ImportRun:
    try:
        return selectors.import_run_get(pk=run_pk)
    except ImportRun.DoesNotExist:
        raise Http404("No such import.") from None


def _polled(request: HttpRequest, template: str, context: dict, *, done: bool) -> HttpResponse:
    """A polled partial: 286 once the run is done, so htmx swaps it in and stops asking."""
    if done:
        return HttpResponseStopPolling(render_to_string(template, context, request=request))
    return render(request, template, context)


# Imports ----------------------------------------------------------------------------------------


@login_required
@require_GET
@staff_only
def import_list(request: HttpRequest) -> HttpResponse:
    filters = ImportFilterForm(request.GET)
    values = filters.values()
    page = Paginator(selectors.import_runs(**values), RUNS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    context = {
        "filters": filters,
        "page": page,
        "runs": selectors.import_run_views(runs=page.object_list),
        "query": urlencode(values),
        "filtered": bool(values),
    }
    template = "billing/imports/run_list.html"
    # Back or forward to an address htmx pushed, when its history cache misses, asks for the
    # page with HX-Request set too: it needs the whole page, not the rows.
    if not request.htmx or request.htmx.history_restore_request:
        response = render(request, template, context)
    else:
        # The address bar keeps only the filters that are set (the form sends the empty ones).
        state = {**values, **({"page": page.number} if page.number > 1 else {})}
        url = reverse("import_list") + (f"?{urlencode(state)}" if state else "")
        response = push_url(render(request, f"{template}#run-rows", context), url)
    # One address, two bodies: a cache must not hand the rows alone to a plain page load.
    patch_vary_headers(response, ("HX-Request",))
    return response


@login_required
@require_GET
@staff_only
def import_run_row(request: HttpRequest, run_pk: int) -> HttpResponse:
    """One row of the imports list, polled while its run is queued or running."""
    run = _run(request, run_pk)
    context = {"row": selectors.import_run_view(run=run)}
    return _polled(request, "billing/imports/run_list.html#run-row", context, done=run.is_done)


def _detail_context(run: ImportRun) -> dict:
    return {
        "row": selectors.import_run_view(run=run),
        "deliveries": selectors.import_run_deliveries(run=run) if run.is_done else [],
    }


@login_required
@require_GET
@staff_only
def import_run_detail(request: HttpRequest, run_pk: int) -> HttpResponse:
    run = _run(request, run_pk)
    return render(request, "billing/imports/run_detail.html", _detail_context(run))


@login_required
@require_GET
@staff_only
def import_run_progress(request: HttpRequest, run_pk: int) -> HttpResponse:
    """The run page's live part (progress, figures, and once done its deliveries or error)."""
    run = _run(request, run_pk)
    return _polled(
        request, "billing/imports/run_detail.html#run-live", _detail_context(run), done=run.is_done
    )


# Upload -----------------------------------------------------------------------------------------


@login_required
@csrf_exempt
@require_http_methods(["GET", "POST"])
@staff_only
def import_upload(request: HttpRequest) -> HttpResponse:
    """The upload handler must be in place before anything reads the body, the CSRF check
    included: so this view is exempt and the one it calls checks the token (Django's
    documented way of changing upload handlers in a view)."""
    if request.method != "POST":
        return _upload(request, None)
    handler = BillingUploadHandler(request)
    # Ours only: no other handler keeps any of the file in memory or in a temporary file.
    request.upload_handlers = [handler]
    try:
        return _upload(request, handler)
    finally:
        # Whatever no import took goes: a refused form, a failed CSRF check (which read the
        # body, so the file was written), extra files in the request.
        handler.discard()


@csrf_protect
def _upload(request: HttpRequest, handler: BillingUploadHandler | None) -> HttpResponse:
    form = UploadForm()
    if handler is not None:
        form = UploadForm(request.POST, request.FILES)
        valid = form.is_valid()
        if handler.error:
            form.errors["file"] = form.error_class([handler.error])
            valid = False
        if valid:
            upload = form.cleaned_data["file"]
            run = services.import_run_create(
                paths=[str(upload.path)],
                requested_format=form.cleaned_data["format"],
                display_name=display_name_clean(upload.original_name),
                created_by=request.user,
                origin=ImportRun.Origin.UPLOAD,
            )
            handler.keep(upload.path)
            services.import_run_enqueue(import_run=run)
            messages.success(request, f"“{run.display_name}” is uploaded; its import is queued.")
            return redirect_after_save(request, reverse("import_run_detail", args=[run.pk]))
    template = "billing/imports/upload.html"
    return render(
        request,
        f"{template}#upload-form" if request.htmx else template,
        {"form": form, "limit": limit_text(int(settings.BILLING_UPLOAD_MAX_BYTES))},
    )
