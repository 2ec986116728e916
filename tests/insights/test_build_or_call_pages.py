import json
from datetime import date
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.deployments.models import TrafficHour
from apps.insights.models import BuildOrCallInputs
from apps.insights.selectors_build_or_call import (
    api_model_suggestions,
    build_or_call_result,
)
from tests.insights.build_or_call_fixtures import DAY, PERIOD, build_day

pytestmark = pytest.mark.django_db
END = date(2025, 3, 2)


def test_the_inputs_come_from_the_rollup_the_traffic_and_the_organisation(project):
    deployment = build_day(project)
    result = build_or_call_result(deployment=deployment, start=DAY, end=END)
    assert result.inputs.spend == Decimal("48")
    assert result.inputs.other_currencies == {"EUR": Decimal("5")}
    assert result.requests == 24000
    assert result.self_hosted_per_request == Decimal("0.003")
    assert result.api_per_request == Decimal("0.008")
    assert result.break_even_requests_per_hour == Decimal("375")
    assert result.verdict == "self_host"
    assert result.monthly_margin == Decimal("3650")
    assert result.notes == ["EUR 5.00 of lines in EUR left out (not USD)"]


def test_hours_over_the_latency_objective_are_not_capacity(project):
    deployment = build_day(project)
    hour = TrafficHour.objects.filter(deployment=deployment).first()
    hour.requests, hour.latency_p95_ms = 1000 * 3, 900
    hour.save()
    result = build_or_call_result(deployment=deployment, start=DAY, end=END)
    assert result.capacity == Decimal("1000")  # the busiest hour within 300 ms
    BuildOrCallInputs.objects.filter(deployment=deployment).update(latency_objective_ms=1000)
    result = build_or_call_result(deployment=deployment, start=DAY, end=END)
    assert result.capacity == Decimal("3000")


def test_the_catalogue_names_closest_to_the_models_are_offered_first(project):
    deployment = build_day(project)
    assert api_model_suggestions(deployment=deployment) == ["hosted/support-chat-large"]


def test_the_command_prints_one_object_per_deployment(project):
    build_day(project)
    out = StringIO()
    call_command(
        "build_or_call", "--json", "--start", "2025-03-01", "--end", "2025-03-02", stdout=out
    )
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    row = json.loads(lines[0])
    assert {
        key: row[key]
        for key in (
            "deployment",
            "model",
            "period_start",
            "period_end",
            "requests",
            "self_hosted_per_request",
            "api_model",
            "api_per_request",
            "break_even_requests_per_hour",
            "requests_per_hour",
            "verdict",
            "monthly_margin",
            "currency",
        )
    } == {
        "deployment": "support-chat-prod",
        "model": "support-chat",
        "period_start": "2025-03-01",
        "period_end": "2025-03-02",
        "requests": 24000,
        "self_hosted_per_request": "0.0030000000",
        "api_model": "hosted/support-chat-large",
        "api_per_request": "0.0080000000",
        "break_even_requests_per_hour": "375.00",
        "requests_per_hour": "1000.00",
        "verdict": "self_host",
        "monthly_margin": "3650.00",
        "currency": "USD",
    }


def test_the_command_refuses_half_a_period(project):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="Give both --start and --end, or neither."):
        call_command("build_or_call", "--json", "--start", "2025-03-01")


def test_the_models_page_ranks_deployments_with_their_verdicts(project, member_client):
    build_day(project)
    response = member_client.get(reverse("build_or_call_list"), PERIOD)
    assert response.status_code == 200
    body = response.content.decode()
    assert "support-chat-prod" in body
    assert 'data-verdict="self_host"' in body
    assert "$2,190.00" in body  # a month, self-hosted
    assert "$3,650.00" in body  # the margin


def test_a_preview_recomputes_without_saving(project, member_client):
    deployment = build_day(project)
    url = reverse("build_or_call_detail", args=[deployment.pk])
    response = member_client.get(
        url,
        {
            **PERIOD,
            "expected_requests_per_hour": "300",
            "api_model": "hosted/support-chat-large",
            "engineering_hours_per_month": "",
            "capacity_per_replica_hour": "",
            "latency_objective_ms": "",
        },
        headers={"HX-Request": "true"},
    )
    body = response.content.decode()
    assert 'data-verdict="call_api"' in body
    assert "$438.00" in body  # 2,190 - 1,752 a month
    assert "<html" not in body  # the partial only
    assert BuildOrCallInputs.objects.get(deployment=deployment).expected_requests_per_hour is None


def test_the_lead_saves_the_inputs_and_a_member_cannot(project, lead, lead_client, member_client):
    deployment = build_day(project)
    url = reverse("build_or_call_detail", args=[deployment.pk])
    data = {
        "expected_requests_per_hour": "300",
        "api_model": "hosted/support-chat-large",
        "engineering_hours_per_month": "10",
    }
    member_client.post(url, data)
    saved = BuildOrCallInputs.objects.get(deployment=deployment)
    assert saved.expected_requests_per_hour is None
    response = lead_client.post(url, data)
    assert response.status_code == 302
    saved.refresh_from_db()
    assert saved.expected_requests_per_hour == Decimal("300")
    assert saved.engineering_hours_per_month == Decimal("10")
    assert saved.updated_by == lead


def test_an_api_model_outside_the_catalogue_is_refused(project, lead_client):
    deployment = build_day(project)
    url = reverse("build_or_call_detail", args=[deployment.pk])
    response = lead_client.post(url, {"api_model": "no-such-model"})
    assert response.status_code == 200
    assert "“no-such-model” is not in the price catalogue." in response.content.decode()
    assert BuildOrCallInputs.objects.get(deployment=deployment).api_model == (
        "hosted/support-chat-large"
    )


def test_without_an_api_model_the_page_says_so(project, member_client):
    deployment = build_day(project, pick_api=False)
    response = member_client.get(reverse("build_or_call_detail", args=[deployment.pk]), PERIOD)
    body = response.content.decode()
    assert "No API model picked yet: pick a comparable one to get a verdict." in body
    assert "No verdict" in body


def test_an_outsider_gets_404(project, outsider_client):
    deployment = build_day(project)
    url = reverse("build_or_call_detail", args=[deployment.pk])
    assert outsider_client.get(url).status_code == 404
    body = outsider_client.get(reverse("build_or_call_list")).content.decode()
    assert "support-chat-prod" not in body
