"""Billing files uploaded through the page: streamed to disk as they arrive, never held in memory.

`BillingUploadHandler` replaces Django's memory and temporary-file handlers for the upload view:
each chunk goes straight into the final file, under a generated name in
settings.BILLING_UPLOAD_DIR (outside the web root). It refuses a body whose Content-Length is over
the limit before writing a byte, and counts the bytes anyway (a client may send no length, or a
wrong one): past the limit it removes the partial file and stops. The view installs it before
anything reads request.POST or request.FILES (see views_imports.upload).
"""

import os
import re
import uuid
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, StopFutureHandlers, StopUpload

from apps.accounts.templatetags.costsite import bytes_

# Room for the other form fields, boundaries and part headers in a multipart body: a body longer
# than the limit plus this cannot hold a file within the limit.
MULTIPART_OVERHEAD = 64 * 1024
# Extensions kept in the generated name (longest first). The importer tells gzip and Parquet by
# their content, but a name that says what the file is helps whoever looks at the folder.
KEPT_SUFFIXES = (
    ".csv.gz",
    ".json.gz",
    ".ndjson.gz",
    ".jsonl.gz",
    ".parquet",
    ".csv",
    ".gz",
    ".json",
    ".ndjson",
    ".jsonl",
)
DISPLAY_NAME_MAX = 255


def limit_text(limit: int) -> str:
    """1.0 KB (1,000 bytes): the unit people read, and the exact figure the server counts."""
    return f"{bytes_(limit)} ({limit:,} bytes)"


def upload_limit_message(limit: int) -> str:
    return (
        f"The file is over the upload limit of {limit_text(limit)}. "
        "Larger files go through a billing source: a folder or a bucket that costsite polls."
    )


def display_name_clean(name: str) -> str:
    """The uploader's file name, fit to show: no folders, no control characters, one line."""
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(char for char in name if char.isprintable())
    name = re.sub(r"\s+", " ", name).strip()
    if len(name) > DISPLAY_NAME_MAX:
        stem, dot, suffix = name.rpartition(".")
        keep = f".{suffix}" if dot and len(suffix) <= 10 else ""
        name = name[: DISPLAY_NAME_MAX - len(keep) - 1] + "…" + keep
    return name or "upload"


def generated_name(original: str) -> str:
    """A fresh random name with the original's extension when it is one the importer reads."""
    lowered = original.lower()
    suffix = next((s for s in KEPT_SUFFIXES if lowered.endswith(s)), "")
    return f"{uuid.uuid4().hex}{suffix}"


class StoredUpload(UploadedFile):
    """A file already in its final place: `path` is where, `original_name` what it was called."""

    def __init__(self, *, path: Path, original_name: str, size: int, content_type: str):
        super().__init__(
            file=None, name=original_name, content_type=content_type, size=size, charset=None
        )
        self.path = path
        self.original_name = original_name

    def open(self, mode="rb"):
        self.file = self.path.open(mode)
        return self

    def close(self):
        if self.file is not None:
            self.file.close()


class BillingUploadHandler(FileUploadHandler):
    """Writes uploaded files straight to settings.BILLING_UPLOAD_DIR; stops past the limit.

    After the request's body is parsed, `error` says why a file was refused (empty when none
    was) and `paths` lists the files it wrote; the view removes them if no import takes them.
    """

    def __init__(self, request=None):
        super().__init__(request)
        self.max_bytes = int(settings.BILLING_UPLOAD_MAX_BYTES)
        self.directory = Path(settings.BILLING_UPLOAD_DIR)
        self.error = ""
        self.paths: list[Path] = []
        self.kept: Path | None = None
        self.too_long = False
        self._handle = None
        self._path: Path | None = None
        self._received = 0

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        # Decided before a byte is written; the form fields before the file (the CSRF token)
        # are still parsed, and the refusal comes when the file part starts.
        self.too_long = content_length is not None and (
            content_length > self.max_bytes + MULTIPART_OVERHEAD
        )
        return None

    def new_file(self, field_name, file_name, *args, **kwargs):
        super().new_file(field_name, file_name, *args, **kwargs)
        if self.too_long:
            self._refuse()
        self.directory.mkdir(parents=True, exist_ok=True)
        self._path = self.directory / generated_name(file_name)
        # Exclusive creation: a generated name never overwrites anything; owner-only access.
        fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        self._handle = os.fdopen(fd, "wb")
        self.paths.append(self._path)
        # No other handler sees this file: nothing of it is kept in memory or in /tmp.
        raise StopFutureHandlers

    def receive_data_chunk(self, raw_data, start):
        # Counted over every file of the request: the limit is on what one upload brings.
        self._received += len(raw_data)
        if self._received > self.max_bytes:
            self._refuse()
        self._handle.write(raw_data)
        return None

    def file_complete(self, file_size):
        self._handle.close()
        self._handle = None
        return StoredUpload(
            path=self._path,
            original_name=self.file_name,
            size=file_size,
            content_type=self.content_type,
        )

    def upload_interrupted(self):
        # The client went away in the middle of a file.
        self.discard()

    def _refuse(self):
        self.error = upload_limit_message(self.max_bytes)
        self.discard()
        # Read (and drop) the rest of the body, so the browser gets the page with the error.
        raise StopUpload(connection_reset=False)

    def keep(self, path: Path) -> None:
        """An import took this file: `discard()` leaves it."""
        self.kept = path

    def discard(self) -> None:
        """Remove every file this upload wrote but the one an import took (refused forms, a
        failed CSRF check, extra files in the request)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        for path in self.paths:
            if path != self.kept:
                path.unlink(missing_ok=True)
        self.paths = [self.kept] if self.kept in self.paths else []
