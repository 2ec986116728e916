"""The two page guards of apps/accounts/guards.py, written once and used by every page."""

import pytest
from django.http import Http404, HttpResponse
from django.test import RequestFactory

from apps.accounts.guards import staff_only, staff_or_lead_only
from apps.accounts.models import Membership
from tests.factories import MembershipFactory, StaffFactory, UserFactory

pytestmark = pytest.mark.django_db


@staff_only
def staff_page(request, pk: int) -> HttpResponse:
    return HttpResponse(f"page {pk}")


@staff_or_lead_only(message="Unattributed spend is for staff and team leads.")
def leads_page(request) -> HttpResponse:
    return HttpResponse("leads")


def get(user):
    request = RequestFactory().get("/")
    request.user = user
    return request


def test_staff_pass_the_staff_only_guard_with_the_view_arguments():
    assert staff_page(get(StaffFactory()), pk=7).content == b"page 7"


def test_a_lead_gets_404_from_the_staff_only_guard():
    lead = MembershipFactory(role=Membership.Role.LEAD).user

    with pytest.raises(Http404, match=r"^No such page\.$"):
        staff_page(get(lead), pk=7)


def test_staff_and_a_lead_pass_the_staff_or_lead_guard():
    lead = MembershipFactory(role=Membership.Role.LEAD).user

    assert leads_page(get(StaffFactory())).content == b"leads"
    assert leads_page(get(lead)).content == b"leads"


@pytest.mark.parametrize("member", [True, False], ids=["member", "outsider"])
def test_a_member_and_an_outsider_get_404_with_the_pages_message(member):
    user = MembershipFactory().user if member else UserFactory()

    with pytest.raises(Http404, match=r"^Unattributed spend is for staff and team leads\.$"):
        leads_page(get(user))


def test_the_guard_keeps_the_views_name_for_the_url_walk():
    assert (staff_page.__name__, leads_page.__name__) == ("staff_page", "leads_page")


def test_whether_someone_leads_a_team_is_read_once_a_request_and_again_after_a_change(
    member, other_team
):
    """A page asks it several times (its role, its findings, what its parts are cached by): one
    query a request, read again when a membership changes in it, and never kept past it."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections, connection
    from django.test.utils import CaptureQueriesContext

    from apps.accounts.selectors import leads_a_team

    # As Django's test client does: the request's signals without closing the test's connection.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    request_started.send(sender=None)
    try:
        with CaptureQueriesContext(connection) as asked:
            assert leads_a_team(user=member) is False
            assert leads_a_team(user=member) is False
        assert len(asked) == 1
        MembershipFactory(team=other_team, user=member, role="lead")
        assert leads_a_team(user=member) is True
    finally:
        request_finished.send(sender=None)
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
    with CaptureQueriesContext(connection) as outside:
        assert leads_a_team(user=member) is True
        assert leads_a_team(user=member) is True
    assert len(outside) == 2
