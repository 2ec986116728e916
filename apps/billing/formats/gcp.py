"""GCP Cloud Billing export (BigQuery), as CSV with dotted column names.

Facts: shared/reference/billing-formats.md §3. Nested fields (`credits`, `labels`,
`system_labels`, `project.labels`) are written as JSON or as Python literals (the real Koku
files); they are read with `json.loads` and, failing that, `ast.literal_eval`, never `eval`.

`cost` is gross; each credit (negative) becomes a line of its own, charge category Credit, so
that billed cost and spend add up to the net cost. The billing period is `invoice.month`; the
billing account is `billing_account_id`; spot is a SKU described as Spot or Preemptible.
"""

import ast
import json
from dataclasses import dataclass, field
from datetime import date

import pyarrow as pa

from ..errors import MissingColumnError, SourceValueError
from ..normalise import NUMBER, SOURCE_INDEX
from .base import BillingFormat, ColumnMap

# FOCUS column → GCP column, copied as they are (first present wins).
PLAIN = {
    "BillingAccountId": ("billing_account_id",),
    "ChargePeriodStart": ("usage_start_time",),
    "ChargePeriodEnd": ("usage_end_time",),
    "BillingCurrency": ("currency",),
    "ListCost": ("cost_at_list",),
    "ServiceName": ("service.description",),
    "SkuId": ("sku.id",),
    "ChargeDescription": ("sku.description",),
    "RegionId": ("location.region",),
    "AvailabilityZone": ("location.zone",),
    "ResourceId": ("resource.global_name", "resource.name"),
    "SubAccountId": ("project.id",),
    "SubAccountName": ("project.name",),
    "ConsumedQuantity": ("usage.amount",),
    "ConsumedUnit": ("usage.unit",),
    "PricingQuantity": ("usage.amount_in_pricing_units",),
    "PricingUnit": ("usage.pricing_unit",),
}
REQUIRED = (
    "billing_account_id",
    "usage_start_time",
    "usage_end_time",
    "currency",
    "cost",
    "invoice.month",
)
NESTED = ("credits", "labels", "system_labels", "project.labels")
OTHER = ("cost_type",)
COST_TYPE = {
    "regular": "Usage",
    "tax": "Tax",
    "adjustment": "Adjustment",
    "rounding error": "Adjustment",
}
SERVICE_CATEGORY = {
    "Compute Engine": "Compute",
    "Kubernetes Engine": "Compute",
    "Cloud Run": "Compute",
    "Cloud Storage": "Storage",
    "Filestore": "Storage",
    "Vertex AI": "AI and Machine Learning",
    "Cloud TPU": "AI and Machine Learning",
    "BigQuery": "Analytics",
    "Networking": "Networking",
    "Cloud CDN": "Networking",
    "Cloud SQL": "Databases",
}
MACHINE_SPEC = "compute.googleapis.com/machine_spec"


@dataclass(frozen=True)
class GcpColumnMap(ColumnMap):
    present: dict[str, str] = field(default_factory=dict)  # GCP name → header spelling


class GcpFormat(BillingFormat):
    name = "gcp"
    label = "GCP billing export"

    def detect(self, header: list[str]) -> bool:
        names = {name.strip().lower() for name in header}
        return {"billing_account_id", "usage_start_time", "cost"} <= names

    def column_map(self, header: list[str]) -> ColumnMap:
        present: dict[str, str] = {}
        for name in header:
            present.setdefault(name.strip().lower(), name)
        missing = [name for name in REQUIRED if name not in present]
        if missing:
            raise MissingColumnError(missing, format_label=self.label)
        focus = {}
        for focus_name, candidates in PLAIN.items():
            found = [present[c] for c in candidates if c in present]
            if found:
                focus[focus_name] = found[0]
        # Money and periods are computed; errors in them name these columns.
        focus["BilledCost"] = focus["EffectiveCost"] = present["cost"]
        focus["BillingPeriodStart"] = focus["BillingPeriodEnd"] = present["invoice.month"]
        focus["Tags"] = present.get("labels", present["cost"])
        extra = [present[c] for c in (*NESTED, *OTHER, "cost", "invoice.month") if c in present]
        return GcpColumnMap(focus=focus, extra=extra, present=present)

    def extras(self, batch: pa.RecordBatch, columns: ColumnMap) -> dict[str, pa.Array]:
        return {}

    def to_focus(self, batch: pa.RecordBatch, columns: GcpColumnMap) -> dict[str, pa.Array]:
        """One line per source row, then one per credit of that row (a line's source index
        says which row it came from)."""
        names = batch.schema.names

        def values(gcp_name: str) -> list:
            source = columns.present.get(gcp_name)
            if source is None or source not in names:
                return [None] * batch.num_rows
            return batch.column(names.index(source)).to_pylist()

        plain = {
            focus_name: batch.column(names.index(source)).to_pylist()
            for focus_name, source in columns.focus.items()
            if focus_name in PLAIN
        }
        if "ChargeDescription" not in plain:
            plain["ChargeDescription"] = [None] * batch.num_rows
        parser = _Nested(columns)
        credits = parser.column("credits", values("credits"))
        labels = parser.column("labels", values("labels"))
        project_labels = parser.column("project.labels", values("project.labels"))
        system_labels = parser.column("system_labels", values("system_labels"))
        months = values("invoice.month")
        costs = values("cost")
        cost_types = values("cost_type")
        out: dict[str, list] = {name: [] for name in [*plain, SOURCE_INDEX]}
        for name in (
            "BillingPeriodStart",
            "BillingPeriodEnd",
            "BilledCost",
            "EffectiveCost",
            "ChargeCategory",
            "PricingCategory",
            "ProviderName",
            "ServiceCategory",
            "Tags",
            "SkuPriceDetails",
        ):
            out[name] = []
        period_cache: dict[str, tuple[str, str]] = {}
        for index in range(batch.num_rows):
            month = months[index]
            if month not in period_cache:
                period_cache[month] = _period(month, index, columns.present["invoice.month"])
            start, end = period_cache[month]
            tags = _pairs(project_labels[index], index, columns, "project.labels") | _pairs(
                labels[index], index, columns, "labels"
            )
            tags_text = json.dumps(tags) if tags else None
            machine = _pairs(system_labels[index], index, columns, "system_labels").get(
                MACHINE_SPEC
            )
            details = json.dumps({"InstanceType": machine}) if machine else None
            sku = plain["ChargeDescription"][index] or ""
            spot = "preemptible" in sku.lower() or "spot" in sku.lower().split()
            service = plain.get("ServiceName", [None] * batch.num_rows)[index]
            category = COST_TYPE.get(str(cost_types[index] or "regular").strip().lower())
            if category is None:
                raise SourceValueError(
                    index,
                    columns.present["cost_type"],
                    cost_types[index],
                    f"one of {', '.join(COST_TYPE)}",
                )
            lines = [(costs[index], category, "Dynamic" if spot else None, None)]
            for credit in _credit_list(credits[index], index, columns):
                amount = credit.get("amount")
                description = credit.get("full_name") or credit.get("name") or credit.get("type")
                lines.append((amount, "Credit", None, description))
            for cost, charge, pricing, description in lines:
                out[SOURCE_INDEX].append(index)
                for name, column in plain.items():
                    out[name].append(column[index])
                if description is not None:
                    out["ChargeDescription"][-1] = str(description)
                money = None if cost is None else _money_text(cost)
                out["BilledCost"].append(money)
                out["EffectiveCost"].append(money)
                out["BillingPeriodStart"].append(start)
                out["BillingPeriodEnd"].append(end)
                out["ChargeCategory"].append(charge)
                out["PricingCategory"].append(pricing)
                out["ProviderName"].append("Google Cloud")
                out["ServiceCategory"].append(SERVICE_CATEGORY.get(service or "", "Other"))
                out["Tags"].append(tags_text)
                out["SkuPriceDetails"].append(details)
        arrays = {name: _array(column) for name, column in out.items() if name != SOURCE_INDEX}
        arrays[SOURCE_INDEX] = pa.array(out[SOURCE_INDEX], pa.int64())
        return arrays


