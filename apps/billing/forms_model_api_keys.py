"""The form that maps a model API key to a project, or to one of its deployments."""

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from apps.deployments.models import Deployment
from apps.projects.models import Project
from costsite.forms import SiteForm

from .models import ModelApiKey


class KeyMappingForm(SiteForm):
    """A key as billed and where its spend goes: the target list holds the projects the user
    may map to (a lead's team's, staff's all) with their deployments."""

    key = forms.CharField(
        max_length=1000,
        label="Key",
        help_text="As the bill names it: an API key's id or hash, an OpenAI project, an "
        "Anthropic workspace, a LiteLLM team, a Bedrock inference profile's ARN.",
        widget=forms.TextInput(attrs={"class": "mono", "spellcheck": "false"}),
    )
    kind = forms.ChoiceField(choices=ModelApiKey.Kind.choices, label="What it is")
    target = forms.ChoiceField(
        label="Its calls are made by",
        error_messages={"invalid_choice": "Choose a project or deployment of a team you lead."},
    )
    note = forms.CharField(max_length=500, required=False, label="Note")

    def __init__(self, *args, projects: QuerySet[Project], **kwargs):
        super().__init__(*args, **kwargs)
        projects = list(projects.select_related("team").order_by("name"))
        deployments = list(
            Deployment.objects.filter(project__in=[p.pk for p in projects])
            .only("pk", "name", "project_id")
            .order_by("project_id", "name", "pk")
        )
        self._targets: dict[str, tuple[Project, Deployment | None]] = {}
        choices: list = [("", "Choose…")]
        for project in projects:
            options = [(f"project:{project.pk}", f"{project.name} (the project)")]
            self._targets[f"project:{project.pk}"] = (project, None)
            for deployment in deployments:
                if deployment.project_id == project.pk:
                    options.append((f"deployment:{deployment.pk}", f"deployment {deployment.name}"))
                    self._targets[f"deployment:{deployment.pk}"] = (project, deployment)
            choices.append((f"{project.name} · {project.team.name}", options))
        self.fields["target"].choices = choices

    @staticmethod
    def initial_for(mapping: ModelApiKey) -> dict:
        target = (
            f"deployment:{mapping.deployment_id}"
            if mapping.deployment_id
            else f"project:{mapping.project_id}"
        )
        return {"key": mapping.key, "kind": mapping.kind, "target": target, "note": mapping.note}

    def clean_key(self) -> str:
        value = self.cleaned_data["key"].strip()
        if any(ch.isspace() for ch in value):
            raise ValidationError("A key has no spaces in it.")
        return value

    def mapping_arguments(self) -> dict:
        project, deployment = self._targets[self.cleaned_data["target"]]
        return {
            "key": self.cleaned_data["key"],
            "kind": self.cleaned_data["kind"],
            "project": project,
            "deployment": deployment,
            "note": self.cleaned_data["note"],
        }
