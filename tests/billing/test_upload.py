"""The upload page: files stream to disk under a generated name in BILLING_UPLOAD_DIR, a file over
the limit is refused with a message that says the limit and leaves nothing behind, and a file
within it imports with exact totals. Staff only."""

import gzip
import re
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from apps.billing import uploads
from apps.billing.models import ImportRun
from apps.billing.services import import_run_execute
from apps.billing.uploads import display_name_clean, generated_name

from .conftest import focus_line, write_focus

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

LIMIT_1000 = (
    "The file is over the upload limit of 1.0 KB (1,000 bytes). Larger files go through a "
    "billing source: a folder or a bucket that costsite polls."
)


@pytest.fixture
def upload_dir(settings, tmp_path) -> Path:
    # Not created beforehand: the handler creates it.
    settings.BILLING_UPLOAD_DIR = tmp_path / "var" / "uploads"
    return settings.BILLING_UPLOAD_DIR


@pytest.fixture
def january(tmp_path) -> Path:
    return write_focus(
        tmp_path / "january.csv",
        [
            focus_line(EffectiveCost="32.7726", BilledCost="40.00"),
            focus_line(EffectiveCost="0.000000000000001", BilledCost="0"),
            focus_line(BillingCurrency="EUR", EffectiveCost="5.25", BilledCost="5.25"),
        ],
    )


def _post(client: Client, path: Path, fmt: str = "auto", **extra):
    with path.open("rb") as handle:
        return client.post(reverse("import_upload"), {"format": fmt, "file": handle}, **extra)


def test_an_upload_lands_under_a_generated_name_with_the_same_bytes(
    staff_client, staff, upload_dir, january
):
    response = _post(staff_client, january)

    run = ImportRun.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("import_run_detail", args=[run.pk])
    stored = Path(run.paths[0])
    assert stored.parent == upload_dir.resolve()
    assert re.fullmatch(r"[0-9a-f]{32}\.csv", stored.name)
    assert stored.read_bytes() == january.read_bytes()
    assert list(upload_dir.iterdir()) == [stored]
    assert (run.origin, run.display_name, run.created_by, run.status) == (
        ImportRun.Origin.UPLOAD,
        "january.csv",
        staff,
        ImportRun.Status.QUEUED,
    )


def test_an_uploaded_file_imports_with_exact_totals(staff_client, upload_dir, january):
    _post(staff_client, january)

    run = import_run_execute(import_run=ImportRun.objects.get())

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.effective_cost == {"EUR": "5.25", "USD": "32.772600000000001"}
    assert run.billed_cost == {"EUR": "5.25", "USD": "40.00"}
    assert run.line_items == 3
    page = staff_client.get(reverse("import_run_detail", args=[run.pk])).content.decode()
    assert '<td class="num total-effective">$32.77</td>' in page
    assert '<td class="num total-billed">$40.00</td>' in page
    assert '<td class="num total-effective">€5.25</td>' in page


def test_a_gzip_upload_keeps_its_extension_and_imports(staff_client, upload_dir, tmp_path):
    path = write_focus(
        tmp_path / "february.csv.gz", [focus_line(EffectiveCost="7.50")], compress=True
    )

    _post(staff_client, path, fmt="focus")

    run = ImportRun.objects.get()
    stored = Path(run.paths[0])
    assert re.fullmatch(r"[0-9a-f]{32}\.csv\.gz", stored.name)
    assert gzip.decompress(stored.read_bytes()) == gzip.decompress(path.read_bytes())
    run = import_run_execute(import_run=run)
    assert (run.status, run.requested_format, run.effective_cost) == (
        ImportRun.Status.SUCCEEDED,
        "focus",
        {"USD": "7.50"},
    )


def test_a_body_longer_than_the_limit_is_refused_before_a_byte_is_written(
    staff_client, upload_dir, settings, tmp_path, monkeypatch
):
    settings.BILLING_UPLOAD_MAX_BYTES = 1000
    path = tmp_path / "big.csv"
    path.write_bytes(b"x" * (1000 + uploads.MULTIPART_OVERHEAD + 1))
    written = []
    monkeypatch.setattr(
        uploads.BillingUploadHandler,
        "receive_data_chunk",
        lambda self, data, start: written.append(data),
    )

    response = _post(staff_client, path)

    assert response.status_code == 200
    assert response.context["form"].errors["file"] == [LIMIT_1000]
    assert LIMIT_1000 in response.content.decode()
    assert written == []
    assert not upload_dir.exists()
    assert ImportRun.objects.count() == 0


