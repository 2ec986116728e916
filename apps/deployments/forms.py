from django import forms
from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from apps.experiments.forms import (
    HARDWARE_FIELDS,
    HARDWARE_LABELS,
    clean_hardware_and_window,
    clean_resource_ids,
    label_times_with_zone,
)
from apps.projects.models import Project
from costsite.forms import DateTimeLocalInput, ResourceIdsField, SiteModelForm, TagsField

from .models import Deployment, Model


class MLModelForm(SiteModelForm):
    """A model (the ML kind): what experiments produce and deployments serve."""

    class Meta:
        model = Model
        fields = ["name", "external_id", "description"]
        labels = {"external_id": "External id"}
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}

    def __init__(self, *args, project: Project, **kwargs):
        super().__init__(*args, **kwargs)
        self.project = project
        self.instance.project = project

    def _others(self, **lookup) -> QuerySet[Model]:
        others = Model.objects.filter(project=self.project, **lookup)
        return others.exclude(pk=self.instance.pk) if self.instance.pk else others

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if self._others(name=name).exists():
            raise ValidationError(
                "A model named “%(name)s” already exists in this project.", params={"name": name}
            )
        return name

    def clean_external_id(self) -> str:
        external_id = self.cleaned_data["external_id"].strip()
        if external_id and self._others(external_id=external_id).exists():
            raise ValidationError(
                "A model with the external id “%(id)s” already exists in this project.",
                params={"id": external_id},
            )
        return external_id


class DeploymentForm(SiteModelForm):
    tags = TagsField()
    resource_ids = ResourceIdsField(
        label="Resource ids",
        help_text="One per line, as the bill names them: instance ids, endpoint ARNs, node "
        "names. Spend on these resources while this serves is attributed to it.",
    )

    fieldsets = [
        (
            "Serving",
            [
                "model",
                "name",
                "serving_pattern",
                "replicas",
                "latency_objective_ms",
                "cold_start_seconds",
                "started_at",
                "ended_at",
                "external_id",
            ],
        ),
        ("Constraints", ["data_residency", "is_fine_tuned"]),
        ("Hardware", HARDWARE_FIELDS),
        ("Resources and tags", ["resource_ids", "tags"]),
    ]

    class Meta:
        model = Deployment
        fields = [
            "model",
            "name",
            "serving_pattern",
            "replicas",
            "latency_objective_ms",
            "cold_start_seconds",
            "started_at",
            "ended_at",
            "external_id",
            "data_residency",
            "is_fine_tuned",
            *HARDWARE_FIELDS,
            "tags",
        ]
        labels = {
            "started_at": "Serving since",
            "ended_at": "Retired",
            "external_id": "External id",
            "latency_objective_ms": "Latency objective (p95, ms)",
            "cold_start_seconds": "Cold start (seconds)",
            **HARDWARE_LABELS,
        }
        help_texts = {
            "replicas": "0 when it is scaled to zero.",
            "latency_objective_ms": "",
        }
        widgets = {"started_at": DateTimeLocalInput(), "ended_at": DateTimeLocalInput()}

    def __init__(self, *args, project: Project, models: QuerySet[Model], user, **kwargs):
        """`models`: those the user may see; a deployment can only serve one of them."""
        super().__init__(*args, **kwargs)
        self.project = project
        self.user = user  # who registers: resources of projects they cannot see are refused
        self.instance.project = project
        if self.instance.pk:
            # Keeping the model it already serves grants no new access.
            models = models | Model.objects.filter(pk=self.instance.model_id)
        self.fields["model"].queryset = models.select_related("project").distinct()
        self.fields["model"].error_messages["invalid_choice"] = (
            "Choose a model from a project you can see."
        )
        self.fields["model"].label_from_instance = lambda m: f"{m.name} ({m.project.name})"
        self.fields["model"].empty_label = "Choose the model it serves"
        if self.instance.pk:
            self.fields["resource_ids"].initial = list(
                self.instance.resources.values_list("resource_id", flat=True)
            )
        label_times_with_zone(self)

    def clean_resource_ids(self) -> list[str]:
        return clean_resource_ids(self)

    def clean_external_id(self) -> str:
        external_id = self.cleaned_data["external_id"].strip()
        if external_id:
            others = Deployment.objects.filter(project=self.project, external_id=external_id)
            if self.instance.pk:
                others = others.exclude(pk=self.instance.pk)
            if others.exists():
                raise ValidationError(
                    "A deployment with the external id “%(id)s” already exists in this project.",
                    params={"id": external_id},
                )
        return external_id

    def clean(self) -> dict:
        data = super().clean()
        clean_hardware_and_window(self, data)
        return data


class RequestLogForm(forms.Form):
    """A request log to count into the deployment's hourly traffic."""

    file = forms.FileField(
        label="Request log (CSV)",
        help_text="Columns timestamp (ISO 8601 with a time zone), latency_ms, tokens_in, "
        "tokens_out, request_hash; one row a request.",
    )
