"""The registration API at /api/v1/: training scripts and serving stacks tell costsite what they
run. django-ninja builds the OpenAPI schema (/api/v1/openapi.json) and serves Swagger UI from its
own static files (/api/v1/docs), so the docs work offline and under the strict CSP: the page's
settings are a JSON data block and its scripts are static files served by the site itself.

Errors are always JSON: 400 with messages by field, 401 without a valid token, 404 for what the
token's user may not see (the pages' rule: never 403).
"""

import json

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from ninja import NinjaAPI, Swagger
from ninja.errors import AuthenticationError
from ninja.errors import ValidationError as NinjaValidationError

from .auth import BearerToken
from .routers import (
    build_or_call,
    deployments,
    experiments,
    findings,
    host_mappings,
    model_api_keys,
    models,
    projects,
    spend,
)


class LocalSwagger(Swagger):
    """Swagger UI from the site's own static files. django-ninja serves them only when "ninja"
    is an installed app (else its CDN page); costsite finds its templates and static files by
    path instead (costsite/settings.py, NINJA_DIR), so this renders the local page itself."""

    def render_page(self, request: HttpRequest, api: NinjaAPI, **kwargs) -> HttpResponse:
        self.settings["url"] = self.get_openapi_url(api, kwargs)
        context = {
            "swagger_settings": json.dumps(self.settings, indent=1),
            "api": api,
            "add_csrf": isinstance(api.auth, list | tuple)
            and any(getattr(auth, "csrf", False) for auth in api.auth),
        }
        return render(request, self.template, context)


api = NinjaAPI(
    title="costsite API",
    version="1",
    description="Register runs, their resources and metrics, models, deployments and their "
    "hourly traffic, map GPU hosts to billed resources, and read spend. Authenticate with "
    "`Authorization: Bearer <token>`; create tokens on the API tokens page. A token sees what "
    "its user sees.",
    urls_namespace="api",
    auth=BearerToken(),
    openapi_url="/openapi.json",
    docs_url="/docs",
    # The validator badge would fetch from the internet; the dashboard must work without it.
    # (A token typed into "Authorize" is not kept in the browser's storage: the default.)
    docs=LocalSwagger(settings={"validatorUrl": None}),
    # The schema and the docs are pages like any other: a login shows them.
    docs_decorator=login_required,
)
api.add_router("/projects", projects.router)
api.add_router("/projects", experiments.router)
api.add_router("/projects", models.router)
api.add_router("/projects", deployments.router)
api.add_router("/projects", spend.router)
api.add_router("/projects", build_or_call.router)
api.add_router("/host-mappings", host_mappings.router)
api.add_router("/model-api-keys", model_api_keys.router)
api.add_router("/findings", findings.router)


def _field_key(loc: tuple) -> str:
    # ("body", "payload", "resources", 1, "ended_at") -> "resources.1.ended_at"
    parts = list(loc)
    source = parts.pop(0) if parts else "body"
    if source == "body" and parts:
        parts.pop(0)  # the view's parameter name, not part of the JSON the client sent
    return ".".join(str(part) for part in parts) or source


def _invalid(request: HttpRequest, errors: dict[str, list[str]]) -> HttpResponse:
    count = sum(len(messages) for messages in errors.values())
    detail = "1 field is invalid." if count == 1 else f"{count} problems in the input."
    return api.create_response(request, {"detail": detail, "errors": errors}, status=400)


@api.exception_handler(NinjaValidationError)
def _schema_errors(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    errors: dict[str, list[str]] = {}
    for error in exc.errors:
        message = error["msg"].removeprefix("Value error, ")
        errors.setdefault(_field_key(tuple(error["loc"])), []).append(message)
    return _invalid(request, errors)


# Names the services use for fields that the API calls otherwise.
SERVICE_FIELDS = {"__all__": "body"}


@api.exception_handler(DjangoValidationError)
def _rule_errors(request: HttpRequest, exc: DjangoValidationError) -> HttpResponse:
    errors = {
        SERVICE_FIELDS.get(field, field): [str(message) for message in messages]
        for field, messages in exc.message_dict.items()
    }
    return _invalid(request, errors)


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return api.create_response(request, {"detail": str(exc) or "Not found."}, status=404)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    response = api.create_response(request, {"detail": exc.message}, status=401)
    response["WWW-Authenticate"] = 'Bearer realm="costsite"'
    return response
