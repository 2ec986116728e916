from django import forms
from django.core.exceptions import ValidationError

from apps.projects.models import Project
from costsite.forms import SiteForm, SiteModelForm

from .models import DEFAULT_RESOURCE_TAGS, TrackerSource
from .wandb import FORMATS

MAX_UPLOAD_BYTES = 50 * 1024 * 1024


class TrackerSourceForm(SiteModelForm):
    fieldsets = [
        ("Mapping", ["project_tag", "default_project", "resource_tags", "gpu_count_tag"]),
        ("Metrics and costs", ["loss_metric", "allow_writes", "site_url"]),
        ("Schedule", ["interval_minutes", "is_paused"]),
    ]

    class Meta:
        model = TrackerSource
        fields = [
            "name",
            "url",
            "token",
            "project_tag",
            "default_project",
            "resource_tags",
            "gpu_count_tag",
            "loss_metric",
            "allow_writes",
            "site_url",
            "interval_minutes",
            "is_paused",
        ]
        labels = {"is_paused": "Paused", "interval_minutes": "Poll every (minutes)"}
        help_texts = {"token": "Left empty on an edit: the token stays as it was."}
        widgets = {
            "url": forms.TextInput(attrs={"class": "mono", "spellcheck": "false"}),
            "token": forms.PasswordInput(render_value=False),
            "resource_tags": forms.TextInput(attrs={"class": "mono"}),
        }

    def clean_url(self) -> str:
        return self.cleaned_data["url"].strip()

    def clean_interval_minutes(self) -> int:
        value = self.cleaned_data["interval_minutes"]
        if value < 1:
            raise ValidationError("Poll at most every minute.")
        return value

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("allow_writes") and not cleaned.get("site_url"):
            self.add_error("site_url", "Give costsite's URL, so that costsite.url can link here.")
        return cleaned


class WandbUploadForm(SiteForm):
    file = forms.FileField(
        help_text="The runs table exported as CSV, or the public API's runs JSON."
    )
    file_format = forms.ChoiceField(
        label="Format",
        choices=[("auto", "Detect from the file")]
        + [
            (name, {"wandb-csv": "CSV export", "wandb-json": "API runs JSON"}[name])
            for name in FORMATS
        ],
        initial="auto",
    )
    project_tag = forms.CharField(
        initial="project",
        help_text="The config key (or CSV column) naming the costsite project; else the W&B "
        "project's name, else the default project.",
    )
    default_project = forms.ModelChoiceField(queryset=Project.objects.none(), required=False)
    resource_tags = forms.CharField(
        initial=DEFAULT_RESOURCE_TAGS,
        help_text="Config keys naming what each run ran on: resource ids or mapped host names.",
    )
    gpu_count_tag = forms.CharField(initial="gpu_count", label="GPU count key")
    loss_metric = forms.CharField(initial="loss", help_text="The history metric imported.")

    def __init__(self, *args, projects, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["default_project"].queryset = projects

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > MAX_UPLOAD_BYTES:
            raise ValidationError(f"The file is over {MAX_UPLOAD_BYTES // (1024 * 1024)} MB.")
        return upload
