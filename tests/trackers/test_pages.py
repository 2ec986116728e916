"""The tracker pages: staff add and pause MLflow servers and upload W&B exports; nobody else
sees them."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from apps.experiments.models import Experiment
from apps.projects.models import Project
from apps.trackers.models import TrackerSource
from apps.trackers.services import tracker_source_create

pytestmark = pytest.mark.django_db

CSV = (
    "Name,ID,State,Created,Runtime,project\n"
    "vit-b,r1,finished,2025-01-02T10:00:00Z,60,{slug}\n"
    "vit-l,r2,failed,2025-01-02T10:00:00Z,60,{slug}\n"
)


def test_staff_add_an_mlflow_server_and_the_list_shows_it(staff_client):
    response = staff_client.post(
        reverse("tracker_source_create"),
        {
            "name": "research mlflow",
            "url": " http://mlflow:5000 ",
            "token": "s3cret",
            "project_tag": "project",
            "resource_tags": "instance_id, host",
            "gpu_count_tag": "gpu_count",
            "loss_metric": "loss",
            "interval_minutes": 5,
        },
    )

    assert response.status_code == 302
    source = TrackerSource.objects.get()
    assert (source.url, source.token, source.resource_tag_keys) == (
        "http://mlflow:5000",
        "s3cret",
        ["instance_id", "host"],
    )
    page = staff_client.get(reverse("tracker_source_list")).content.decode()
    assert "research mlflow" in page and "Not polled yet" in page
    assert "s3cret" not in page


def test_writing_costs_back_needs_costsites_url(staff_client):
    response = staff_client.post(
        reverse("tracker_source_create"),
        {
            "name": "m",
            "url": "http://mlflow:5000",
            "project_tag": "project",
            "resource_tags": "host",
            "gpu_count_tag": "gpu_count",
            "loss_metric": "loss",
            "interval_minutes": 5,
            "allow_writes": "on",
        },
    )

    assert response.status_code == 200
    assert "Give costsite&#x27;s URL, so that costsite.url can link here." in response.text
    assert not TrackerSource.objects.exists()


def test_an_edit_with_an_empty_token_keeps_the_token(staff_client):
    source = tracker_source_create(name="m", url="http://mlflow:5000", token="keep-me")
    staff_client.post(
        reverse("tracker_source_edit", args=[source.pk]),
        {
            "name": "m2",
            "url": "http://mlflow:5000",
            "token": "",
            "project_tag": "project",
            "resource_tags": "host",
            "gpu_count_tag": "gpu_count",
            "loss_metric": "loss",
            "interval_minutes": 10,
        },
    )

    source.refresh_from_db()
    assert (source.name, source.token, source.interval_minutes) == ("m2", "keep-me", 10)


def test_pausing_swaps_the_rows_for_htmx(staff_client):
    source = tracker_source_create(name="m", url="http://mlflow:5000")

    response = staff_client.post(
        reverse("tracker_source_pause", args=[source.pk]), headers={"HX-Request": "true"}
    )

    assert response.text.lstrip().startswith('<div id="source-rows"')
    assert "Resume" in response.text
    source.refresh_from_db()
    assert source.is_paused is True


def test_a_member_gets_404_on_the_tracker_pages(member_client):
    assert member_client.get(reverse("tracker_source_list")).status_code == 404
    assert member_client.get(reverse("wandb_upload")).status_code == 404


def test_an_uploaded_wandb_export_becomes_experiments(staff_client, project):
    upload = SimpleUploadedFile("runs.csv", CSV.format(slug=project.slug).encode())

    response = staff_client.post(
        reverse("wandb_upload"),
        {
            "file": upload,
            "file_format": "auto",
            "project_tag": "project",
            "resource_tags": "host",
            "gpu_count_tag": "gpu_count",
            "loss_metric": "loss",
        },
        follow=True,
    )

    assert "runs.csv: 2 run(s) added, 0 updated, 0 unchanged, 0 skipped (no project)." in (
        response.text
    )
    assert sorted(Experiment.objects.filter(project=project).values_list("name", "status")) == [
        ("vit-b", "succeeded"),
        ("vit-l", "failed"),
    ]


def test_a_bad_upload_shows_row_and_column_and_imports_nothing(staff_client, project):
    bad = CSV.format(slug=project.slug).replace("failed", "melted")

    response = staff_client.post(
        reverse("wandb_upload"),
        {
            "file": SimpleUploadedFile("runs.csv", bad.encode()),
            "file_format": "wandb-csv",
            "project_tag": "project",
            "resource_tags": "host",
            "gpu_count_tag": "gpu_count",
            "loss_metric": "loss",
        },
    )

    assert "Nothing was imported" in response.text
    assert "runs.csv, row 3, column State: unknown state “melted”" in response.text
    assert not Experiment.objects.filter(project=project).exists()
    assert Project.objects.filter(pk=project.pk).exists()


def test_an_imported_runs_page_says_where_it_is_tracked(staff_client, project):
    from apps.trackers.services import RunMapping, wandb_runs_import

    wandb_runs_import(
        name="runs.json",
        data=(
            b'[{"id": "r9", "name": "vit-h", "state": "running", "project": "Shelf tests",'
            b' "created_at": "2025-01-02T10:00:00Z", "config": {"project": "'
            + project.slug.encode()
            + b'"}}]'
        ),
        mapping=RunMapping(),
    )
    run = Experiment.objects.get(project=project)

    page = staff_client.get(reverse("experiment_detail", args=[run.pk])).content.decode()

    assert "Tracked in</dt><dd>Weights &amp; Biases, Shelf tests" in page
    assert "<code>wandb-r9</code>" in page
