"""Every URL of the site needs a login, and an outsider gets 404 on every object of another team.

The test walks the resolver recursively, so URLs that later issues add are checked without anyone
remembering to. To build a URL it needs a sample value for each of its kwargs: SAMPLES maps a kwarg
name to how to get one from `OtherTeam` (objects of a team the outsider is not in). A pattern with a
kwarg SAMPLES does not know fails with a message saying what to add; a new kind of team object gets
a cached property on OtherTeam and a line in SAMPLES.

Conventions the map relies on: `slug` is a project's slug; `<thing>_pk` is the primary key of a
thing; `external_id` is the id a script registered an experiment, model or deployment under (the
other team's three share one). Kwargs of objects that belong to no team (Django admin's, staff-only
settings) are marked `team_scoped=False`: for those only the login rule is checked.

The REST API (namespace `api`) answers a missing token with 401, not a redirect to the login page,
and is checked with tokens: the tests at the end.
"""

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from apps.accounts.models import Membership
from apps.accounts.services import api_token_create
from apps.gpu.models import Gpu, HostMapping
from tests.factories import (
    DeploymentFactory,
    ExperimentFactory,
    ExperimentResourceFactory,
    MembershipFactory,
    ModelFactory,
    ProjectFactory,
    TeamFactory,
    UserFactory,
)

# Reachable without logging in, by design.
# The digests' one-click unsubscribe: its signed, expiring token is the authorisation (RFC 8058).
PUBLIC = {"login", "logout", "health", "admin:login", "admin:logout", "digest_unsubscribe"}


class OtherTeam:
    """A team the outsider is not in, and one object of each kind, built on first use."""

    @cached_property
    def team(self):
        return TeamFactory(name="Hidden team", slug="hidden-team")

    @cached_property
    def project(self):
        return ProjectFactory(team=self.team, name="Hidden project", slug="hidden-project")

    @cached_property
    def model(self):
        return ModelFactory(project=self.project, name="hidden-model", external_id="hidden")

    @cached_property
    def experiment(self):
        return ExperimentFactory(
            project=self.project, model=self.model, name="hidden-run", external_id="hidden"
        )

    @cached_property
    def deployment(self):
        return DeploymentFactory(
            project=self.project, model=self.model, name="hidden-serving", external_id="hidden"
        )

    @cached_property
    def instance_id(self) -> str:
        """An instance the team's run registered: GPUs on it, and mappings to it, are the team's."""
        return ExperimentResourceFactory(
            experiment=self.experiment, resource_id="i-0hidden"
        ).resource_id

    @cached_property
    def gpu(self):
        return Gpu.objects.create(uuid="GPU-hidden", host=self.instance_id)

    @cached_property
    def host_mapping(self):
        return HostMapping.objects.create(host="hidden-node", resource_id=self.instance_id)

    @cached_property
    def key_mapping(self):
        from apps.billing.models import ModelApiKey

        return ModelApiKey.objects.create(key="sk-hidden", project=self.project)

    @cached_property
    def traffic_source(self):
        from apps.gpu.models import TrafficSource

        return TrafficSource.objects.create(
            deployment=self.deployment, url="http://prometheus:9090", requests_query="up"
        )

    @cached_property
    def finding(self):
        from apps.insights.models import Finding

        return Finding.objects.create(
            kind="idle_gpu",
            subject_key=self.instance_id,
            resource_id=self.instance_id,
            project=self.project,
            reason="GPU idle 90% of 10 billed hours",
        )

    @cached_property
    def external_id(self) -> str:
        """The external id the team's experiment, model and deployment were all registered as."""
        ids = {self.experiment.external_id, self.deployment.external_id, self.model.external_id}
        assert len(ids) == 1
        return ids.pop()

    @cached_property
    def member(self):
        return MembershipFactory(
            team=self.team, user=UserFactory(username="hidden-member"), role=Membership.Role.MEMBER
        ).user

    @cached_property
    def lead(self):
        return MembershipFactory(
            team=self.team, user=UserFactory(username="hidden-lead"), role=Membership.Role.LEAD
        ).user

    @cached_property
    def token(self):
        """An API token of one of the team's members."""
        return api_token_create(user=self.member, name="hidden token").token


