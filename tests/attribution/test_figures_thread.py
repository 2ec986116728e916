"""A cold page's heaviest figures computed on the figures thread's own connection
(apps.spend.figures.in_background): the same pages, the request's versions and time zone,
errors raised where the figure is asked for, a figure the thread has not begun computed by the
caller, and the thread's connection kept as the settings say (without kept connections, no
thread).

Transactional: the figures thread reads through a connection of its own, which sees committed
rows only (inside a test's transaction a figure is computed in the calling thread instead)."""

import re
import threading
from zoneinfo import ZoneInfo

import pytest
from django.core.cache import cache
from django.db import connection, connections, transaction
from django.db.backends.utils import CursorWrapper
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from apps.projects.models import Project
from apps.spend import figures, sections, views

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "progress"])

CSRF = re.compile(r'name="csrfmiddlewaretoken" value="[^"]+"|"x-csrftoken": "[^"]+"')


@pytest.fixture
def threads_seen(monkeypatch) -> list[str]:
    """The names of the threads that computed the figures the pages pass to in_background, in
    the order they were handed over. Each is handed over once the figures thread has begun it
    (`begun`), so that none is taken back by the request however slow the machine: a page's
    figures are then all the thread's (taking back is tested on its own below)."""
    seen = []

    def recorded(compute):
        handed = len(seen)
        seen.append(None)  # until it is computed

        def named():
            seen[handed] = threading.current_thread().name
            return compute()

        return begun(named)

    for module in (views, sections):
        monkeypatch.setattr(module, "in_background", recorded)
    return seen


def begun(compute):
    """in_background(compute), returned once it has begun (on the figures thread, or already
    computed where the thread is not used): a figure asked for before the thread begins it is
    computed by the caller."""
    started = threading.Event()

    def starting():
        started.set()
        return compute()

    result = figures.in_background(starting)
    assert started.wait(10)
    return result


@pytest.fixture(autouse=True)
def kept_connections(monkeypatch):
    """Connections kept between requests (60 s, as compose keeps them), without which the
    figures thread is not used; the thread's own is closed after the test, so that nothing
    holds the test database."""
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60)
    yield
    figures._executor().submit(connections.close_all).result()


@pytest.fixture
def in_request():
    """What a request's start and end do to the figures' state, around a test's own calls."""
    figures._request_started()
    yield
    figures._request_finished()


def page(client, url: str, *, threads: int) -> str:
    cache.clear()
    with override_settings(SPEND_FIGURE_THREADS=threads):
        response = client.get(url)
    assert response.status_code == 200, response.status_code
    return CSRF.sub("csrf", response.content.decode())


@pytest.mark.parametrize(
    ("name", "url", "figures_in_background"),
    [
        ("overview, 30 days", lambda bill: reverse("home"), 2),
        ("overview, 12 months", lambda bill: reverse("home") + "?preset=12m", 2),
        (
            "project page",
            lambda bill: reverse("project_detail", args=[bill.vision_project.slug]),
            2,
        ),
        ("model page", lambda bill: reverse("model_detail", args=[bill.ranker.pk]), 2),
    ],
)
def test_a_page_is_the_same_with_its_heaviest_figures_on_the_figures_thread(
    staff_client, bill, threads_seen, name, url, figures_in_background
):
    url = url(bill)
    alone = page(staff_client, url, threads=0)
    assert len(threads_seen) == figures_in_background
    assert set(threads_seen) == {"MainThread"}
    threads_seen.clear()
    beside = page(staff_client, url, threads=1)
    assert threads_seen == ["spend-figures_0"] * figures_in_background
    assert beside == alone
    assert "Image ranking" in beside


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata"])
def test_a_leads_overview_is_the_same_on_the_figures_thread(
    lead_client, bill, organization, threads_seen, zone
):
    organization.time_zone = zone
    organization.save()
    alone = page(lead_client, reverse("home") + "?preset=90d", threads=0)
    beside = page(lead_client, reverse("home") + "?preset=90d", threads=1)
    assert threads_seen == ["MainThread"] * 2 + ["spend-figures_0"] * 2
    assert beside == alone
    assert "Claim" in beside  # a lead's unattributed spend, shown apart


