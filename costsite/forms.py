"""What every form of the site shares: how it renders (Pico-friendly, errors beside their field,
fields grouped under legends) and the two line-per-entry fields (resource ids, tags)."""

from django import forms
from django.core.exceptions import ValidationError


class SiteFormMixin:
    """Rendered by `{% include "includes/form.html" %}` (with the site's template engine, which
    Django's form renderer would not use).

    `fieldsets` groups the fields under legends: [("Hardware", ["gpu_type", ...]), ...]; fields
    not named in any group go first, without a legend.
    """

    fieldsets: list[tuple[str, list[str]]] = []

    def full_clean(self) -> None:
        super().full_clean()
        # Pico draws a field red from aria-invalid; aria-describedby lets a screen reader read out
        # the error with the field.
        for name in self.errors:
            if name in self.fields:
                attrs = self.fields[name].widget.attrs
                attrs["aria-invalid"] = "true"
                attrs["aria-describedby"] = f"{self[name].auto_id}-errors"

    def grouped_fields(self) -> list[tuple[str, list[forms.BoundField]]]:
        named = {name for _, names in self.fieldsets for name in names}
        rest = [self[name] for name in self.fields if name not in named]
        groups = [("", rest)] if rest else []
        groups += [(legend, [self[name] for name in names]) for legend, names in self.fieldsets]
        return groups


class SiteForm(SiteFormMixin, forms.Form):
    pass


class SiteModelForm(SiteFormMixin, forms.ModelForm):
    pass


def _lines(value: str) -> list[tuple[int, str]]:
    """Non-blank lines with their 1-based number, stripped."""
    return [
        (number, line.strip())
        for number, line in enumerate((value or "").splitlines(), start=1)
        if line.strip()
    ]


class ResourceIdsField(forms.CharField):
    """One cloud resource id per line (instance ids, ARNs, bucket names, node names).

    Cleans to a list without blanks or repeats, in the order given.
    """

    max_length_per_id = 1000

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("strip", False)
        kwargs.setdefault(
            "widget", forms.Textarea(attrs={"rows": 4, "spellcheck": "false", "class": "mono"})
        )
        kwargs.setdefault(
            "help_text",
            "One per line, as the bill names them: i-0a1b2c3d4e5f67890, an ARN, a bucket. "
            "Spend on these resources while this runs is attributed to it.",
        )
        super().__init__(**kwargs)

    def prepare_value(self, value):
        if isinstance(value, list | tuple):
            return "\n".join(value)
        return value

    def to_python(self, value) -> list[str]:
        ids: list[str] = []
        errors = []
        for number, line in _lines(super().to_python(value)):
            if any(ch.isspace() for ch in line):
                errors.append(
                    ValidationError(
                        "Line %(line)s: “%(value)s” has a space in it; put one resource id per "
                        "line.",
                        params={"line": number, "value": line},
                    )
                )
            elif len(line) > self.max_length_per_id:
                errors.append(
                    ValidationError(
                        "Line %(line)s: a resource id has at most %(max)s characters.",
                        params={"line": number, "max": self.max_length_per_id},
                    )
                )
            elif line not in ids:
                ids.append(line)
        if errors:
            raise ValidationError(errors)
        return ids


class TagsField(forms.CharField):
    """Free-form tags, one `key=value` per line. Cleans to a dict."""

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("strip", False)
        kwargs.setdefault(
            "widget", forms.Textarea(attrs={"rows": 3, "spellcheck": "false", "class": "mono"})
        )
        kwargs.setdefault("help_text", "One key=value per line, e.g. dataset=imagenet-21k.")
        super().__init__(**kwargs)

    def prepare_value(self, value):
        if isinstance(value, dict):
            return "\n".join(f"{key}={val}" for key, val in value.items())
        return value

    def to_python(self, value) -> dict[str, str]:
        tags: dict[str, str] = {}
        errors = []
        for number, line in _lines(super().to_python(value)):
            key, sep, val = line.partition("=")
            key = key.strip()
            if not sep or not key:
                errors.append(
                    ValidationError(
                        "Line %(line)s: write each tag as key=value.", params={"line": number}
                    )
                )
            elif key in tags:
                errors.append(
                    ValidationError(
                        "Line %(line)s: the tag “%(key)s” is given twice.",
                        params={"line": number, "key": key},
                    )
                )
            else:
                tags[key] = val.strip()
        if errors:
            raise ValidationError(errors)
        return tags


class DateTimeLocalInput(forms.DateTimeInput):
    """The browser's date-and-time picker; the value is in the organisation's time zone."""

    input_type = "datetime-local"

    def __init__(self, attrs=None):
        super().__init__(attrs=attrs, format="%Y-%m-%dT%H:%M")
