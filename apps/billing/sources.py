"""Listing and reading a billing source's files: a folder on the server or an S3-compatible bucket.

No database here: `services_sources` decides what to import from what these functions list.

What is not a billing export is left out of every listing:
- hidden files and folders, and names starting with `_` (Spark's `_SUCCESS`, `_temporary/`);
- partial uploads and editors' leftovers (`*.tmp`, `*.part`, `*.crdownload`, ...);
- files of a kind no importer reads (anything but CSV, gzip, Parquet, JSON and NDJSON), and the
  Athena CUR's status table (`cost_and_usage_data_status/`);
- in a folder, files modified less than SETTLE_SECONDS ago: a copy may still be writing them, and
  a file is never imported half written. They are listed apart (`arriving`) and taken by the next
  poll. An S3 object exists only once its upload completed, so a bucket has no such wait.
"""

import os
import shutil
import stat
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from .models import API_KIND_NAMES, BillingSource

SETTLE_SECONDS = 60
EXPORT_SUFFIXES = (".csv", ".gz", ".parquet", ".json", ".jsonl", ".ndjson")
PARTIAL_SUFFIXES = (
    ".tmp",
    ".temp",
    ".part",
    ".partial",
    ".crdownload",
    ".filepart",
    ".download",
    ".swp",
    ".lock",
)
SKIPPED_FOLDERS = {"cost_and_usage_data_status"}
# A CUR manifest is a few kilobytes; anything far larger is not one.
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
COPY_CHUNK_BYTES = 1024 * 1024
# Keys per ListObjectsV2 page (S3's own maximum); the paginator follows the continuation tokens.
S3_PAGE_SIZE = 1000
S3_CONFIG = {
    "connect_timeout": 5,
    "read_timeout": 60,
    "retries": {"max_attempts": 2, "mode": "standard"},
}


class SourceUnavailable(Exception):
    """The source cannot be listed or read: the folder is missing, the bucket unreachable, the
    credentials refused. The message says which, in words an operator can act on."""


@dataclass(frozen=True)
class ListedFile:
    key: str  # the path under the folder (with /), or the object key in the bucket
    size: int
    signature: str  # the ETag, or size and modification time (ns) of a file
    last_modified: datetime | None = None


@dataclass
class Listing:
    files: list[ListedFile] = field(default_factory=list)
    arriving: list[str] = field(default_factory=list)  # keys still being written


def is_manifest(key: str) -> bool:
    return key.lower().endswith("manifest.json")


def is_billing_export(key: str) -> bool:
    parts = PurePosixPath(key).parts
    if not parts:
        return False
    if any(part.startswith((".", "_", "~$")) or part in SKIPPED_FOLDERS for part in parts):
        return False
    name = parts[-1].lower()
    if name.endswith(PARTIAL_SUFFIXES):
        return False
    return name.endswith(EXPORT_SUFFIXES)


# -- folders ---------------------------------------------------------------------------------


def folder_check(path: str) -> None:
    """SourceUnavailable unless `path` is a folder this process may list and read."""
    root = Path(path)
    if not root.is_dir():
        raise SourceUnavailable(f"The folder {path} does not exist (or is not a folder).")
    if not os.access(root, os.R_OK | os.X_OK):
        raise SourceUnavailable(f"The folder {path} cannot be read: permission denied.")


def folder_list(path: str, *, now: datetime) -> Listing:
    folder_check(path)
    root = Path(path)
    listing = Listing()
    settled_before = now.timestamp() - SETTLE_SECONDS

    def refuse(error: OSError) -> None:
        raise SourceUnavailable(f"The folder {error.filename} cannot be read: {error.strerror}.")

    for folder, subfolders, names in os.walk(root, onerror=refuse):
        subfolders[:] = sorted(
            s for s in subfolders if not s.startswith((".", "_")) and s not in SKIPPED_FOLDERS
        )
        for name in sorted(names):
            full = Path(folder) / name
            key = full.relative_to(root).as_posix()
            if not is_billing_export(key):
                continue
            try:
                info = full.stat()
            except FileNotFoundError:
                continue  # removed while we looked: it is not there
            if not stat.S_ISREG(info.st_mode):
                continue
            if info.st_mtime > settled_before:
                listing.arriving.append(key)
                continue
            listing.files.append(
                ListedFile(
                    key=key,
                    size=info.st_size,
                    signature=f"{info.st_size}-{info.st_mtime_ns}",
                    last_modified=datetime.fromtimestamp(info.st_mtime, tz=UTC),
                )
            )
    return listing


