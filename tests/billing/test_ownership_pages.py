"""Editing who used a resource, on its page or in the admin, moves the billed history with it,
to the cent, exactly as the API does: all of them change resource ids in one place, which
announces the change through `ownership_changed`, and billing re-attributes after the commit."""

from datetime import date
from decimal import Decimal
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from apps.billing.models import AttributionRun
from apps.billing.services import attribution_refresh, attribution_schedule
from apps.projects.models import Project
from apps.projects.ports import Port
from apps.spend.selectors import spend_totals

from .conftest import focus_line, run_import, write_focus

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

ENDPOINT = "arn:aws:sagemaker:us-east-1:111111111111:endpoint/ranker"


@pytest.fixture
def history(acme, tmp_path):
    run = run_import(
        write_focus(
            tmp_path / "january.csv",
            [
                focus_line(
                    ResourceId="i-late",
                    EffectiveCost="1.000000000000001",
                    BilledCost="1.000000000000001",
                ),
                focus_line(
                    ResourceId="i-late",
                    ChargePeriodStart="2025-01-25T00:00:00Z",
                    ChargePeriodEnd="2025-01-25T01:00:00Z",
                    EffectiveCost="2.00",
                    BilledCost="2.00",
                ),
                focus_line(ResourceId=ENDPOINT, EffectiveCost="3.25", BilledCost="3.25"),
            ],
        )
    )
    assert run.status == "succeeded"
    return acme


@pytest.fixture
def root_client(client, django_user_model):
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw-123456")
    client.force_login(root)
    return client


class _Fields(HTMLParser):
    """The values a browser would send for each form of a page (submit buttons aside)."""

    def __init__(self):
        super().__init__()
        self.forms: list[dict[str, str]] = []
        self._form = self._select = self._textarea = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self._form = {}
            self.forms.append(self._form)
            return
        name = a.get("name")
        if self._form is None or not name and tag != "option":
            return
        if tag == "input" and a.get("type") not in ("submit", "button", "file"):
            if a.get("type") not in ("checkbox", "radio"):
                self._form[name] = a.get("value") or ""
            elif "checked" in a:
                self._form[name] = a.get("value") or "on"
        elif tag == "select":
            self._select = name
            self._form.setdefault(name, "")
        elif tag == "option" and self._select and "selected" in a:
            self._form[self._select] = a.get("value") or ""
        elif tag == "textarea":
            self._textarea = name
            self._form[name] = ""

    def handle_data(self, data):
        if self._form is not None and self._textarea:
            self._form[self._textarea] += data

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None
        elif tag == "textarea" and self._textarea:
            self._form[self._textarea] = self._form[self._textarea].removeprefix("\n")
            self._textarea = None
        elif tag == "form":
            self._form = None


def form_of(client, url: str) -> dict[str, str]:
    """What the page's main form (the one with the most fields) sends as it stands."""
    page = client.get(url)
    assert page.status_code == 200
    parser = _Fields()
    parser.feed(page.content.decode())
    return max(parser.forms, key=len)


def post_committed(client, url, data, callbacks_capture):
    """POST, then run what the request left for after its commit (the re-attribution)."""
    with callbacks_capture(execute=True):
        response = client.post(url, data)
    form = (response.context or {}).get("form") or (response.context or {}).get("adminform")
    assert response.status_code == 302, getattr(form, "errors", response.status_code)
    return response


def by_experiment() -> dict:
    return {t.key[0]: t.effective_cost for t in spend_totals(by=("experiment_id",))}


def by_deployment() -> dict:
    return {t.key[0]: t.effective_cost for t in spend_totals(by=("deployment_id",))}


def by_project() -> dict:
    return {t.key[0]: t.effective_cost for t in spend_totals(by=("project_id",))}


def test_before_anything_is_edited_the_history_is_unattributed(history):
    assert by_project() == {None: Decimal("6.250000000000001")}


