import pytest

from tests.insights.build_or_call_fixtures import PERIOD, build_day

pytestmark = pytest.mark.django_db
PATH = "/projects/{slug}/deployments/support-chat-prod/build-or-call"


def test_the_api_serves_what_the_command_prints(member_api, project):
    build_day(project)
    answer = member_api.get(PATH.format(slug=project.slug), **PERIOD)
    assert answer.status == 200
    body = answer.body
    assert body["deployment"] == "support-chat-prod"
    assert body["verdict"] == "self_host"
    assert body["self_hosted_per_request"] == "0.0030000000"
    assert body["api_per_request"] == "0.0080000000"
    assert body["break_even_requests_per_hour"] == "375.00"
    assert body["monthly_margin"] == "3650.00"
    assert body["requests"] == 24000
    assert body["currency"] == "USD"
    assert body["notes"] == ["EUR 5.00 of lines in EUR left out (not USD)"]


def test_half_a_period_is_refused(member_api, project):
    build_day(project)
    answer = member_api.get(PATH.format(slug=project.slug), start="2025-03-01")
    assert answer.status == 400
    assert "Give both start and end, or neither." in str(answer.body)


def test_an_outsider_gets_404(outsider_api, project):
    build_day(project)
    assert outsider_api.get(PATH.format(slug=project.slug), **PERIOD).status == 404
