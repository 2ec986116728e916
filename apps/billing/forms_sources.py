"""The billing source form (a folder or a bucket, with the fields of the other kind cleared) and
the form that re-runs a source for a range of billing periods."""

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from django import forms

from costsite.forms import SiteForm, SiteModelForm

from .api_sources import report_formats
from .forms_imports import format_choices
from .models import API_KIND_NAMES, BillingSource

# S3's rules for bucket names (3-63 lower-case letters, digits, dots and hyphens).
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
FOLDER_FIELDS = ("path",)
S3_FIELDS = ("bucket", "prefix", "endpoint_url", "region")
API_FIELDS = ("api_key_env", "restate_days")
MAX_RESTATE_DAYS = 366
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _http_url(url: str) -> bool:
    """An http(s) URL with a host; urlsplit raises ValueError on some (`http://[::1`)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.netloc)


class BillingSourceForm(SiteModelForm):
    fieldsets = [
        ("Folder only", list(FOLDER_FIELDS)),
        ("S3-compatible bucket only", list(S3_FIELDS)),
        ("Hosted API only (and its URL above, when not the provider's)", list(API_FIELDS)),
        ("Schedule and freshness", ["interval_minutes", "freshness_lag_days", "is_paused"]),
    ]

    format = forms.ChoiceField(
        choices=format_choices,
        initial="auto",
        help_text="Detecting it tells FOCUS, AWS CUR, GCP and Azure exports apart by their "
        "columns, file by file.",
    )

    restate_days = forms.IntegerField(
        required=False,
        min_value=1,
        # A poll pulls these days again every time; beyond a year the window's start is no date
        # at all (10,000,000 days: OverflowError in the poll).
        max_value=MAX_RESTATE_DAYS,
        initial=3,
        label="Pull again the last (days)",
        help_text="Hosted API only: the days before the last good poll pulled again each time "
        "(the providers' figures arrive late). Empty: 3.",
    )

    class Meta:
        model = BillingSource
        fields = [
            "name",
            "kind",
            "format",
            "path",
            "bucket",
            "prefix",
            "endpoint_url",
            "region",
            "api_key_env",
            "restate_days",
            "interval_minutes",
            "freshness_lag_days",
            "is_paused",
        ]
        labels = {
            "path": "Folder",
            "is_paused": "Paused",
            "interval_minutes": "Poll every (minutes)",
            "freshness_lag_days": "Warn when the data is older than (days)",
        }
        widgets = {
            "path": forms.TextInput(attrs={"class": "mono", "spellcheck": "false"}),
            "prefix": forms.TextInput(attrs={"class": "mono", "spellcheck": "false"}),
            "endpoint_url": forms.TextInput(attrs={"class": "mono", "spellcheck": "false"}),
            "api_key_env": forms.TextInput(attrs={"class": "mono", "spellcheck": "false"}),
        }

    def clean(self):
        cleaned = super().clean()
        for name in ("path", "bucket", "prefix", "endpoint_url", "region"):
            if isinstance(cleaned.get(name), str):
                cleaned[name] = cleaned[name].strip()
        if not cleaned.get("restate_days"):
            cleaned["restate_days"] = 3
        kind = cleaned.get("kind")
        if kind == BillingSource.Kind.FOLDER:
            self._clean_folder(cleaned)
            for name in S3_FIELDS:
                cleaned[name] = ""
        elif kind == BillingSource.Kind.S3:
            self._clean_bucket(cleaned)
            for name in FOLDER_FIELDS:
                cleaned[name] = ""
        elif kind in API_KIND_NAMES:
            self._clean_api(cleaned, kind)
            for name in (*FOLDER_FIELDS, "bucket", "prefix", "region"):
                cleaned[name] = ""
        return cleaned

    def _clean_api(self, cleaned: dict, kind: str) -> None:
        reports = report_formats(kind)
        if cleaned.get("format") not in ("auto", *reports):
            self.add_error("format", f"This source pulls one of: {', '.join(reports)}.")
        url = cleaned.get("endpoint_url", "")
        if not url and not API_KIND_NAMES[kind]:
            self.add_error("endpoint_url", "Give the proxy's URL, e.g. http://litellm:4000.")
        elif url and not _http_url(url):
            self.add_error("endpoint_url", "Give the API's URL, e.g. https://api.openai.com.")
        variable = cleaned.get("api_key_env", "").strip()
        cleaned["api_key_env"] = variable
        if variable and not ENV_NAME.match(variable):
            self.add_error("api_key_env", "An environment variable's name: letters, digits, _.")

    def _clean_folder(self, cleaned: dict) -> None:
        path = cleaned.get("path", "")
        if not path:
            self.add_error("path", "Give the server folder the exports are dropped into.")
        elif not Path(path).is_absolute():
            self.add_error("path", "Give the folder's full path, starting with /.")
        elif not Path(path).is_dir():
            self.add_error("path", f"{path} does not exist on the server (or is not a folder).")
        elif not os.access(path, os.R_OK | os.X_OK):
            self.add_error("path", f"{path} cannot be read by costsite (permission denied).")

    def _clean_bucket(self, cleaned: dict) -> None:
        bucket = cleaned.get("bucket", "")
        if not bucket:
            self.add_error("bucket", "Give the bucket's name.")
        elif not BUCKET_NAME.match(bucket):
            self.add_error(
                "bucket",
                "A bucket name is 3 to 63 lower-case letters, digits, dots and hyphens "
                "(the name only, without s3://).",
            )
        cleaned["prefix"] = cleaned.get("prefix", "").lstrip("/")
        url = cleaned.get("endpoint_url", "")
        if url and not _http_url(url):
            self.add_error("endpoint_url", "Give the server's URL, e.g. http://minio:9000.")


class RerunForm(SiteForm):
    period_start = forms.DateField(
        label="Billing periods from",
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="The first billing period to import again (its first day).",
    )
    period_end = forms.DateField(
        label="until (not included)",
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="Periods starting before this day are imported again.",
    )

    def clean(self):
        cleaned = super().clean()
        start, end = cleaned.get("period_start"), cleaned.get("period_end")
        if start and end and end <= start:
            self.add_error("period_end", "The end comes after the start.")
        return cleaned
