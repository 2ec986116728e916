"""A CUR manifest's parts resolve inside the manifest's folder (the command, an upload, a bucket's
spool folder) or the folder source's root: an absolute key, `..` or a link leading out fails the
import, naming the key, and nothing is loaded."""

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from apps.billing import services_sources
from apps.billing.models import BillingSource, CostLineItem, ImportRun
from apps.billing.services import import_run_execute

from .conftest import run_import
from .formats.cur import BILLED, cur_lines, write_cur, write_manifest

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

NOW = datetime(2025, 2, 3, 9, 0, tzinfo=UTC)


def manifest_listing(folder: Path, keys: list[str], *, name: str = "cur") -> Path:
    """A manifest in `folder` whose reportKeys are `keys`, written as given."""
    manifest = write_manifest(folder, [cur_lines()[:6]], name=name)
    body = json.loads(manifest.read_text())
    for written in body["reportKeys"]:
        (folder / written).unlink()  # only `keys` are the delivery's
    body["reportKeys"] = keys
    manifest.write_text(json.dumps(body))
    return manifest


def outside_part(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_cur(folder / "secret.csv.gz", cur_lines()[6:], compress=True)


def settled(root: Path) -> None:
    moment = (NOW - timedelta(minutes=10)).timestamp()
    for path in root.rglob("*"):
        os.utime(path, (moment, moment), follow_symlinks=False)


def test_an_absolute_key_is_refused_through_the_command(acme, tmp_path):
    secret = outside_part(tmp_path / "elsewhere")
    manifest = manifest_listing(tmp_path / "delivery", [str(secret)])

    run = run_import(manifest)

    assert run.status == ImportRun.Status.FAILED
    assert run.error == (
        f"cur-Manifest.json: lists part {str(secret)!r}, which is outside its own folder: a "
        "manifest's parts must be inside it"
    )
    assert CostLineItem.objects.count() == 0


def test_a_dotdot_key_is_refused_through_the_command(acme, tmp_path):
    outside_part(tmp_path / "elsewhere")
    key = "../elsewhere/secret.csv.gz"
    manifest = manifest_listing(tmp_path / "delivery", [key])

    run = run_import(manifest)

    assert run.status == ImportRun.Status.FAILED
    assert run.error == (
        f"cur-Manifest.json: lists part {key!r}, which is outside its own folder: a manifest's "
        "parts must be inside it"
    )
    assert CostLineItem.objects.count() == 0


def test_a_link_beside_the_manifest_leading_out_is_refused(acme, tmp_path):
    secret = outside_part(tmp_path / "elsewhere")
    delivery = tmp_path / "delivery"
    manifest = manifest_listing(delivery, ["link.csv.gz"])
    (delivery / "link.csv.gz").symlink_to(secret)

    run = run_import(manifest)

    assert run.status == ImportRun.Status.FAILED
    assert run.error == (
        "cur-Manifest.json: lists part 'link.csv.gz', which is outside its own folder: a "
        "manifest's parts must be inside it"
    )


def test_keys_that_stay_inside_the_folder_still_load(acme, tmp_path):
    delivery = tmp_path / "delivery"
    lines = cur_lines()
    manifest = write_manifest(delivery, [lines[:6], lines[6:]])
    body = json.loads(manifest.read_text())
    # A key with a `..` that comes back inside, and a key found under its file name.
    first, second = body["reportKeys"]
    body["reportKeys"] = [f"reports/../{first}", f"s3-prefix/{Path(second).name}"]
    (delivery / Path(second).name).write_bytes((delivery / second).read_bytes())
    manifest.write_text(json.dumps(body))

    run = run_import(manifest)

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.billed_cost == {"USD": str(BILLED)}


def folder_source(path: Path) -> BillingSource:
    return services_sources.billing_source_create(
        name="exports", kind=BillingSource.Kind.FOLDER, path=str(path)
    )


def poll_and_run(root: Path) -> list[ImportRun]:
    settled(root)
    poll = services_sources.billing_source_poll(source=folder_source(root), now=NOW)
    return [import_run_execute(import_run=run) for run in poll.import_runs.order_by("pk")]


def test_a_key_outside_the_source_root_fails_its_run_through_a_folder_source(acme, tmp_path):
    outside_part(tmp_path / "elsewhere")
    root = tmp_path / "root"
    key = "../../elsewhere/secret.csv.gz"
    manifest_listing(root / "reports", [key])

    runs = poll_and_run(root)

    assert [(run.status, run.error) for run in runs] == [
        (
            ImportRun.Status.FAILED,
            f"cur-Manifest.json: lists part {key!r}, which is outside the source: a manifest's "
            "parts must be inside it",
        )
    ]
    assert CostLineItem.objects.count() == 0


def test_a_key_elsewhere_under_the_source_root_loads_through_a_folder_source(acme, tmp_path):
    root = tmp_path / "root"
    outside_part(root / "parts")
    manifest = manifest_listing(root / "reports", ["../parts/secret.csv.gz"])

    runs = poll_and_run(root)
    through_command = run_import(manifest)

    assert [(run.status, run.error) for run in runs] == [(ImportRun.Status.SUCCEEDED, "")]
    assert runs[0].results[0]["rows"] == 5
    # The same manifest given to the command is held to its own folder.
    assert through_command.status == ImportRun.Status.FAILED
    assert through_command.error == (
        "cur-Manifest.json: lists part '../parts/secret.csv.gz', which is outside its own "
        "folder: a manifest's parts must be inside it"
    )
