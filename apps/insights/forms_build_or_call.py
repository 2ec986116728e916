from django import forms

from costsite.forms import SiteModelForm

from .models import BuildOrCallInputs, ModelApiPrice

FIELDS = [
    "expected_requests_per_hour",
    "engineering_hours_per_month",
    "api_model",
    "api_serves_fine_tuned",
    "capacity_per_replica_hour",
    "latency_objective_ms",
    # The other way (a deployment served by a hosted API).
    "open_weights",
    "model_memory_gb",
]


class BuildOrCallForm(SiteModelForm):
    """The page's inputs; empty fields take their defaults (shown as placeholders)."""

    class Meta:
        model = BuildOrCallInputs
        fields = FIELDS
        labels = {
            "expected_requests_per_hour": "Expected requests an hour",
            "engineering_hours_per_month": "Engineering hours a month",
            "api_model": "Comparable API model",
            "latency_objective_ms": "Latency objective (p95, ms)",
        }

    def __init__(self, *args, defaults: dict, suggestions: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for name, placeholder in defaults.items():
            self.fields[name].widget.attrs["placeholder"] = placeholder
        self.fields["api_model"].widget = forms.TextInput(
            attrs={"list": "api-model-suggestions", "autocomplete": "off"}
        )
        self.fields[
            "api_model"
        ].help_text = (
            "A name from the price catalogue; the closest to the model's name are offered first."
        )
        self.suggestions = suggestions

    def clean_api_model(self) -> str:
        name = self.cleaned_data["api_model"].strip()
        if name and not ModelApiPrice.objects.filter(name=name).exists():
            raise forms.ValidationError(f"“{name}” is not in the price catalogue.")
        return name
