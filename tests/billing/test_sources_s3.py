"""Polling an S3-compatible bucket source against a real S3 server on loopback (moto's server
mode): new, changed and unchanged objects, a CUR manifest and its parts, a server that goes down
(marked, retried, nothing lost) and credentials or a bucket that are missing."""

import json
from datetime import date, timedelta
from pathlib import Path

import pytest

from apps.billing import services_sources, sources
from apps.billing.models import BillingSource, ImportRun, SourcePoll
from apps.billing.sources import SourceUnavailable
from tests.conftest_s3 import s3, s3_server  # noqa: F401 - fixtures

from .conftest import focus_line, write_focus
from .formats.cur import BILLED, EFFECTIVE, cur_lines, write_manifest
from .test_sources import NOW, counts, current_spend, execute

pytestmark = pytest.mark.django_db(databases=["default", "progress"])


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path) -> Path:
    settings.COSTSITE_DATA_DIR = tmp_path / "data"
    return settings.COSTSITE_DATA_DIR


def focus_bytes(tmp_path: Path, *amounts: str) -> bytes:
    lines = [
        focus_line(BilledCost=amount, EffectiveCost=amount, ResourceId=f"i-{number}")
        for number, amount in enumerate(amounts)
    ]
    return write_focus(tmp_path / "sample.csv", lines).read_bytes()


def bucket_source(s3, prefix: str = "exports/") -> BillingSource:  # noqa: F811
    return services_sources.billing_source_create(
        name="bucket",
        kind=BillingSource.Kind.S3,
        bucket=s3.name,
        prefix=prefix,
        endpoint_url=s3.server.url,
        region="us-east-1",
    )


def test_new_changed_and_unchanged_objects_are_imported_once_each(acme, s3, tmp_path, data_dir):  # noqa: F811
    s3.put("exports/focus/2025-01.csv", focus_bytes(tmp_path, "1.50", "2.25"))
    s3.put("elsewhere/2025-01.csv", focus_bytes(tmp_path, "99.00"))
    s3.put("exports/notes.txt", b"not a bill")
    source = bucket_source(s3)

    first = services_sources.billing_source_poll(source=source, now=NOW)
    [run] = execute(first)
    assert counts(first) == ("succeeded", 1, 1, 0, 0, 1)
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.paths == [
        str(data_dir / "sources" / str(source.pk) / str(first.pk) / "1" / "2025-01.csv")
    ]
    assert current_spend() == {("111111111111", date(2025, 1, 1)): {"USD": "3.75"}}

    unchanged = services_sources.billing_source_poll(source=source, now=NOW + timedelta(hours=1))
    assert counts(unchanged) == ("succeeded", 1, 0, 0, 1, 0)
    # The first poll's download is gone once its run is done.
    assert not (data_dir / "sources" / str(source.pk) / str(first.pk)).exists()

    s3.put("exports/focus/2025-01.csv", focus_bytes(tmp_path, "1.50", "2.25", "10.000001"))
    changed = services_sources.billing_source_poll(source=source, now=NOW + timedelta(hours=2))
    [rerun] = execute(changed)
    assert counts(changed) == ("succeeded", 1, 0, 1, 0, 1)
    assert rerun.status == ImportRun.Status.SUCCEEDED, rerun.error
    assert current_spend() == {("111111111111", date(2025, 1, 1)): {"USD": "13.750001"}}

    # The same bytes uploaded again keep their ETag: nothing to do.
    s3.put("exports/focus/2025-01.csv", focus_bytes(tmp_path, "1.50", "2.25", "10.000001"))
    again = services_sources.billing_source_poll(source=source, now=NOW + timedelta(hours=3))
    assert counts(again) == ("succeeded", 1, 0, 0, 1, 0)
    assert ImportRun.objects.count() == 2


