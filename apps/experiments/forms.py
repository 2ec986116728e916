from django import forms
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.utils import timezone

from apps.deployments.models import Model
from apps.projects.models import Project
from apps.projects.selectors import resource_ids_out_of_sight, resource_out_of_sight_message
from costsite.forms import DateTimeLocalInput, ResourceIdsField, SiteModelForm, TagsField

from .models import Experiment

HARDWARE_FIELDS = ["instance_type", "gpu_type", "gpu_count", "is_spot", "region"]
HARDWARE_LABELS = {"gpu_type": "GPU type", "gpu_count": "GPU count"}


def clean_hardware_and_window(form: forms.BaseForm, data: dict) -> None:
    """Rules an experiment and a deployment share: the end comes after the start, and a GPU count
    goes with a GPU type (cost per GPU-hour needs both)."""
    started, ended = data.get("started_at"), data.get("ended_at")
    if started and ended and ended < started:
        form.add_error("ended_at", "The end must be after the start.")
    gpu_type, gpu_count = data.get("gpu_type", ""), data.get("gpu_count")
    if gpu_count and not gpu_type:
        form.add_error("gpu_type", "Give the GPU type when the GPU count is above zero.")
    if gpu_type and gpu_count == 0:
        form.add_error("gpu_count", "Give the number of GPUs of this type (at least 1).")


def clean_resource_ids(form: forms.ModelForm) -> list[str]:
    """A run's or a deployment's resource ids, less none that would show the user (`form.user`)
    GPUs of a project they cannot see."""
    resource_ids = form.cleaned_data["resource_ids"]
    hidden = resource_ids_out_of_sight(
        user=form.user,
        resource_ids=resource_ids,
        owner=form.instance if form.instance.pk else None,
    )
    if hidden:
        raise ValidationError([resource_out_of_sight_message(rid) for rid in hidden])
    return resource_ids


def label_times_with_zone(form: forms.BaseForm) -> None:
    zone = timezone.get_current_timezone_name()
    for name in ("started_at", "ended_at"):
        form.fields[name].label = f"{form.fields[name].label} ({zone})"


class ExperimentForm(SiteModelForm):
    tags = TagsField()
    resource_ids = ResourceIdsField(label="Resource ids")

    fieldsets = [
        ("Run", ["name", "kind", "status", "started_at", "ended_at", "model", "external_id"]),
        ("Hardware", HARDWARE_FIELDS),
        ("Resources and tags", ["resource_ids", "tags"]),
    ]

    class Meta:
        model = Experiment
        fields = [
            "name",
            "kind",
            "status",
            "started_at",
            "ended_at",
            "model",
            "external_id",
            *HARDWARE_FIELDS,
            "tags",
        ]
        labels = {
            "started_at": "Started",
            "ended_at": "Ended",
            "external_id": "External id",
            **HARDWARE_LABELS,
        }
        widgets = {"started_at": DateTimeLocalInput(), "ended_at": DateTimeLocalInput()}

    def __init__(self, *args, project: Project, models: QuerySet[Model], user, **kwargs):
        """`models`: those the user may see; a run can only produce one of them."""
        super().__init__(*args, **kwargs)
        self.project = project
        self.user = user  # who registers: resources of projects they cannot see are refused
        self.instance.project = project
        if self.instance.pk and self.instance.model_id:
            # Keeping the model it already had grants no new access, even if the editor cannot
            # see that model's project.
            models = models | Model.objects.filter(pk=self.instance.model_id)
        self.fields["model"].queryset = models.select_related("project").distinct()
        self.fields["model"].error_messages["invalid_choice"] = (
            "Choose a model from a project you can see."
        )
        self.fields["model"].label_from_instance = lambda m: f"{m.name} ({m.project.name})"
        self.fields["model"].empty_label = "No model (yet)"
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
            others = Experiment.objects.filter(project=self.project, external_id=external_id)
            if self.instance.pk:
                others = others.exclude(pk=self.instance.pk)
            if others.exists():
                raise ValidationError(
                    "An experiment with the external id “%(id)s” already exists in this project.",
                    params={"id": external_id},
                )
        return external_id

    def clean(self) -> dict:
        data = super().clean()
        clean_hardware_and_window(self, data)
        if data.get("status") == Experiment.Status.RUNNING and data.get("ended_at"):
            self.add_error(
                "ended_at",
                "A running experiment has no end yet: clear the end or change the status.",
            )
        return data
