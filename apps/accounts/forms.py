from django import forms

from costsite.forms import SiteModelForm

from .models import ApiToken


class ApiTokenForm(SiteModelForm):
    class Meta:
        model = ApiToken
        fields = ["name"]
        labels = {"name": "Name"}
        widgets = {"name": forms.TextInput(attrs={"placeholder": "training cluster"})}