def test_a_cur_manifest_and_its_parts_are_downloaded_and_load_as_one_delivery(acme, s3, tmp_path):  # noqa: F811
    lines = cur_lines()
    local = tmp_path / "cur"
    manifest = write_manifest(local, [lines[:6], lines[6:]])
    keys = json.loads(manifest.read_text())["reportKeys"]
    for key in keys:
        s3.put(key, (local / key).read_bytes())
    # AWS writes the manifest in the period's folder; its report keys are keys of the bucket.
    s3.put("reports/cur/20250101-20250201/cur-Manifest.json", manifest.read_bytes())
    source = bucket_source(s3, prefix="reports/")

    poll = services_sources.billing_source_poll(source=source, now=NOW)
    [run] = execute(poll)

    assert counts(poll) == ("succeeded", 3, 3, 0, 0, 1)
    assert run.display_name == "reports/cur/20250101-20250201/cur-Manifest.json"
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert (run.billed_cost, run.effective_cost) == ({"USD": str(BILLED)}, {"USD": str(EFFECTIVE)})
    assert run.results[0]["rows"] == 11


def test_a_server_that_goes_down_is_marked_retried_and_nothing_is_lost(acme, s3, tmp_path):  # noqa: F811
    source = bucket_source(s3)
    s3.put("exports/2025-01.csv", focus_bytes(tmp_path, "5.00"))
    s3.server.stop()

    with pytest.raises(SourceUnavailable):
        services_sources.billing_source_poll(source=source, now=NOW)

    failed = SourcePoll.objects.get()
    assert failed.status == SourcePoll.Status.FAILED
    assert failed.error.startswith(
        f"s3://{s3.name}/exports/ cannot be reached: Could not connect to the endpoint URL: "
        f'"{s3.server.url}/{s3.name}?list-type=2'
    )
    source.refresh_from_db()
    assert (source.health, source.consecutive_failures, source.last_error) == (
        BillingSource.Health.UNHEALTHY,
        1,
        failed.error,
    )
    assert source.next_poll_at == NOW + timedelta(minutes=1 + 60)

    s3.server.start()
    back = services_sources.billing_source_poll(source=source, now=NOW + timedelta(hours=2))
    execute(back)

    assert counts(back) == ("succeeded", 1, 1, 0, 0, 1)
    source.refresh_from_db()
    assert (source.health, source.consecutive_failures) == (BillingSource.Health.HEALTHY, 0)
    assert current_spend() == {("111111111111", date(2025, 1, 1)): {"USD": "5.00"}}


def test_missing_credentials_and_a_missing_bucket_are_named(acme, s3, monkeypatch):  # noqa: F811
    missing = services_sources.billing_source_create(
        name="typo",
        kind=BillingSource.Kind.S3,
        bucket="no-such-bucket",
        endpoint_url=s3.server.url,
        region="us-east-1",
    )
    with pytest.raises(SourceUnavailable, match="does not exist"):
        services_sources.billing_source_poll(source=missing, now=NOW)
    missing.refresh_from_db()
    assert missing.last_error == "s3://no-such-bucket/: the bucket does not exist (NoSuchBucket)."

    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    source = bucket_source(s3)
    with pytest.raises(SourceUnavailable):
        services_sources.billing_source_poll(source=source, now=NOW)
    source.refresh_from_db()
    assert source.last_error == (
        f"s3://{s3.name}/exports/: no S3 credentials; set AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY in the environment of the web and worker processes."
    )


def test_a_listing_longer_than_a_page_is_followed_to_its_end(acme, s3, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setattr(sources, "S3_PAGE_SIZE", 2)
    for month in range(1, 6):
        s3.put(f"exports/2024-{month:02d}.csv", focus_bytes(tmp_path, f"{month}.00"))
    source = bucket_source(s3)
    pages = []
    make_client = sources.s3_client

    def counting_client(source):
        client = make_client(source)
        client.meta.events.register(
            "after-call.s3.ListObjectsV2", lambda **kwargs: pages.append(kwargs["parsed"])
        )
        return client

    monkeypatch.setattr(sources, "s3_client", counting_client)
    listing = sources.s3_list(source)

    assert [len(page.get("Contents", [])) for page in pages] == [2, 2, 1]
    assert [f.key for f in listing.files] == [f"exports/2024-{m:02d}.csv" for m in range(1, 6)]
    poll = services_sources.billing_source_poll(source=source, now=NOW)
    assert counts(poll) == ("succeeded", 5, 5, 0, 0, 5)
