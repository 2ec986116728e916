"""Every URL of the site needs a login, and an outsider gets 404 on every object of another team.

The test walks the resolver recursively, so URLs that later issues add are checked without anyone
remembering to. To build a URL it needs a sample value for each of its kwargs: SAMPLES maps a kwarg
name to how to get one from `OtherTeam` (objects of a team the outsider is not in). A pattern with a
kwarg SAMPLES does not know fails with a message saying what to add; a new kind of team object gets
a cached property on OtherTeam and a line in SAMPLES.

Conventions the map relies on: `slug` is a project's slug; `<thing>_pk` is the primary key of a
thing. Kwargs of objects that belong to no team (Django admin's, staff-only settings) are marked
`team_scoped=False`: for those only the login rule is checked.
"""

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from tests.factories import (
    DeploymentFactory,
    ExperimentFactory,
    ModelFactory,
    ProjectFactory,
    TeamFactory,
)

# Reachable without logging in, by design.
PUBLIC = {"login", "logout", "health", "admin:login", "admin:logout"}


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
        return ModelFactory(project=self.project, name="hidden-model")

    @cached_property
    def experiment(self):
        return ExperimentFactory(project=self.project, model=self.model, name="hidden-run")

    @cached_property
    def deployment(self):
        return DeploymentFactory(project=self.project, model=self.model, name="hidden-serving")


@dataclass(frozen=True)
class Sample:
    value: Callable[[OtherTeam], object]
    team_scoped: bool = True


SAMPLES: dict[str, Sample] = {
    "slug": Sample(lambda other: other.project.slug),
    "experiment_pk": Sample(lambda other: other.experiment.pk),
    "model_pk": Sample(lambda other: other.model.pk),
    "deployment_pk": Sample(lambda other: other.deployment.pk),
    # Django admin's own URLs: staff only, and admin answers everybody else itself.
    "app_label": Sample(lambda other: "projects", team_scoped=False),
    "object_id": Sample(lambda other: "1", team_scoped=False),
    "content_type_id": Sample(lambda other: 1, team_scoped=False),
    "id": Sample(lambda other: "1", team_scoped=False),
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


ROUTES, PROBLEMS = _routes()
GUARDED = [route for route in ROUTES if route.name not in PUBLIC]
OBJECT_ROUTES = [route for route in ROUTES if route.team_scoped]


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
        "admin:index",
        "login",
        "health",
    } <= names
    assert len(OBJECT_ROUTES) >= 11


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