@dataclass(frozen=True)
class Sample:
    value: Callable[[OtherTeam], object]
    team_scoped: bool = True


SAMPLES: dict[str, Sample] = {
    "slug": Sample(lambda other: other.project.slug),
    "experiment_pk": Sample(lambda other: other.experiment.pk),
    "model_pk": Sample(lambda other: other.model.pk),
    "deployment_pk": Sample(lambda other: other.deployment.pk),
    "external_id": Sample(lambda other: other.external_id),
    # A token belongs to a user, not a team; the user is in the other team.
    "token_pk": Sample(lambda other: other.token.pk),
    "gpu_pk": Sample(lambda other: other.gpu.pk),
    "mapping_pk": Sample(lambda other: other.host_mapping.pk),
    "key_mapping_pk": Sample(lambda other: other.key_mapping.pk),
    "finding_pk": Sample(lambda other: other.finding.pk),
    "finding_id": Sample(lambda other: other.finding.pk),
    # A deployment's Prometheus traffic source: its team's.
    "traffic_source_pk": Sample(lambda other: other.traffic_source.pk),
    # GPU metric sources and MLflow servers are the installation's, staff's to change: they
    # belong to no team.
    "source_pk": Sample(lambda other: 1, team_scoped=False),
    # Billing import runs are the installation's, staff's only: they belong to no team.
    "run_pk": Sample(lambda other: 1, team_scoped=False),
    # The allocation page's aliases, rules and re-attribution runs: staff only, the
    # installation's.
    "alias_pk": Sample(lambda other: 1, team_scoped=False),
    "rule_pk": Sample(lambda other: 1, team_scoped=False),
    "attribution_run_pk": Sample(lambda other: 1, team_scoped=False),
    # A GPU host in the API's host mappings: they belong to no team.
    "host": Sample(lambda other: "gpu-node-7", team_scoped=False),
    # A model API key in the API's key mappings: any lead reads them (a lead changes its own).
    "key": Sample(lambda other: "sk-hidden", team_scoped=False),
    # Django admin's own URLs: staff only, and admin answers everybody else itself.
    "app_label": Sample(lambda other: "projects", team_scoped=False),
    "object_id": Sample(lambda other: "1", team_scoped=False),
    "content_type_id": Sample(lambda other: 1, team_scoped=False),
    "id": Sample(lambda other: "1", team_scoped=False),
    # A digest's signed unsubscribe token: the page needs no login (PUBLIC).
    "token": Sample(lambda other: "not-a-token", team_scoped=False),
}


@dataclass(frozen=True)
class Route:
    name: str  # with its namespace: "admin:index"
    pattern: str
    kwargs: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.name} ({self.pattern})"

    @property
    def team_scoped(self) -> bool:
        return any(SAMPLES[kwarg].team_scoped for kwarg in self.kwargs)

    @property
    def is_api_endpoint(self) -> bool:
        """An operation of the REST API (its schema and docs are pages like the others)."""
        return self.name.startswith("api:") and self.name not in API_PAGES

    def url(self, other: OtherTeam) -> str:
        kwargs = {kwarg: SAMPLES[kwarg].value(other) for kwarg in self.kwargs}
        return reverse(self.name, kwargs=kwargs)


def _walk(patterns, prefix: str = "", namespace: str = "", kwargs: tuple = ()):
    for entry in patterns:
        here = prefix + str(entry.pattern)
        names = kwargs + tuple(entry.pattern.regex.groupindex)
        if isinstance(entry, URLResolver):
            inner = (
                f"{namespace}:{entry.namespace}"
                if namespace and entry.namespace
                else (entry.namespace or namespace)
            )
            yield from _walk(entry.url_patterns, here, inner, names)
        elif isinstance(entry, URLPattern):
            name = f"{namespace}:{entry.name}" if namespace and entry.name else entry.name
            yield here, name, namespace, names


