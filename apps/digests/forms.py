from django import forms

from apps.projects.models import Project
from costsite.forms import SiteModelForm

from .models import Subscription


class SubscriptionForm(SiteModelForm):
    class Meta:
        model = Subscription
        fields = ["active", "frequency", "projects", "minimum_amount"]
        labels = {"active": "Send me digests", "minimum_amount": "Leave out findings under"}
        widgets = {"projects": forms.CheckboxSelectMultiple}

    def __init__(self, *args, projects=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["projects"].queryset = (
            projects if projects is not None else Project.objects.none()
        )
        self.fields["projects"].required = False
