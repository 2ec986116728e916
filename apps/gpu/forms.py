from urllib.parse import urlsplit

from django import forms
from django.core.exceptions import ValidationError

from costsite.forms import SiteModelForm

from .models import HostMapping, MetricSource, TrafficSource, host_name_problem

TRAFFIC_WINDOW_MAX_HOURS = 24 * 31


class MetricSourceForm(SiteModelForm):
    fieldsets = [
        ("Schedule", ["interval_seconds", "is_paused"]),
        ("Prometheus only", ["series_selector", "step_seconds", "query_window_minutes"]),
    ]

    class Meta:
        model = MetricSource
        fields = [
            "name",
            "kind",
            "url",
            "host",
            "interval_seconds",
            "is_paused",
            "series_selector",
            "step_seconds",
            "query_window_minutes",
        ]
        labels = {
            "is_paused": "Paused",
            "interval_seconds": "Poll every (seconds)",
            "step_seconds": "Step (seconds)",
            "query_window_minutes": "First pull reaches back (minutes)",
        }
        widgets = {
            "url": forms.TextInput(attrs={"class": "mono", "spellcheck": "false"}),
            "series_selector": forms.TextInput(attrs={"class": "mono"}),
        }

    def clean_url(self) -> str:
        return self.cleaned_data["url"].strip()

    def clean_interval_seconds(self) -> int:
        value = self.cleaned_data["interval_seconds"]
        if value < 5:
            raise ValidationError("Poll at most every 5 seconds.")
        return value

    def clean_step_seconds(self) -> int:
        value = self.cleaned_data["step_seconds"]
        if value < 1:
            raise ValidationError("The step is at least 1 second.")
        return value

    def clean_series_selector(self) -> str:
        value = self.cleaned_data["series_selector"].strip()
        if value.startswith("{") or value.endswith("}"):
            raise ValidationError(
                'Leave out the braces: job="gpu-metrics", not {job="gpu-metrics"}.'
            )
        return value

    def clean(self):
        cleaned = super().clean()
        url = cleaned.get("url", "")
        try:
            path = urlsplit(url).path.strip("/")
        except ValueError:  # not a URL: the model's validator says so beside the field
            path = None
        if cleaned.get("kind") == MetricSource.Kind.DCGM and url and path == "":
            self.add_error(
                "url", "Give the exporter's full metrics URL, e.g. http://node:9400/metrics."
            )
        return cleaned


class HostMappingForm(SiteModelForm):
    class Meta:
        model = HostMapping
        fields = ["host", "resource_id", "note"]
        labels = {"resource_id": "Billed resource id"}
        error_messages = {
            "host": {"unique": "This host is mapped already: edit its mapping in the list below."}
        }
        help_texts = {
            "host": "As the metrics name it (the Hostname label, or --host for nvidia-smi logs).",
            "resource_id": "As the bill names it: i-0a1b2c3d4e5f67890, an ARN, a VM name.",
        }
        widgets = {
            "host": forms.TextInput(attrs={"class": "mono", "spellcheck": "false"}),
            "resource_id": forms.TextInput(attrs={"class": "mono", "spellcheck": "false"}),
        }

    def clean_host(self) -> str:
        value = self.cleaned_data["host"].strip()
        if problem := host_name_problem(value):
            raise ValidationError(problem)
        return value

    def clean_resource_id(self) -> str:
        value = self.cleaned_data["resource_id"].strip()
        if any(ch.isspace() for ch in value):
            raise ValidationError("A resource id has no spaces in it.")
        return value


class TrafficSourceForm(SiteModelForm):
    """A deployment's Prometheus request counter, set up by a lead on the deployment's page."""

    fieldsets = [("Schedule", ["interval_seconds", "query_window_hours", "is_paused"])]

    class Meta:
        model = TrafficSource
        fields = ["url", "requests_query", "interval_seconds", "query_window_hours", "is_paused"]
        labels = {
            "requests_query": "Requests query (PromQL)",
            "is_paused": "Paused",
            "interval_seconds": "Poll every (seconds)",
            "query_window_hours": "First pull reaches back (hours)",
        }
        widgets = {
            "url": forms.TextInput(attrs={"class": "mono", "spellcheck": "false"}),
            "requests_query": forms.TextInput(attrs={"class": "mono", "spellcheck": "false"}),
        }

    def clean_url(self) -> str:
        return self.cleaned_data["url"].strip()

    def clean_requests_query(self) -> str:
        value = self.cleaned_data["requests_query"].strip()
        if not value:
            raise ValidationError("Give the PromQL of the requests in the hour before each point.")
        return value

    def clean_interval_seconds(self) -> int:
        value = self.cleaned_data["interval_seconds"]
        if value < 60:
            raise ValidationError("Poll at most every 60 seconds (a new hour comes once an hour).")
        return value

    def clean_query_window_hours(self) -> int:
        value = self.cleaned_data["query_window_hours"]
        if not 1 <= value <= TRAFFIC_WINDOW_MAX_HOURS:
            raise ValidationError(
                f"The first pull reaches back 1 to {TRAFFIC_WINDOW_MAX_HOURS} hours (31 days)."
            )
        return value