def _routes() -> tuple[list[Route], list[str]]:
    routes, problems = [], []
    static_prefix = settings.STATIC_URL.lstrip("/")
    for pattern, name, namespace, kwargs in _walk(get_resolver().url_patterns):
        if pattern.lstrip("^").startswith(static_prefix):
            continue
        if name is None:
            if namespace == "admin":
                # Admin's unnamed patterns are redirects to its named views and its catch-all,
                # all wrapped in admin's own login check.
                continue
            problems.append(f"{pattern}: give the URL pattern a name so this test can reverse it")
            continue
        unknown = [kwarg for kwarg in kwargs if kwarg not in SAMPLES]
        if unknown:
            problems.append(
                f"{name} ({pattern}): no sample for URL kwarg(s) {', '.join(unknown)}; add them "
                "to SAMPLES in tests/test_urls.py (and the object to OtherTeam if it belongs to a "
                "team)"
            )
            continue
        routes.append(Route(name=name, pattern=pattern, kwargs=tuple(dict.fromkeys(kwargs))))
    return routes, problems


# The REST API's schema and browsable docs: pages behind the login like the rest of the site.
API_PAGES = {"api:openapi-json", "api:openapi-view"}
# django-ninja's root route, there only so that its URL can be reversed: a 404 for everybody.
API_PLACEHOLDERS = {"api:api-root"}

ROUTES, PROBLEMS = _routes()
ROUTES = [route for route in ROUTES if route.name not in API_PLACEHOLDERS]
PAGES = [route for route in ROUTES if not route.is_api_endpoint]
API_ENDPOINTS = [route for route in ROUTES if route.is_api_endpoint]
GUARDED = [route for route in PAGES if route.name not in PUBLIC]
OBJECT_ROUTES = [route for route in PAGES if route.team_scoped]
API_OBJECT_ROUTES = [route for route in API_ENDPOINTS if route.team_scoped]


def test_every_url_pattern_can_be_checked():
    assert PROBLEMS == []


def test_the_walk_finds_the_pages_of_this_issue():
    """Guards the walk itself: if it found nothing, every test below would pass vacuously."""
    names = {route.name for route in ROUTES}
    assert {
        "home",
        "project_list",
        "project_create",
        "project_detail",
        "project_edit",
        "experiment_create",
        "experiment_detail",
        "experiment_edit",
        "model_create",
        "model_detail",
        "model_edit",
        "deployment_create",
        "deployment_detail",
        "deployment_edit",
        "token_list",
        "token_revoke",
        "api:openapi-json",
        "api:openapi-view",
        "api:experiment_put",
        "api:deployment_traffic_post",
        "admin:index",
        "login",
        "health",
    } <= names
    assert len(OBJECT_ROUTES) >= 12
    assert len(API_OBJECT_ROUTES) >= 10


@pytest.mark.django_db
@pytest.mark.parametrize("route", GUARDED, ids=str)
def test_every_url_needs_a_login(client, route):
    url = route.url(OtherTeam())
    response = client.get(url)
    assert response.status_code == 302, (
        f"{route}: anonymous GET {url} answered {response.status_code}"
    )
    login = reverse("admin:login") if route.name.startswith("admin:") else reverse("login")
    assert urlsplit(response["Location"]).path == login, (
        f"{route}: anonymous GET {url} redirected to {response['Location']}, not to the login page"
    )


