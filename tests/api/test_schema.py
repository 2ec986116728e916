"""The served OpenAPI schema, the offline docs page, and a Schemathesis run against the schema
as the live server serves it: whatever it sends, the API never answers 5xx."""

import re

import pytest
import schemathesis
from django.test import Client
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from apps.accounts.services import api_token_create
from tests.factories import DeploymentFactory, ExperimentFactory, ModelFactory

SCHEMA_URL = "/api/v1/openapi.json"
DOCS_URL = "/api/v1/docs"


@pytest.mark.django_db
def test_the_schema_is_served_to_a_logged_in_user_and_names_every_operation(member_client):
    schema = member_client.get(SCHEMA_URL).json()
    assert schema["info"]["title"] == "costsite API"
    operations = {
        (method.upper(), path) for path, methods in schema["paths"].items() for method in methods
    }
    base = "/api/v1/projects/{slug}"
    assert operations == {
        ("GET", "/api/v1/projects"),
        ("PUT", base + "/experiments/{external_id}"),
        ("GET", base + "/experiments/{external_id}"),
        ("POST", base + "/experiments/{external_id}/metrics"),
        ("GET", base + "/experiments/{external_id}/metrics"),
        ("PUT", base + "/models/{external_id}"),
        ("GET", base + "/models/{external_id}"),
        ("PUT", base + "/deployments/{external_id}"),
        ("GET", base + "/deployments/{external_id}"),
        ("POST", base + "/deployments/{external_id}/traffic"),
        ("POST", base + "/deployments/{external_id}/traffic/log"),
        ("GET", base + "/deployments/{external_id}/traffic"),
        ("GET", "/api/v1/host-mappings"),
        ("PUT", "/api/v1/host-mappings/{host}"),
        ("GET", "/api/v1/host-mappings/{host}"),
        ("DELETE", "/api/v1/host-mappings/{host}"),
        ("GET", "/api/v1/model-api-keys"),
        ("PUT", "/api/v1/model-api-keys/{key}"),
        ("GET", "/api/v1/model-api-keys/{key}"),
        ("DELETE", "/api/v1/model-api-keys/{key}"),
        ("GET", base + "/spend"),
        ("GET", base + "/experiments/{external_id}/spend"),
        ("GET", base + "/deployments/{external_id}/spend"),
        ("GET", base + "/models/{external_id}/spend"),
        ("GET", base + "/deployments/{external_id}/build-or-call"),
        ("GET", "/api/v1/findings"),
        ("GET", "/api/v1/findings/{finding_id}"),
        ("POST", "/api/v1/findings/{finding_id}/status"),
    }
    assert schema["components"]["securitySchemes"] == {
        "BearerToken": {"type": "http", "scheme": "bearer"}
    }
    put = schema["paths"][base + "/experiments/{external_id}"]["put"]
    assert set(put["responses"]) == {"200", "201", "400", "401", "404"}


@pytest.mark.django_db
def test_the_schema_and_docs_need_a_login(client):
    for url in (SCHEMA_URL, DOCS_URL):
        response = client.get(url)
        assert (response.status_code, response["Location"]) == (302, f"/login/?next={url}")


@pytest.mark.django_db
def test_the_docs_page_loads_swagger_ui_from_our_own_static_files_under_the_csp(member_client):
    response = member_client.get(DOCS_URL)
    page = response.content.decode()
    scripts = re.findall(r"<script([^>]*)>", page)
    assert scripts == [
        ' type="application/json" id="swagger-settings"',
        ' src="/static/ninja/swagger-ui-bundle.js"',
        ' src="/static/ninja/swagger-ui-init.js"',
    ]
    assert "cdn" not in page.lower()
    assert '"validatorUrl": null' in page
    assert "script-src 'self'" in response["Content-Security-Policy"]
    assert "unsafe-eval" not in response["Content-Security-Policy"]


