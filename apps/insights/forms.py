from datetime import date

from django import forms

from .models import Kind, Status

STATUS_CHOICES = [("active", "Open or acknowledged"), *Status.choices, ("", "Any status")]
ACTIONS = ("acknowledge", "snooze", "resolve", "reopen")


class WasteFilterForm(forms.Form):
    """The waste page's own filters; its period, team and project are the spend pages'
    (apps.spend.filters)."""

    kind = forms.ChoiceField(choices=[("", "Any kind"), *Kind.choices], required=False)
    status = forms.ChoiceField(choices=STATUS_CHOICES, required=False)
    minimum = forms.DecimalField(required=False, min_value=0, decimal_places=2, label="At least")


class ActionForm(forms.Form):
    action = forms.ChoiceField(choices=[(action, action) for action in ACTIONS])
    until = forms.DateField(required=False)
    note = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))

    def clean(self):
        data = super().clean()
        if data.get("action") == "snooze" and not data.get("until"):
            self.add_error("until", "Say until when.")
        return data


class BulkForm(forms.Form):
    action = forms.ChoiceField(choices=[("acknowledge", "Acknowledge"), ("snooze", "Snooze")])
    until = forms.DateField(required=False)
    ids = forms.CharField()

    def clean_ids(self) -> list[int]:
        try:
            return [int(part) for part in self.data.getlist("ids")]
        except ValueError:
            raise forms.ValidationError("Pick findings.") from None

    def clean(self):
        data = super().clean()
        if data.get("action") == "snooze" and not isinstance(data.get("until"), date):
            self.add_error("until", "Say until when.")
        return data
