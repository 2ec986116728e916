"""The fleet page's GPU table and GPUs per model computed on the figures thread's own
connection (apps.spend.figures.in_background) while the summary is built in the request: the
same page.

Transactional: the thread's connection sees committed rows only."""

import threading

import pytest
import time_machine
from django.core.cache import cache
from django.test import override_settings
from django.urls import reverse

from apps.gpu import views
from apps.gpu.models import Gpu
from tests.attribution.test_figures_thread import CSRF, begun, kept_connections  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "progress"])


@pytest.fixture(autouse=True)
def _frozen():
    with time_machine.travel("2026-07-15 02:00:00+00:00", tick=False):
        yield


def recorded(monkeypatch) -> list[str]:
    """The names of the threads that compute what the GPU views hand to in_background, in
    order. Each is handed over once begun, so that the request never takes it back (tested
    apart)."""
    computed_by = []

    def handed(compute):
        def named():
            computed_by.append(threading.current_thread().name)
            return compute()

        return begun(named)

    monkeypatch.setattr(views, "in_background", handed)
    return computed_by


@pytest.mark.parametrize("preset", ["7d", "all"])
def test_the_fleet_page_is_the_same_with_its_gpu_table_on_the_figures_thread(
    gpu_fleet, staff_client, monkeypatch, preset
):
    computed_by = recorded(monkeypatch)

    def page(threads: int) -> str:
        cache.clear()
        with override_settings(SPEND_FIGURE_THREADS=threads):
            response = staff_client.get(reverse("gpu_fleet"), {"preset": preset})
        assert response.status_code == 200
        return CSRF.sub("csrf", response.content.decode())

    alone = page(threads=0)
    assert computed_by == ["MainThread", "MainThread"]
    beside = page(threads=1)
    assert computed_by[2:] == ["spend-figures_0", "spend-figures_0"]
    assert beside == alone
    assert "mystery-box" in beside  # a row of the GPU table
    # The GPUs per model: the five GPUs, three hours each.
    model_row = '<th scope="row">Unknown model</th><td class="num">5</td><td class="num">15</td>'
    assert model_row in beside


def test_a_gpus_page_is_the_same_with_its_findings_on_the_figures_thread(
    gpu_fleet, lead_client, monkeypatch
):
    """A GPU's page computes its findings section on the figures thread while it builds the
    rest; the GPU is resolved once for the lead's access check and for the page."""
    computed_by = recorded(monkeypatch)
    gpu = Gpu.objects.get(uuid="GPU-e1")

    def page(threads: int) -> str:
        cache.clear()
        with override_settings(SPEND_FIGURE_THREADS=threads):
            response = lead_client.get(reverse("gpu_detail", args=[gpu.pk]))
        assert response.status_code == 200
        return CSRF.sub("csrf", response.content.decode())

    alone = page(threads=0)
    assert computed_by == ["MainThread"]
    beside = page(threads=1)
    assert computed_by[1:] == ["spend-figures_0"]
    assert beside == alone
    assert "<code>i-0aaa</code>" in beside