@pytest.mark.django_db
@pytest.mark.parametrize("route", OBJECT_ROUTES, ids=str)
def test_an_outsider_gets_404_on_every_object_url_of_another_team(
    outsider_client, staff_client, route
):
    url = route.url(OtherTeam())
    response = outsider_client.get(url)
    method = "GET"
    if response.status_code == 405:  # an action that only takes POST
        method = "POST"
        response = outsider_client.post(url)
    assert response.status_code == 404, (
        f"{route}: the outsider's {method} {url} answered {response.status_code}, not 404"
    )
    # The same URL works for someone who may see the object, so the 404 above is the access
    # rule and not a broken URL.
    allowed = getattr(staff_client, method.lower())(url)
    assert allowed.status_code != 404, f"{route}: staff's {method} {url} answered 404 too"


@pytest.mark.django_db
def test_a_logged_in_user_who_is_not_staff_is_sent_to_the_admin_login(member_client):
    response = member_client.get(reverse("admin:index"))
    assert response.status_code == 302
    assert urlsplit(response["Location"]).path == reverse("admin:login")


@pytest.mark.django_db
@pytest.mark.parametrize("route", API_ENDPOINTS, ids=str)
def test_every_api_endpoint_answers_401_without_a_token(client, route):
    url = route.url(OtherTeam())
    response = _api_read_or_write(route, url, token=None)
    assert response.status_code == 401, f"{route}: {url} without a token answered {response}"
    assert response["WWW-Authenticate"] == 'Bearer realm="costsite"'


@pytest.mark.django_db
@pytest.mark.parametrize("route", API_OBJECT_ROUTES, ids=str)
def test_an_outsiders_token_gets_404_on_every_api_object_url_of_another_team(
    outsider, staff, route
):
    url = route.url(OtherTeam())
    outsider_token = api_token_create(user=outsider, name="outsider").secret
    staff_token = api_token_create(user=staff, name="staff").secret
    # A path that answers GET is read; the writes at the same paths go through the same look-up.
    # A path with only a write (a finding's status action) is sent its sample body.
    response = _api_read_or_write(route, url, token=outsider_token)
    assert response.status_code == 404, (
        f"{route}: the outsider's request of {url} answered {response.status_code}, not 404"
    )
    allowed = _api_read_or_write(route, url, token=staff_token)
    assert allowed.status_code == 200, f"{route}: staff's request of {url} answered {allowed}"


# ---- every method of the API, and who of a team may do what ----


def _api_methods() -> dict[str, list[str]]:
    """URL name -> the HTTP methods of its operation, as django-ninja registered them."""
    from apps.api.api import api

    return {
        f"api:{operation.view_func.__name__}": operation.methods
        for _, router in api._routers
        for path_view in router.path_operations.values()
        for operation in path_view.operations
    }


API_METHODS = _api_methods()
# A valid body for every API write, so that the access rule answers and not the schema.
WRITE_BODIES = {
    "api:experiment_put": {"name": "renamed"},
    "api:experiment_metrics_post": {"points": [{"step": 1, "values": {"loss": 1.5}}]},
    "api:model_put": {"name": "renamed"},
    "api:deployment_put": {"name": "renamed"},
    "api:deployment_traffic_post": {"hours": [{"hour": "2025-03-01T10:00:00Z", "requests": 1}]},
    # A multipart upload (FILE_WRITES): the CSV sent as the field `file`.
    "api:deployment_traffic_log_post": "timestamp\n2025-03-01T10:00:00Z\n",
    "api:host_mapping_put": {"resource_id": "i-0hidden"},
    "api:host_mapping_delete": None,
    "api:model_api_key_put": {"project": "hidden-project"},
    "api:model_api_key_delete": None,
    "api:finding_status": {"action": "acknowledge"},
}
API_WRITES = [
    route for route in API_ENDPOINTS if set(API_METHODS.get(route.name, ["GET"])) - {"GET"}
]


def _api_read_or_write(route: Route, url: str, *, token: str | None):
    """GET where the path answers GET, else the path's one write with its sample body."""

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if "GET" in API_METHODS.get(route.name, ["GET"]):
        return Client().get(url, headers=headers)
    (method,) = API_METHODS[route.name]
    return _send(route, method, url, WRITE_BODIES[route.name], headers)