BASE = "/api/v1/projects/{slug}"
OPERATIONS = [
    ("GET", "/api/v1/projects"),
    ("PUT", BASE + "/experiments/{external_id}"),
    ("GET", BASE + "/experiments/{external_id}"),
    ("POST", BASE + "/experiments/{external_id}/metrics"),
    ("GET", BASE + "/experiments/{external_id}/metrics"),
    ("PUT", BASE + "/models/{external_id}"),
    ("GET", BASE + "/models/{external_id}"),
    ("PUT", BASE + "/deployments/{external_id}"),
    ("GET", BASE + "/deployments/{external_id}"),
    ("POST", BASE + "/deployments/{external_id}/traffic"),
    ("POST", BASE + "/deployments/{external_id}/traffic/log"),
    ("GET", BASE + "/deployments/{external_id}/traffic"),
    ("GET", "/api/v1/host-mappings"),
    ("PUT", "/api/v1/host-mappings/{host}"),
    ("GET", "/api/v1/host-mappings/{host}"),
    ("DELETE", "/api/v1/host-mappings/{host}"),
    ("GET", "/api/v1/model-api-keys"),
    ("PUT", "/api/v1/model-api-keys/{key}"),
    ("GET", "/api/v1/model-api-keys/{key}"),
    ("DELETE", "/api/v1/model-api-keys/{key}"),
    ("GET", BASE + "/spend"),
    ("GET", BASE + "/experiments/{external_id}/spend"),
    ("GET", BASE + "/deployments/{external_id}/spend"),
    ("GET", BASE + "/models/{external_id}/spend"),
    ("GET", BASE + "/deployments/{external_id}/build-or-call"),
    ("GET", "/api/v1/findings"),
    ("GET", "/api/v1/findings/{finding_id}"),
    ("POST", "/api/v1/findings/{finding_id}/status"),
]
EXISTING = {"experiments": "fuzzed-run", "deployments": "fuzzed-serving", "models": "fuzzed-model"}
# Bounded so that the whole run stays well under a minute.
EXAMPLES = 12


def test_the_fuzzed_operations_are_the_served_ones():
    from apps.api.api import api

    served = api.get_openapi_schema(path_prefix="/api/v1/")["paths"]
    assert {(m.upper(), p) for p, methods in served.items() for m in methods} == set(OPERATIONS)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[" ".join(op) for op in OPERATIONS])
def test_generated_calls_never_get_a_server_error(live_server, lead, project, method, path):
    # Rows to find, so that generated calls also reach the services and not only the 404s.
    ExperimentFactory(project=project, external_id=EXISTING["experiments"])
    DeploymentFactory(project=project, external_id=EXISTING["deployments"])
    ModelFactory(project=project, external_id=EXISTING["models"])
    # A lead: it registers runs and also maintains host mappings.
    token = api_token_create(user=lead, name="schemathesis").secret
    browser = Client()
    browser.force_login(lead)
    schema = schemathesis.openapi.from_url(
        live_server.url + SCHEMA_URL,
        headers={"Cookie": f"sessionid={browser.cookies['sessionid'].value}"},
    )
    operation = schema[path][method]
    # Generated path values (mostly unknown: 404s), and the real project with the rows above.
    targets = [None]
    if "{slug}" in path:
        targets.append({"slug": project.slug})
    if "{external_id}" in path:
        kind = path.split("/")[5]  # /api/v1/projects/{slug}/<kind>/{external_id}
        targets.append({"slug": project.slug, "external_id": EXISTING[kind]})
    failures = []
    for target in targets:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            strategy = operation.as_strategy(generation_mode=mode, path_parameters=target)

            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            @given(case=strategy)
            def call(case):
                response = case.call(headers={"Authorization": f"Bearer {token}"})
                case.validate_response(response, checks=[not_a_server_error])

            try:
                call()
            except Exception as error:  # noqa: BLE001 - gathered to report every failing mode
                failures.append(f"{mode.value} with path {target}: {error}")
    assert failures == []