def test_editing_an_experiments_resource_ids_on_its_page_moves_its_billed_history(
    history, root_client, eager_celery, django_capture_on_commit_callbacks
):
    url = reverse("experiment_edit", args=[history.resnet.pk])
    # The fixture's run has GPUs of no type, which the page does not accept.
    data = {**form_of(root_client, url), "gpu_type": "A100-80GB"}
    assert data["resource_ids"] == ""
    post_committed(
        root_client, url, {**data, "resource_ids": "i-late"}, django_capture_on_commit_callbacks
    )

    run = AttributionRun.objects.get()
    assert (run.status, run.resource_ids, run.lines_changed) == ("succeeded", ["i-late"], 1)
    assert run.reason == "Resources of the experiment “resnet-baseline” changed"
    # resnet ran until 20 January: the line of the 25th stays unattributed.
    assert by_experiment() == {
        history.resnet.pk: Decimal("1.000000000000001"),
        None: Decimal("5.25"),
    }
    assert by_project() == {
        history.vision.pk: Decimal("1.000000000000001"),
        None: Decimal("5.25"),
    }

    # Taking the id off again gives the history back.
    post_committed(
        root_client, url, {**data, "resource_ids": ""}, django_capture_on_commit_callbacks
    )
    assert AttributionRun.objects.count() == 2
    assert by_project() == {None: Decimal("6.250000000000001")}


def test_editing_a_deployments_resource_ids_on_its_page_moves_its_billed_history(
    history, root_client, eager_celery, django_capture_on_commit_callbacks
):
    url = reverse("deployment_edit", args=[history.ranker.pk])
    data = {**form_of(root_client, url), "gpu_type": "A10G"}
    post_committed(
        root_client, url, {**data, "resource_ids": ENDPOINT}, django_capture_on_commit_callbacks
    )

    run = AttributionRun.objects.get()
    assert (run.status, run.resource_ids, run.lines_changed) == ("succeeded", [ENDPOINT], 1)
    assert by_deployment() == {
        history.ranker.pk: Decimal("3.25"),
        None: Decimal("3.000000000000001"),
    }


def test_saving_a_page_without_changing_the_resource_ids_queues_no_run(
    history, root_client, eager_celery, django_capture_on_commit_callbacks
):
    history.resnet.resources.create(resource_id="i-late")
    url = reverse("experiment_edit", args=[history.resnet.pk])
    data = {**form_of(root_client, url), "gpu_type": "A100-80GB"}
    assert data["resource_ids"] == "i-late"
    post_committed(
        root_client, url, {**data, "name": "resnet-2"}, django_capture_on_commit_callbacks
    )
    assert not AttributionRun.objects.exists()


def test_a_project_created_on_its_page_takes_the_billed_spend_its_tags_name(
    acme, tmp_path, root_client, eager_celery, django_capture_on_commit_callbacks
):
    run = run_import(
        write_focus(
            tmp_path / "speech.csv",
            [focus_line(ResourceId="i-tts", Tags='{"project": "speech"}', EffectiveCost="4.50")],
        )
    )
    assert run.status == "succeeded"
    assert by_project() == {None: Decimal("4.50")}
    data = {"team": acme.team.pk, "name": "Speech", "slug": "speech", "monthly_budget": ""}

    post_committed(root_client, reverse("project_create"), data, django_capture_on_commit_callbacks)

    speech = Project.objects.get(slug="speech")
    run = AttributionRun.objects.get()
    assert (run.status, run.reason, run.lines_changed) == (
        "succeeded",
        "Project “Speech” created",
        1,
    )
    assert by_project() == {speech.pk: Decimal("4.50")}

    # Renamed (a tag names a project by slug or name), the tag names none any more; saved with
    # the same names, nothing runs.
    url = reverse("project_edit", args=["speech"])
    data = {**data, "name": "Voice", "slug": "voice"}
    post_committed(root_client, url, data, django_capture_on_commit_callbacks)
    assert AttributionRun.objects.order_by("pk").last().reason == "Project “Voice” renamed"
    assert by_project() == {None: Decimal("4.50")}
    url = reverse("project_edit", args=["voice"])
    post_committed(
        root_client,
        url,
        {**data, "monthly_budget": "100"},
        django_capture_on_commit_callbacks,
    )
    assert AttributionRun.objects.count() == 2