def folder_read_manifest(path: str, key: str) -> bytes:
    full = Path(path) / key
    with full.open("rb") as handle:
        return handle.read(MAX_MANIFEST_BYTES + 1)


# -- S3-compatible buckets -------------------------------------------------------------------


def s3_client(source: BillingSource):
    """A client for the source's endpoint and region; credentials come from boto3's usual chain
    (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, an instance role), never the DB."""
    # boto3 is imported on first use: a process that never reads a bucket (an import of a
    # file, the web server) does not pay its second of start-up and its memory.
    import boto3
    from botocore.config import Config

    session = boto3.session.Session()
    return session.client(
        "s3",
        endpoint_url=source.endpoint_url or None,
        region_name=source.region or None,
        config=Config(**S3_CONFIG),
    )


def _boto_errors() -> tuple[type[Exception], ...]:
    """botocore's errors, for an `except` (evaluated only when something was raised)."""
    from botocore.exceptions import BotoCoreError, ClientError

    return (BotoCoreError, ClientError)


def _s3_error(source: BillingSource, exc: Exception) -> SourceUnavailable:
    from botocore.exceptions import ClientError, NoCredentialsError

    where = f"s3://{source.bucket}/{source.prefix}"
    if isinstance(exc, NoCredentialsError):
        return SourceUnavailable(
            f"{where}: no S3 credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the "
            "environment of the web and worker processes."
        )
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code", "")
        message = error.get("Message", "") or str(exc)
        if code in {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403"}:
            return SourceUnavailable(f"{where}: the credentials were refused ({code}: {message})")
        if code in {"NoSuchBucket", "404"}:
            return SourceUnavailable(f"{where}: the bucket does not exist ({code}).")
        return SourceUnavailable(f"{where}: {code}: {message}")
    return SourceUnavailable(f"{where} cannot be reached: {exc}")


def s3_list(source: BillingSource) -> Listing:
    client = s3_client(source)
    listing = Listing()
    try:
        pages = client.get_paginator("list_objects_v2").paginate(
            Bucket=source.bucket,
            Prefix=source.prefix,
            PaginationConfig={"PageSize": S3_PAGE_SIZE},
        )
        for page in pages:
            for item in page.get("Contents", []):
                key = item["Key"]
                relative = key[len(source.prefix) :] if key.startswith(source.prefix) else key
                if key.endswith("/") or not is_billing_export(relative):
                    continue
                listing.files.append(
                    ListedFile(
                        key=key,
                        size=item["Size"],
                        signature=item["ETag"].strip('"'),
                        last_modified=item.get("LastModified"),
                    )
                )
    except _boto_errors() as exc:
        raise _s3_error(source, exc) from exc
    return listing


def s3_read_manifest(source: BillingSource, key: str, *, client=None) -> bytes:
    client = client or s3_client(source)
    try:
        body = client.get_object(Bucket=source.bucket, Key=key)["Body"]
        return body.read(MAX_MANIFEST_BYTES + 1)
    except _boto_errors() as exc:
        raise _s3_error(source, exc) from exc


def s3_download(source: BillingSource, key: str, target: Path, *, client=None) -> None:
    """Stream the object to `target` in chunks: a bill of gigabytes never sits in memory."""
    client = client or s3_client(source)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        body = client.get_object(Bucket=source.bucket, Key=key)["Body"]
        with target.open("wb") as handle:
            shutil.copyfileobj(body, handle, COPY_CHUNK_BYTES)
    except _boto_errors() as exc:
        raise _s3_error(source, exc) from exc
    except OSError as exc:
        raise SourceUnavailable(f"s3://{source.bucket}/{key} cannot be saved: {exc}") from exc


def root_of(source: BillingSource) -> str:
    """The server folder a folder source's (or a hosted-API source's pulled) files are under."""
    if source.kind in API_KIND_NAMES:
        from .api_sources import state_dir

        return str(state_dir(source))
    return source.path


def listing_of(source: BillingSource, *, now: datetime) -> Listing:
    if source.kind == BillingSource.Kind.S3:
        return s3_list(source)
    if source.kind in API_KIND_NAMES:
        from .api_sources import pull  # it lists through this module's types

        return pull(source, now=now)
    return folder_list(source.path, now=now)


def read_manifest(source: BillingSource, key: str) -> bytes:
    if source.kind == BillingSource.Kind.S3:
        return s3_read_manifest(source, key)
    try:
        return folder_read_manifest(root_of(source), key)
    except OSError as exc:
        raise SourceUnavailable(f"{Path(source.path) / key} cannot be read: {exc}") from exc