def test_a_file_over_the_limit_is_stopped_as_its_bytes_arrive_and_removed(
    staff_client, upload_dir, settings, tmp_path
):
    # The body's Content-Length passes the first check (the form's overhead is allowed for),
    # so the bytes counted decide.
    settings.BILLING_UPLOAD_MAX_BYTES = 1000
    path = tmp_path / "just-over.csv"
    path.write_bytes(b"y" * 1001)

    response = _post(staff_client, path)

    assert response.status_code == 200
    assert response.context["form"].errors["file"] == [LIMIT_1000]
    assert list(upload_dir.iterdir()) == []  # the partial file is gone
    assert ImportRun.objects.count() == 0


def test_a_file_of_exactly_the_limit_is_taken(staff_client, upload_dir, settings, tmp_path):
    settings.BILLING_UPLOAD_MAX_BYTES = 1000
    path = tmp_path / "exact.csv"
    path.write_bytes(b"z" * 1000)

    response = _post(staff_client, path)

    assert response.status_code == 302
    assert Path(ImportRun.objects.get().paths[0]).stat().st_size == 1000


def test_the_limit_error_comes_back_in_place_for_htmx(staff_client, upload_dir, settings, tmp_path):
    settings.BILLING_UPLOAD_MAX_BYTES = 1000
    path = tmp_path / "just-over.csv"
    path.write_bytes(b"y" * 1500)

    response = _post(staff_client, path, headers={"HX-Request": "true"})

    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<form id="upload-form"')
    assert "<html" not in body
    assert LIMIT_1000 in body


def test_the_upload_page_states_the_default_limit(staff_client):
    page = staff_client.get(reverse("import_upload")).content.decode()
    assert "up to 1.0 GB (1,000,000,000 bytes). Larger files go through a billing source" in page
    assert 'enctype="multipart/form-data"' in page


def test_a_refused_form_leaves_no_file(staff_client, upload_dir, january):
    response = _post(staff_client, january, fmt="no-such-format")

    assert response.status_code == 200
    assert "no-such-format is not one of the available choices" in response.content.decode()
    assert list(upload_dir.iterdir()) == []
    assert ImportRun.objects.count() == 0


def test_a_failed_csrf_check_leaves_no_file(staff, upload_dir, january, settings):
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff)
    # A cookie but no token in the form: the check reads the whole body (the file is written)
    # before it refuses.
    client.cookies[settings.CSRF_COOKIE_NAME] = "a" * 32
    written = []
    original = uploads.BillingUploadHandler.file_complete

    def complete(self, size):
        written.append(self._path)
        return original(self, size)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(uploads.BillingUploadHandler, "file_complete", complete)
        response = _post(client, january)

    assert response.status_code == 403
    assert len(written) == 1
    assert list(upload_dir.iterdir()) == []
    assert ImportRun.objects.count() == 0


def test_an_htmx_upload_is_sent_to_the_run_page(staff_client, upload_dir, january):
    response = _post(staff_client, january, headers={"HX-Request": "true"})

    run = ImportRun.objects.get()
    assert response["HX-Redirect"] == reverse("import_run_detail", args=[run.pk])


@pytest.mark.parametrize("who", ["member_client", "lead_client", "outsider_client"])
def test_anybody_but_staff_gets_404_and_writes_nothing(request, who, upload_dir, january):
    client = request.getfixturevalue(who)

    assert client.get(reverse("import_upload")).status_code == 404
    assert _post(client, january).status_code == 404
    assert not upload_dir.exists()
    assert ImportRun.objects.count() == 0


def test_the_display_name_is_the_original_name_made_safe_to_show():
    assert display_name_clean("C:\\exports\\jan\x00uary\n  2025.csv") == "january 2025.csv"
    assert display_name_clean("../../\x07") == "upload"
    long = display_name_clean("a" * 400 + ".csv.gz")
    assert len(long) == 255 and long.endswith("….gz")


@pytest.mark.parametrize(
    ("original", "suffix"),
    [
        ("bill.CSV", ".csv"),
        ("bill.csv.gz", ".csv.gz"),
        ("part-00001.snappy.parquet", ".parquet"),
        ("export.json", ".json"),
        ("report.exe", ""),
        ("noextension", ""),
    ],
)
def test_the_generated_name_keeps_only_a_known_extension(original, suffix):
    name = generated_name(original)
    assert re.fullmatch(r"[0-9a-f]{32}" + re.escape(suffix), name)
