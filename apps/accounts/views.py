from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from . import selectors, services
from .forms import ApiTokenForm


def login_locked_out(request: HttpRequest, response=None, credentials=None) -> HttpResponse:
    """django-axes' answer to a login refused by the throttle: the login page, with why (429)."""
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    return render(
        request,
        "registration/login.html",
        {
            "form": AuthenticationForm(request),
            "next": request.POST.get("next", ""),
            "locked_out": (
                f"Too many failed logins for this user name or from this address: logging in is "
                f"locked for {minutes} minutes. Wait, then try again, or ask staff to unlock it."
            ),
        },
        status=429,
    )


def _token_page(request: HttpRequest, *, form: ApiTokenForm, issued=None) -> HttpResponse:
    template = "accounts/token_list.html#tokens" if request.htmx else "accounts/token_list.html"
    return render(
        request,
        template,
        {"form": form, "issued": issued, "tokens": selectors.api_tokens_of(user=request.user)},
    )


@login_required
def token_list(request: HttpRequest) -> HttpResponse:
    """The user's tokens; a POST creates one and shows its secret in this response only (no
    redirect: the secret must not travel through a session or a message to be shown later)."""
    form = ApiTokenForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        issued = services.api_token_create(user=request.user, name=form.cleaned_data["name"])
        return _token_page(request, form=ApiTokenForm(), issued=issued)
    return _token_page(request, form=form)


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_pk: int) -> HttpResponse:
    token = selectors.api_token_for_user(user=request.user, pk=token_pk)
    services.api_token_revoke(token=token)
    messages.success(request, f"Token “{token.name}” ({token.prefix}…) revoked.")
    if request.htmx:
        return _token_page(request, form=ApiTokenForm())
    return redirect("token_list")
