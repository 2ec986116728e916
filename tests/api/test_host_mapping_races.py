"""Host mappings under concurrent calls, and the host names they take."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connections

from apps.api.routers import host_mappings as router
from apps.gpu.models import HostMapping

from .conftest import api_for

NODE = "/host-mappings/gpu-node-7"


@pytest.mark.django_db(transaction=True)
def test_concurrent_puts_of_one_new_host_create_it_once(lead, project, monkeypatch):
    """Both calls look the host up before either creates it (a barrier holds them there), so both
    try to create it: exactly one may answer 201, the other changes that mapping (200)."""
    calls = 4
    barrier = threading.Barrier(calls, timeout=20)
    first_look = threading.local()
    look_up = router._editable

    def racing_look_up(request, host):
        found = look_up(request, host)
        if not getattr(first_look, "done", False):
            first_look.done = True
            barrier.wait()
        return found

    monkeypatch.setattr(router, "_editable", racing_look_up)
    apis = [api_for(lead) for _ in range(calls)]

    def put(n: int):
        try:
            return apis[n].put(NODE, {"resource_id": f"i-{n}", "note": f"call {n}"})
        finally:
            connections.close_all()

    with ThreadPoolExecutor(calls) as pool:
        answers = list(pool.map(put, range(calls)))

    assert sorted(answer.status for answer in answers) == [200, 200, 200, 201]
    assert HostMapping.objects.count() == 1
    assert HostMapping.objects.get().created_by == lead


@pytest.mark.django_db
@pytest.mark.parametrize(
    "host",
    [
        ".",
        "..",
        "a..b",
        ".gpu-node",
        "gpu-node.",
        "-node",
        "node-",
        "gpu\\node",
        "n%01de",
        "n%7Fde",
        "gpu:9400",
        "gpu@node",
        "nöde",
        "a" * 64,
        ".".join(["a" * 63] * 4),
    ],
)
def test_a_host_that_is_not_a_host_name_is_a_400(lead_api, project, host):
    answer = lead_api.put(f"/host-mappings/{host}", {"resource_id": "i-1"})
    assert (answer.status, answer.body) == (
        400,
        {
            "detail": "1 field is invalid.",
            "errors": {
                "host": [
                    "A host name is labels of letters, digits, hyphens and underscores separated "
                    "by single dots (gpu-node-7, ip-10-0-0-7.ec2.internal): each label 1 to 63 "
                    "characters, not starting or ending with a hyphen, 253 characters in all."
                ]
            },
        },
    )
    assert not HostMapping.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "host", ["gpu-node-7", "ip-10-0-0-7.ec2.internal", "10.0.0.7", "node_7", "a" * 63, "R6I3N0"]
)
def test_real_host_names_are_taken(lead_api, project, host):
    assert lead_api.put(f"/host-mappings/{host}", {"resource_id": "i-1"}).status == 201
    assert HostMapping.objects.get().host == host
