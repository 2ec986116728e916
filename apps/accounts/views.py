from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from . import selectors, services
from .forms import ApiTokenForm


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
