"""The allocation page's forms: a tag key alias, and an allocation rule with its target."""

from django import forms
from django.core.exceptions import ValidationError

from apps.deployments.models import Deployment
from apps.experiments.models import Experiment
from apps.projects.models import AllocationRule, Project, TagKeyAlias
from costsite.forms import SiteModelForm

from .attribution import alias_key

# Which button submitted the form: look first, or save.
PREVIEW, SAVE = "preview", "save"


def wants_preview(data) -> bool:
    return data.get("action") == PREVIEW


class TagKeyAliasForm(SiteModelForm):
    class Meta:
        model = TagKeyAlias
        fields = ["key", "dimension"]
        labels = {"key": "Tag key", "dimension": "Names the"}
        help_texts = {
            "key": "As your resources are tagged, e.g. ml-project or user:project; compared "
            "without case or spaces.",
        }
        widgets = {"key": forms.TextInput(attrs={"class": "mono", "spellcheck": "false"})}

    def clean_key(self) -> str:
        key = self.cleaned_data["key"].strip()
        if not key:
            raise ValidationError("Give the tag key, e.g. ml-project.")
        return key

    def clean(self) -> dict:
        cleaned = super().clean()
        key, dimension = cleaned.get("key"), cleaned.get("dimension")
        if not key or not dimension:
            return cleaned
        normalised = alias_key(key)
        if normalised == dimension:
            self.add_error("key", f"The {dimension} tag is always read; it needs no alias.")
            return cleaned
        others = TagKeyAlias.objects.filter(dimension=dimension)
        if self.instance.pk:
            others = others.exclude(pk=self.instance.pk)
        for other in others:
            if alias_key(other.key) == normalised:
                self.add_error(
                    "key",
                    f"The {dimension} is already read from the tag key “{other.key}” (keys are "
                    "compared without case or spaces).",
                )
        return cleaned

    def candidate(self) -> TagKeyAlias:
        """The alias as saving would make it, unsaved (the preview's input)."""
        alias = TagKeyAlias(
            pk=self.instance.pk,
            key=self.cleaned_data["key"],
            dimension=self.cleaned_data["dimension"],
        )
        alias.created_at = self.instance.created_at
        return alias


class AllocationRuleForm(SiteModelForm):
    """A rule, with its target as one choice: a project, or one of its experiments or
    deployments."""

    target = forms.ChoiceField(
        label="Gives spend to",
        error_messages={"invalid_choice": "Choose a project, experiment or deployment."},
    )

    class Meta:
        model = AllocationRule
        fields = ["name", "field", "pattern", "priority", "target", "workload"]
        labels = {"field": "Matches the", "priority": "Priority (lower wins)"}
        help_texts = {
            "pattern": "Shell-style, without case: * any run of characters, ? one, [abc] one "
            "of. E.g. arn:aws:s3:::vision-*",
            "priority": "Rules apply only to spend that tags and registered resources did not "
            "reach; the first matching rule by priority (then age) takes it.",
        }
        widgets = {"pattern": forms.TextInput(attrs={"class": "mono", "spellcheck": "false"})}
        error_messages = {"pattern": {"required": "Give a pattern, e.g. arn:aws:s3:::vision-*"}}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        projects = list(Project.objects.select_related("team").order_by("name"))
        experiments = list(Experiment.objects.only("pk", "name", "project_id").order_by("name"))
        deployments = list(Deployment.objects.only("pk", "name", "project_id").order_by("name"))
        self._targets: dict[str, tuple[Project, Experiment | None, Deployment | None]] = {}
        choices: list = [("", "Choose…")]
        for project in projects:
            key = f"project:{project.pk}"
            options = [(key, f"{project.name} (the project)")]
            self._targets[key] = (project, None, None)
            for experiment in experiments:
                if experiment.project_id == project.pk:
                    key = f"experiment:{experiment.pk}"
                    options.append((key, f"experiment {experiment.name}"))
                    self._targets[key] = (project, experiment, None)
            for deployment in deployments:
                if deployment.project_id == project.pk:
                    key = f"deployment:{deployment.pk}"
                    options.append((key, f"deployment {deployment.name}"))
                    self._targets[key] = (project, None, deployment)
            choices.append((f"{project.name} · {project.team.name}", options))
        self.fields["target"].choices = choices
        rule = self.instance
        if rule.pk and not self.is_bound:
            if rule.experiment_id:
                self.initial["target"] = f"experiment:{rule.experiment_id}"
            elif rule.deployment_id:
                self.initial["target"] = f"deployment:{rule.deployment_id}"
            else:
                self.initial["target"] = f"project:{rule.project_id}"

    def rule_values(self) -> dict:
        """The keyword arguments of the projects' rule services."""
        project, experiment, deployment = self._targets[self.cleaned_data["target"]]
        return {
            "name": self.cleaned_data["name"].strip(),
            "field": self.cleaned_data["field"],
            "pattern": self.cleaned_data["pattern"],
            "priority": self.cleaned_data["priority"],
            "project": project,
            "experiment": experiment,
            "deployment": deployment,
            "workload": self.cleaned_data["workload"],
        }

    def candidate(self) -> AllocationRule:
        """The rule as saving would make it, unsaved (the preview's input)."""
        rule = AllocationRule(pk=self.instance.pk, **self.rule_values())
        rule.created_by_id = self.instance.created_by_id
        rule.created_at = self.instance.created_at
        return rule
