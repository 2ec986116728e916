"""The digest settings page, the preview of the next digest, and the one-click unsubscribe."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt

from apps.projects.selectors import projects_visible_to

from . import services
from .emails import unsubscribe_user_id
from .forms import SubscriptionForm


@login_required
def digest_settings(request: HttpRequest) -> HttpResponse:
    subscription = services.subscription_for(user=request.user)
    projects = projects_visible_to(user=request.user).order_by("name")
    form = SubscriptionForm(request.POST or None, instance=subscription, projects=projects)
    if request.method == "POST" and form.is_valid():
        services.subscription_update(
            subscription=subscription,
            active=form.cleaned_data["active"],
            frequency=form.cleaned_data["frequency"],
            projects=list(form.cleaned_data["projects"]),
            minimum_amount=form.cleaned_data["minimum_amount"],
        )
        messages.success(request, "Your digest settings are saved.")
        return redirect("digest_settings")
    return render(request, "digests/settings.html", {"form": form, "subscription": subscription})


@login_required
def digest_preview(request: HttpRequest) -> HttpResponse:
    """The next digest exactly as it will be mailed: its HTML part as it is, or its text part."""
    subject, text, html = services.digest_preview(user=request.user)
    if request.GET.get("part") == "text":
        return HttpResponse(text, content_type="text/plain; charset=utf-8")
    response = HttpResponse(html)
    response["X-Digest-Subject"] = subject.encode("ascii", "replace").decode()
    return response


# A mail client's one-click unsubscribe (RFC 8058) POSTs without a session or a CSRF token; the
# signed, expiring token in the URL is what authorises it.
@csrf_exempt
def digest_unsubscribe(request: HttpRequest, token: str) -> HttpResponse:
    user_id = unsubscribe_user_id(token)
    if user_id is None:
        return render(request, "digests/unsubscribe.html", {"invalid": True}, status=400)
    if request.method == "POST":
        services.subscription_unsubscribe(user_id=user_id)
        return render(request, "digests/unsubscribe.html", {"done": True})
    return render(request, "digests/unsubscribe.html", {"token": token})
