"""The upload form and the imports page's filters."""

from django import forms

from costsite.forms import SiteForm

from .formats import FORMATS, format_names
from .models import BillingSource, ImportRun
from .selectors_imports import SOURCE_COMMAND, SOURCE_UPLOADS


def format_choices() -> list[tuple[str, str]]:
    return [
        (name, "Detect it from the file" if name == "auto" else FORMATS[name].label)
        for name in format_names()
    ]


class UploadForm(SiteForm):
    # The format first: the browser sends fields in this order, and the upload handler refuses
    # an oversized file when the file part starts, after the fields before it were read.
    format = forms.ChoiceField(
        choices=format_choices,
        initial="auto",
        help_text="Auto tells FOCUS, AWS CUR, GCP and Azure exports apart by their columns.",
    )
    file = forms.FileField(
        label="Billing file",
        help_text="CSV (plain or gzip), Parquet or newline-delimited JSON, as the cloud exported "
        "it.",
    )


class ImportFilterForm(forms.Form):
    """The imports page's filters; an unknown value shows everything rather than an error."""

    source = forms.ChoiceField(required=False, label="Source")
    status = forms.ChoiceField(
        required=False,
        label="Status",
        choices=[("", "Any status"), *ImportRun.Status.choices],
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["source"].choices = [
            ("", "Any source"),
            *((str(source.pk), source.name) for source in BillingSource.objects.order_by("name")),
            (SOURCE_UPLOADS, "Uploads"),
            (SOURCE_COMMAND, "Command line"),
        ]

    def values(self) -> dict[str, str]:
        if not self.is_valid():
            return {
                name: value
                for name, value in self.cleaned_data.items()
                if name not in self.errors and value
            }
        return {name: value for name, value in self.cleaned_data.items() if value}
