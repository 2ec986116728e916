import re
from decimal import Decimal

from django import forms
from django.core.exceptions import ValidationError

from costsite.forms import SiteModelForm

from .models import Project

SLUG_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
# Path segments the project URLs use after /projects/: a project with such a slug could not be
# reached.
RESERVED_SLUGS = {"new"}


class ProjectForm(SiteModelForm):
    # Declared here so that one message, ours, explains the slug's format (the model field's
    # validator would allow capitals and underscores, and say so differently).
    slug = forms.CharField(max_length=100)

    class Meta:
        model = Project
        fields = ["team", "name", "slug", "description", "monthly_budget"]
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}
        labels = {"monthly_budget": "Monthly budget"}

    def __init__(self, *args, teams, **kwargs):
        """`teams`: the teams the user may put a project in (those they lead; all for staff)."""
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams
        self.fields["team"].empty_label = None
        self.fields["team"].error_messages["invalid_choice"] = "Choose one of the teams you lead."
        self.fields["slug"].help_text = (
            "Lowercase letters, digits and hyphens. Also the value of the project tag on cloud "
            "resources, so changing it changes which spend is attributed here."
        )

    def clean_slug(self) -> str:
        slug = self.cleaned_data["slug"]
        if not SLUG_RE.match(slug):
            raise ValidationError(
                "Use only lowercase letters, digits and single hyphens, e.g. “image-ranking”."
            )
        if slug in RESERVED_SLUGS:
            raise ValidationError(
                "“%(slug)s” is reserved; choose another slug.", params={"slug": slug}
            )
        others = Project.objects.filter(slug=slug)
        if self.instance.pk:
            others = others.exclude(pk=self.instance.pk)
        if others.exists():
            raise ValidationError(
                "A project with the slug “%(slug)s” already exists.", params={"slug": slug}
            )
        return slug

    def clean_monthly_budget(self) -> Decimal | None:
        budget = self.cleaned_data["monthly_budget"]
        if budget is not None and budget < 0:
            raise ValidationError("The budget cannot be negative; leave it empty for no budget.")
        return budget