class _Nested:
    """Nested fields as Python values, parsed once per distinct text."""

    def __init__(self, columns: GcpColumnMap):
        self.columns = columns
        self.cache: dict[str, object] = {}

    def column(self, gcp_name: str, values: list) -> list:
        out = []
        for index, value in enumerate(values):
            if not isinstance(value, str):
                out.append(value)
                continue
            text = value.strip()
            if not text:
                out.append(None)
                continue
            if text not in self.cache:
                self.cache[text] = self._parse(gcp_name, text, index)
            out.append(self.cache[text])
        return out

    def _parse(self, gcp_name: str, text: str, index: int):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise SourceValueError(
                index,
                self.columns.present[gcp_name],
                text,
                "a list of records written as JSON or as a Python literal",
            ) from None


def _pairs(value, index: int, columns: GcpColumnMap, gcp_name: str) -> dict[str, str]:
    """`[{'key': k, 'value': v}, …]` (or `{k: v}`) → {k: v}; anything else is refused (a `1`
    where the labels should be)."""
    if value is None:
        return {}
    if isinstance(value, dict):  # labels written as an object of keys and values
        return {str(key): "" if item is None else str(item) for key, item in value.items()}
    if not isinstance(value, list):
        raise SourceValueError(
            index, columns.present[gcp_name], value, "a list of labels, each with a key and a value"
        )
    out = {}
    for item in value:
        if isinstance(item, dict) and "key" in item:
            out[str(item["key"])] = "" if item.get("value") is None else str(item["value"])
    return out


def _credit_list(value, index: int, columns: GcpColumnMap) -> list[dict]:
    if not value:
        return []
    if not isinstance(value, list) or not all(isinstance(c, dict) for c in value):
        raise SourceValueError(
            index, columns.present["credits"], value, "a list of credits (name, amount, …)"
        )
    for credit in value:
        amount = credit.get("amount")
        if (
            amount is None
            or isinstance(amount, bool)
            or (isinstance(amount, str) and not NUMBER.fullmatch(amount.strip()))
        ):
            raise SourceValueError(
                index, columns.present["credits"], value, "a list of credits, each with an amount"
            )
    return value


def _money_text(value) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _period(month, index: int, column: str) -> tuple[str, str]:
    """`202501` → the first of that month and of the next, as UTC timestamps."""
    text = str(month or "").strip()
    try:
        if len(text) != 6 or not text.isdigit():
            raise ValueError
        start = date(int(text[:4]), int(text[4:]), 1)
    except ValueError:
        raise SourceValueError(index, column, month, "a month such as 202501") from None
    if start.year == date.max.year and start.month == 12:
        # Its end (year 10000) is past what dates hold: far outside any billing period.
        raise SourceValueError(
            index,
            column,
            month,
            "a month such as 202501",
            problem="is outside the plausible window for a billing period (from 2000-01-01)",
        )
    end = date(start.year + start.month // 12, start.month % 12 + 1, 1)
    return f"{start.isoformat()}T00:00:00Z", f"{end.isoformat()}T00:00:00Z"


def _array(values: list) -> pa.Array:
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else str(v) for v in values], pa.string())
