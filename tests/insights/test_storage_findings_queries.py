"""The waste page and GET /api/v1/findings list storage findings in as many queries for 20 as
for 2 (each with its project and run)."""

from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.insights.models import STORAGE_KINDS, Finding
from tests.api.conftest import api_for
from tests.factories import ExperimentFactory

pytestmark = pytest.mark.django_db


def storage_findings(count: int, *, project) -> None:
    Finding.objects.all().delete()
    for n in range(count):
        kind = STORAGE_KINDS[n % len(STORAGE_KINDS)]
        Finding.objects.create(
            kind=kind,
            subject_key=f"bucket-{count}-{n}",
            project=project,
            experiment=ExperimentFactory(project=project, name=f"run-{count}-{n}"),
            resource_id=f"bucket-{count}-{n}",
            wasted={"USD": "1.5"},
            rank_amount=Decimal("1.5"),
            reason=f"Storage {n}",
            evidence={"currency": "USD"},
        )


def test_the_waste_page_reads_the_same_queries_for_2_and_20(lead_client, project):
    def queries(count: int) -> int:
        storage_findings(count, project=project)
        lead_client.get(reverse("waste"))  # what a process reads once (the organisation)
        with CaptureQueriesContext(connection) as captured:
            page = lead_client.get(reverse("waste"))
        assert page.status_code == 200
        assert page.content.decode().count("Storage ") >= count
        return len(captured)

    assert queries(2) == queries(20)


def test_the_findings_api_reads_the_same_queries_for_2_and_20(lead, project):
    api = api_for(lead)

    def queries(count: int) -> int:
        storage_findings(count, project=project)
        api.get("/findings", limit=100)  # what a process reads once
        with CaptureQueriesContext(connection) as captured:
            answer = api.get("/findings", limit=100)
        assert answer.status == 200
        assert len(answer.body) == count
        return len(captured)

    assert queries(2) == queries(20)
