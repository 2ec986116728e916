"""The form page every create/edit view shares: the whole page for a plain request, only the form
(errors in place) for htmx, and a redirect that htmx follows as a full page load."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django_htmx.http import HttpResponseClientRedirect


def form_page(
    request: HttpRequest,
    *,
    form,
    title: str,
    submit_label: str,
    cancel_url: str,
    breadcrumbs: list[tuple[str, str]],
    intro: str = "",
) -> HttpResponse:
    template = "form_page.html#form" if request.htmx else "form_page.html"
    return render(
        request,
        template,
        {
            "form": form,
            "title": title,
            "submit_label": submit_label,
            "cancel_url": cancel_url,
            "breadcrumbs": breadcrumbs,
            "intro": intro,
        },
    )


def redirect_after_save(request: HttpRequest, url: str) -> HttpResponse:
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return redirect(url)