FILE_WRITES = {"api:deployment_traffic_log_post"}


def _send(route: Route, method: str, url: str, body, headers: dict):
    """The write with its sample body: JSON, or the file of a multipart upload."""
    import json

    from django.core.files.uploadedfile import SimpleUploadedFile

    if route.name in FILE_WRITES:
        upload = SimpleUploadedFile("sample.csv", body.encode(), content_type="text/csv")
        return getattr(Client(), method.lower())(url, {"file": upload}, headers=headers)
    return getattr(Client(), method.lower())(
        url,
        json.dumps(body) if body is not None else None,
        content_type="application/json",
        headers=headers,
    )


def test_every_api_write_has_a_sample_body():
    assert {route.name for route in API_WRITES} == set(WRITE_BODIES), (
        "give each API write a valid body in WRITE_BODIES (tests/test_urls.py)"
    )


def _api_call(route: Route, url: str, token: str):

    (method,) = API_METHODS[route.name]
    return _send(
        route, method, url, WRITE_BODIES.get(route.name), {"Authorization": f"Bearer {token}"}
    )


@pytest.mark.django_db
@pytest.mark.parametrize("route", [r for r in API_WRITES if r.team_scoped], ids=str)
def test_an_outsiders_token_gets_404_on_every_api_write_of_another_team(outsider, staff, route):
    other = OtherTeam()
    url = route.url(other)
    outsider_token = api_token_create(user=outsider, name="outsider").secret
    response = _api_call(route, url, outsider_token)
    assert response.status_code == 404, f"{route}: the outsider's write answered {response}"
    allowed = _api_call(route, url, api_token_create(user=staff, name="staff").secret)
    assert allowed.status_code in {200, 201}, f"{route}: staff's write answered {allowed.content}"


# Who may use each page that needs a login (Django admin's own pages aside): "member" (any member
# of the team the object belongs to, or any logged-in user for pages of no object), "lead" (a
# lead of that team, or of any team for pages of no object) or "staff". A new URL without an entry
# fails the test below.
ACCESS = {
    "home": "member",
    "project_list": "member",
    "project_create": "lead",
    "project_detail": "member",
    "project_edit": "lead",
    "experiment_create": "member",
    "experiment_detail": "member",
    "experiment_edit": "member",
    "model_create": "member",
    "model_detail": "member",
    "model_edit": "member",
    "deployment_create": "member",
    "deployment_detail": "member",
    "deployment_edit": "member",
    "deployment_traffic_upload": "member",
    # A traffic source makes the server fetch a URL: the team's lead sets it up.
    "deployment_traffic_sources": "lead",
    "deployment_traffic_source_create": "lead",
    "deployment_traffic_source_edit": "lead",
    "deployment_traffic_source_pause": "lead",
    "deployment_traffic_source_poll": "lead",
    "project_spend_export": "member",
    "model_spend_export": "member",
    "experiment_spend_export": "member",
    "deployment_spend_export": "member",
    "overview_export": "member",
    "token_list": "member",
    "token_revoke": "member",  # the hidden team's member's own token
    "api:openapi-json": "member",
    "api:openapi-view": "member",
    "gpu_fleet": "member",
    "gpu_detail": "member",
    "gpu_host_mapping_list": "lead",
    "gpu_host_mapping_edit": "lead",
    "gpu_host_mapping_delete": "lead",
    "model_api_key_list": "lead",
    "model_api_key_edit": "lead",
    "model_api_key_delete": "lead",
    "unattributed": "lead",
    "storage": "member",
    "unattributed_export": "lead",
    "unattributed_claim": "lead",
    "gpu_source_list": "lead",  # leads read the sources; staff change them
    "gpu_source_create": "staff",
    "gpu_source_edit": "staff",
    "gpu_source_pause": "staff",
    "gpu_source_poll": "staff",
    "tracker_source_list": "staff",
    "tracker_source_create": "staff",
    "tracker_source_edit": "staff",
    "tracker_source_pause": "staff",
    "tracker_source_poll": "staff",
    "wandb_upload": "staff",
    "data_freshness": "lead",  # read-only: leads see how far the bill has got
    "billing_source_list": "staff",
    "billing_source_create": "staff",
    "billing_source_detail": "staff",
    "billing_source_edit": "staff",
    "billing_source_pause": "staff",
    "billing_source_poll": "staff",
    "billing_source_rerun": "staff",
    "import_list": "staff",
    "import_upload": "staff",
    "import_run_detail": "staff",
    "import_run_progress": "staff",
    "import_run_row": "staff",
    "allocation": "staff",
    "allocation_alias_create": "staff",
    "allocation_alias_edit": "staff",
    "allocation_alias_delete": "staff",
    "allocation_rule_create": "staff",
    "allocation_rule_edit": "staff",
    "allocation_rule_delete": "staff",
    "allocation_run_status": "staff",
    "waste": "member",
    "waste_csv": "member",
    "waste_bulk": "lead",
    "finding_detail": "member",
    "finding_action": "lead",
    "digest_settings": "member",
    "digest_preview": "member",
    "build_or_call_list": "member",
    "build_or_call_detail": "member",  # members preview; saving is the lead's (tested apart)
}
RULED = [route for route in GUARDED if not route.name.startswith("admin:")]


