"""The storage kinds in GET /api/v1/findings, filtered by kind, with exact money."""

import pytest

from tests.insights.test_storage_findings import delivery, storage_bill  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


def test_the_api_lists_each_storage_kind(storage_bill, lead_api):  # noqa: F811
    expected = {
        "checkpoints_only_grow": ("ckpt", {"USD": "10.5"}),
        "storage_of_finished_runs": ("done-ckpt", {"USD": "26"}),
        "data_far_from_gpus": ("far", {"USD": "84"}),  # 28 days × 3.00
        "vector_db_growth": ("vectors", {}),
        "storage_spike": ("spiky", {"USD": "14"}),
    }
    for kind, (resource, wasted) in expected.items():
        answer = lead_api.get("/findings", kind=kind)
        assert answer.status == 200
        assert [(row["resource_id"], row["wasted"], row["project"]) for row in answer.body] == [
            (resource, wasted, "image-ranking")
        ], kind