def test_adding_an_experiments_resource_in_the_admin_queues_a_run_and_moves_the_history(
    history, root_client, eager_celery, django_capture_on_commit_callbacks
):
    url = reverse("admin:experiments_experiment_change", args=[history.resnet.pk])
    data = form_of(root_client, url)
    assert data["resources-TOTAL_FORMS"] == "1"  # the empty extra row
    post_committed(
        root_client,
        url,
        {**data, "resources-0-resource_id": "i-late"},
        django_capture_on_commit_callbacks,
    )

    run = AttributionRun.objects.get()
    assert (run.status, run.resource_ids, run.lines_changed) == ("succeeded", ["i-late"], 1)
    assert by_experiment() == {
        history.resnet.pk: Decimal("1.000000000000001"),
        None: Decimal("5.25"),
    }


def test_adding_a_deployments_resource_in_the_admin_queues_a_run_and_moves_the_history(
    history, root_client, eager_celery, django_capture_on_commit_callbacks
):
    url = reverse("admin:deployments_deployment_change", args=[history.ranker.pk])
    data = form_of(root_client, url)
    post_committed(
        root_client,
        url,
        {**data, "resources-0-resource_id": ENDPOINT},
        django_capture_on_commit_callbacks,
    )

    run = AttributionRun.objects.get()
    assert (run.status, run.resource_ids) == ("succeeded", [ENDPOINT])
    assert by_deployment() == {
        history.ranker.pk: Decimal("3.25"),
        None: Decimal("3.000000000000001"),
    }


def test_deleting_a_resource_use_in_the_admin_gives_the_history_back(
    history, root_client, eager_celery, django_capture_on_commit_callbacks
):
    use = history.ranker.resources.create(resource_id=ENDPOINT)
    with django_capture_on_commit_callbacks(execute=True):
        # What the page would have done: the history is the deployment's.
        attribution_schedule(resource_ids=[ENDPOINT])
    assert by_deployment()[history.ranker.pk] == Decimal("3.25")

    post_committed(
        root_client,
        reverse("admin:deployments_deploymentresource_delete", args=[use.pk]),
        {"post": "yes"},
        django_capture_on_commit_callbacks,
    )

    assert list(AttributionRun.objects.order_by("pk").values_list("resource_ids", "status")) == [
        ([ENDPOINT], "succeeded"),
        ([ENDPOINT], "succeeded"),
    ]
    assert by_deployment() == {None: Decimal("6.250000000000001")}


@pytest.fixture
def heard(monkeypatch) -> list[tuple]:
    """What billing announces through `spend_data_changed`, heard by a handler of this test."""
    port = Port("spend data changed")
    heard: list[tuple] = []
    port.register(lambda *, start, end, reason: heard.append((start, end, reason)))
    monkeypatch.setattr("apps.billing.importing.spend_data_changed", port)
    monkeypatch.setattr("apps.billing.reattribution.spend_data_changed", port)
    return heard


def test_a_loaded_delivery_announces_its_billing_period(acme, tmp_path, heard):
    run = run_import(
        write_focus(
            tmp_path / "january.csv",
            [
                focus_line(),
                # A charge past the period's end (a late credit) widens what changed.
                focus_line(
                    ChargePeriodStart="2025-02-03T22:00:00Z",
                    ChargePeriodEnd="2025-02-03T23:00:00Z",
                ),
            ],
        )
    )
    assert run.status == "succeeded"
    assert heard == [(date(2025, 1, 1), date(2025, 2, 4), "delivery")]


def test_a_replacing_delivery_announces_both_and_an_unchanged_file_nothing(acme, tmp_path, heard):
    first = write_focus(tmp_path / "first.csv", [focus_line()])
    run_import(first)
    run_import(first)  # the same file again: unchanged, nothing stored changed
    run_import(write_focus(tmp_path / "second.csv", [focus_line(EffectiveCost="2.00")]))
    assert heard == [
        (date(2025, 1, 1), date(2025, 2, 1), "delivery"),
        (date(2025, 1, 1), date(2025, 2, 1), "delivery"),
    ]


def test_a_reattribution_announces_the_days_whose_lines_moved(history, heard):
    history.resnet.resources.create(resource_id="i-late")

    assert attribution_refresh(resource_ids=["i-late"]) == 1
    assert attribution_refresh(resource_ids=["i-late"]) == 0  # nothing moved: nothing announced

    assert heard == [(date(2025, 1, 2), date(2025, 1, 3), "reattribution")]