def test_every_page_says_who_may_use_it():
    missing = sorted({route.name for route in RULED} - set(ACCESS))
    gone = sorted(set(ACCESS) - {route.name for route in RULED})
    assert (missing, gone) == ([], []), "add (or drop) these in ACCESS in tests/test_urls.py"


def _answer(client: Client, url: str, htmx: bool = False):
    headers = {"HX-Request": "true"} if htmx else {}
    response = client.get(url, headers=headers)
    if response.status_code == 405:  # an action that only takes POST
        response = client.post(url, headers=headers)
    return response


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
@pytest.mark.parametrize(
    "route", [route for route in RULED if ACCESS.get(route.name) != "member"], ids=str
)
def test_a_member_gets_404_on_every_lead_and_staff_action(staff, route):
    """A member of the team the object belongs to, as a page and as the htmx partial."""
    other = OtherTeam()
    url = route.url(other)
    member = _client(other.member)
    for htmx in (False, True):
        response = _answer(member, url, htmx=htmx)
        assert response.status_code == 404, (
            f"{route}: the team's member's {'htmx ' if htmx else ''}request of {url} answered "
            f"{response.status_code}, not 404"
        )
    if ACCESS[route.name] == "staff":
        assert _answer(_client(other.lead), url).status_code == 404, f"{route}: a lead got in"
    if any(not SAMPLES[kwarg].team_scoped for kwarg in route.kwargs):
        return  # a sample id of the installation's objects (1): none exists to prove it on
    allowed_user = other.lead if ACCESS[route.name] == "lead" else staff
    allowed = _answer(_client(allowed_user), url)
    assert allowed.status_code != 404, f"{route}: {ACCESS[route.name]}'s request answered 404 too"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "route", [route for route in RULED if ACCESS.get(route.name) == "member"], ids=str
)
def test_a_member_of_the_team_may_use_every_member_page(route):
    other = OtherTeam()
    response = _answer(_client(other.member), route.url(other))
    assert response.status_code != 404, f"{route}: the team's member got 404"
    assert response.status_code < 500


@pytest.mark.django_db
@pytest.mark.parametrize("route", GUARDED, ids=str)
def test_every_htmx_partial_needs_a_login_too(client, route):
    url = route.url(OtherTeam())
    response = client.get(url, headers={"HX-Request": "true"})
    assert response.status_code == 302, f"{route}: anonymous htmx GET {url} answered {response}"
