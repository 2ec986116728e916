"""The form that claims unattributed spend for a project, experiment or deployment."""

import re

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from apps.accounts.templatetags.costsite import money
from apps.billing.services_attribution import Claim, pattern_regex
from apps.deployments.models import Deployment
from apps.experiments.models import Experiment
from apps.projects.models import AllocationRule, Project, Workload
from apps.projects.selectors import project_usual_workload
from costsite.forms import SiteForm
from costsite.patterns import matches_every_id


class ClaimForm(SiteForm):
    """One resource id, or a shell-style pattern of them, and where its spend goes.

    The target list holds the projects the user may claim for (a lead's team's, staff's all) with
    their experiments and deployments; anything else is an invalid choice.
    """

    resource_id = forms.CharField(
        max_length=1000,
        required=False,
        label="Resource id",
        help_text="The one resource to assign, as the bill names it.",
    )
    pattern = forms.CharField(
        max_length=500,
        required=False,
        label="…or a pattern of resource ids",
        help_text="Shell-style, without case: * any run of characters, ? one, [abc] one of. "
        "E.g. arn:aws:s3:::vision-*",
    )
    service_name = forms.CharField(
        max_length=200,
        required=False,
        label="…or every unattributed line of a service",
        help_text="For lines without a resource id (transfer, fees): the service as the bill "
        "names it. Its resources' unattributed lines go too.",
    )
    billing_account_id = forms.CharField(
        max_length=200,
        required=False,
        label="…or of a billing account",
        help_text="Every unattributed line the billing account is billed, with or without a "
        "resource id.",
    )
    target = forms.ChoiceField(
        label="Assign to",
        error_messages={
            "invalid_choice": "Choose a project, experiment or deployment of a team you lead."
        },
    )

    workload = forms.ChoiceField(
        required=False,
        label="Workload",
        help_text="What the spend is for. Left empty, it follows the experiment or deployment "
        "it goes to; on the project alone, GPU compute counts as the project's usual workload "
        "(that of most of its registered runs and deployments), the rest by its service.",
    )

    def __init__(self, *args, projects: QuerySet[Project], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["workload"].choices = [("", "From the owner")] + [
            (value, label) for value, label in Workload.choices if value != Workload.UNATTRIBUTED
        ]
        projects = list(projects.select_related("team").order_by("name"))
        ids = [project.pk for project in projects]
        experiments = list(
            Experiment.objects.filter(project_id__in=ids)
            .only("pk", "name", "project_id")
            .order_by("project_id", "name", "pk")
        )
        deployments = list(
            Deployment.objects.filter(project_id__in=ids)
            .only("pk", "name", "project_id")
            .order_by("project_id", "name", "pk")
        )
        self._targets: dict[str, tuple[Project, Experiment | None, Deployment | None]] = {}
        choices: list = [("", "Choose…")]
        for project in projects:
            options = [(f"project:{project.pk}", f"{project.name} (the project)")]
            self._targets[f"project:{project.pk}"] = (project, None, None)
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

    def clean_pattern(self) -> str:
        pattern = self.cleaned_data["pattern"].strip()
        if not pattern:
            return pattern
        # Decided by matching, not spelling: `*?*` or `*[!x]*` claim everything as `*` does.
        try:
            everything = matches_every_id(pattern, part_regex=pattern_regex)
        except re.error:
            raise ValidationError(
                "This pattern cannot be read: check its [ ] classes (e.g. [a-z], [!x])."
            ) from None
        if everything:
            raise ValidationError(
                "A pattern that matches every resource id would claim all unattributed spend: "
                "name part of the resource id, e.g. arn:aws:s3:::vision-*"
            )
        return pattern

    def clean(self) -> dict:
        cleaned = super().clean()
        resource_id = (cleaned.get("resource_id") or "").strip()
        pattern = cleaned.get("pattern") or ""
        service = (cleaned.get("service_name") or "").strip()
        account = (cleaned.get("billing_account_id") or "").strip()
        if "pattern" in self.errors:
            return cleaned
        if service or account:
            if sum(map(bool, (resource_id, pattern, service, account))) != 1:
                raise ValidationError(
                    "Give a service or a billing account alone: a rule matches one field."
                )
        elif bool(resource_id) == bool(pattern):
            raise ValidationError("Give either one resource id or a pattern of resource ids.")
        cleaned.update(resource_id=resource_id, service_name=service, billing_account_id=account)
        return cleaned

    def claim_arguments(self) -> dict:
        project, experiment, deployment = self._targets[self.cleaned_data["target"]]
        return {
            "project": project,
            "experiment": experiment,
            "deployment": deployment,
            "resource_id": self.cleaned_data["resource_id"],
            "pattern": self.cleaned_data["pattern"],
            "service_name": self.cleaned_data["service_name"],
            "billing_account_id": self.cleaned_data["billing_account_id"],
            "workload": self.cleaned_data.get("workload") or "",
        }

    def moved_message(self, claim: Claim, *, currency: str) -> str:
        """What moved, for the page the claim returns to."""
        rule: AllocationRule = claim.rule
        target = rule.experiment or rule.deployment or rule.project
        kind = "project" if target == rule.project else target._meta.verbose_name
        without = getattr(claim, "without_resource_id", None)
        if without is not None:
            field = "service" if self.cleaned_data["service_name"] else "billing account"
            value = self.cleaned_data["service_name"] or self.cleaned_data["billing_account_id"]
            what = f"every unattributed line of the {field} “{value}”"
        elif self.cleaned_data["resource_id"]:
            what = self.cleaned_data["resource_id"]
        else:
            plural = "" if claim.resources == 1 else "s"
            what = f"{claim.resources} resource{plural} matching “{rule.pattern}”"
        amounts = [money(amount, code) for code, amount in claim.amounts.items()]
        moved = " and ".join(amounts) if amounts else money(0, currency)
        if without is not None:
            lines = " and ".join(money(amount, code) for code, amount in without.items() if amount)
            plural = "" if claim.resources == 1 else "s"
            moved += (
                f" ({lines or money(0, currency)} of it on lines without a resource id, the rest "
                f"on {claim.resources} resource{plural})"
            )
        message = (
            f"Assigned {what} to the {kind} “{target}”: {moved} of unattributed spend moves "
            "there, all history included. The pages show it once re-attribution has run."
        )
        if target == rule.project and not rule.workload:
            usual = project_usual_workload(project=rule.project)
            if usual:
                label = Workload(usual).label.lower()
                message += f" Its GPU compute is counted as {label}: the project's usual workload."
            else:
                message += (
                    " Its GPU compute is counted as other: the project has no registered runs or "
                    "deployments to take a usual workload from (choose a workload to say what it "
                    "is for)."
                )
        return message