def test_a_leads_cold_overview_ranks_the_unattributed_resources_once(
    lead_client, bill, monkeypatch
):
    # Counted on every connection: the figures thread's statements as well as the request's.
    ranking = []
    execute = CursorWrapper.execute

    def recorded(self, sql, params=None):
        if sql.startswith("SELECT resource_id, SUM(amount)"):
            ranking.append(threading.current_thread().name)
        return execute(self, sql, params)

    monkeypatch.setattr(CursorWrapper, "execute", recorded)
    page(lead_client, reverse("home") + "?preset=90d", threads=1)
    # On the figures thread, or in the request had the thread not begun it: once either way.
    assert len(ranking) == 1


def test_the_figures_thread_reads_committed_rows_with_the_requests_versions(project, in_request):
    versions = figures.versions_read()
    result = begun(
        lambda: (
            threading.current_thread().name,
            list(Project.objects.values_list("slug", flat=True)),
            figures.versions_read(),
        )
    )
    name, slugs, seen_versions = result()
    assert name == "spend-figures_0"
    assert slugs == [project.slug]
    assert seen_versions == versions


def test_a_figure_that_fails_on_the_figures_thread_raises_where_it_is_asked_for(in_request):
    def failing():
        raise ValueError("no such period")

    result = begun(failing)
    with pytest.raises(ValueError, match="no such period"):
        result()


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def test_the_figures_thread_keeps_its_own_connection_between_figures(in_request):
    first = begun(backend_pid)()
    second = begun(backend_pid)()
    assert first == second != backend_pid()


def test_a_figure_the_thread_has_not_begun_is_computed_by_the_caller(in_request):
    release = threading.Event()
    first = begun(lambda: (release.wait(10), threading.current_thread().name)[1])
    # The thread is still on the first figure: the second is computed here when asked for, and
    # the thread never runs it.
    second = figures.in_background(lambda: threading.current_thread().name)
    assert second() == threading.current_thread().name
    release.set()
    assert first() == "spend-figures_0"
    assert figures._executor().submit(lambda: "idle").result(10) == "idle"


def test_without_kept_connections_a_figure_is_computed_in_the_calling_thread(
    in_request, monkeypatch
):
    # One connection opened per figure would cost more than the thread saves.
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 0)
    assert figures.in_background(backend_pid)() == backend_pid()


def test_inside_a_transaction_a_figure_is_computed_in_the_calling_thread(in_request):
    with transaction.atomic():
        result = figures.in_background(lambda: threading.current_thread().name)
    assert result() == threading.current_thread().name


def test_outside_a_request_or_with_no_thread_a_figure_is_computed_in_the_calling_thread(
    in_request,
):
    here = threading.current_thread().name
    with override_settings(SPEND_FIGURE_THREADS=0):
        assert figures.in_background(lambda: threading.current_thread().name)() == here
    figures._request_finished()
    assert figures.in_background(lambda: threading.current_thread().name)() == here


def test_a_figure_started_from_the_figures_thread_is_computed_there(in_request):
    def outer():
        inner = figures.in_background(lambda: threading.current_thread().name)
        return threading.current_thread().name, inner()

    assert begun(outer)() == ("spend-figures_0", "spend-figures_0")


def test_the_figures_thread_works_in_the_requests_time_zone(in_request):
    with timezone.override(ZoneInfo("Asia/Tokyo")):
        seen = begun(timezone.get_current_timezone_name)()
    assert seen == "Asia/Tokyo"
    # Put back after the figure: the thread's next one starts from the default.
    after = figures._executor().submit(timezone.get_current_timezone_name)
    assert after.result() == "UTC"
