"""Azure Cost Management exports (cost details), EA (PascalCase) and MCA (camelCase), actual
or amortised.

Facts: shared/reference/billing-formats.md §4. Quirks met here: a byte-order mark (the reader
drops it), US dates (`01/31/2025`), EA tags without their outer braces, pack sizes in
UnitOfMeasure (`100 Hours`: Quantity is in hours, priced per block of 100), resource ids in mixed
case. Rows are daily; the billing period's end date is its last day, so a day is added.

BilledCost and EffectiveCost are both the row's cost in billing currency: an ActualCost export
shows purchases in full, an AmortizedCost export spreads them over usage (and shows unused
commitment as UnusedReservation / UnusedSavingsPlan). Both are keyed by billing account (EA) or
billing profile (MCA) and period, so loading the other kind for a month replaces the first.
"""

import json
import re
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal, InvalidOperation

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import MissingColumnError, SourceValueError
from ..normalise import NUMBER
from .base import BillingFormat, ColumnMap

CHARGE_CATEGORY = {
    "usage": "Usage",
    "unusedreservation": "Usage",
    "unusedsavingsplan": "Usage",
    "purchase": "Purchase",
    "refund": "Credit",
    "credit": "Credit",
    "adjustment": "Adjustment",
    "roundingadjustment": "Adjustment",
    "tax": "Tax",
}
FREQUENCY = {"usagebased": "Usage-Based", "onetime": "One-Time", "recurring": "Recurring"}
SERVICE_CATEGORY = {
    "virtual machines": "Compute",
    "container instances": "Compute",
    "azure kubernetes service": "Compute",
    "functions": "Compute",
    "storage": "Storage",
    "bandwidth": "Networking",
    "virtual network": "Networking",
    "load balancer": "Networking",
    "azure machine learning": "AI and Machine Learning",
    "machine learning": "AI and Machine Learning",
    "azure openai": "AI and Machine Learning",
    "cognitive services": "AI and Machine Learning",
    "sql database": "Databases",
}
US_DATE = re.compile(r"^\s*(\d{1,2})/(\d{1,2})/(\d{4})\s*$")
ISO_DATE = re.compile(r"^\s*(\d{4})-(\d{2})-(\d{2})")
PACK = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KM]?)\b\s*(.*)$")
SPOT_METER = re.compile(r"(spot|low priority)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class AzureColumnMap(ColumnMap):
    present: dict[str, str] = field(default_factory=dict)  # lower-cased name → header spelling


class AzureFormat(BillingFormat):
    """What EA and MCA share: one mapping over lower-cased names."""

    # role → candidates (lower-cased), first present wins
    COLUMNS: dict[str, tuple[str, ...]] = {}
    REQUIRED: tuple[str, ...] = ()
    SPELLING: dict[str, str] = {}
    # Whether empty billing period columns mean "the calendar month of the charge".
    PERIOD_FROM_DATE = False

    def column_map(self, header: list[str]) -> ColumnMap:
        present: dict[str, str] = {}
        for name in header:
            present.setdefault(name.strip().lower(), name.strip())
        roles = {}
        for role, candidates in self.COLUMNS.items():
            found = [present[c] for c in candidates if c in present]
            if found:
                roles[role] = found[0]
        missing = [self.COLUMNS[role][0] for role in self.REQUIRED if role not in roles]
        if missing:
            spelled = [self.spelling(name) for name in missing]
            raise MissingColumnError(spelled, format_label=self.label)
        focus = {
            "BillingAccountId": roles["account"],
            # An MCA export may lack them: the period is then the charge's month (to_focus).
            "BillingPeriodStart": roles.get("period_start", roles["date"]),
            "BillingPeriodEnd": roles.get("period_end", roles["date"]),
            "ChargePeriodStart": roles["date"],
            "ChargePeriodEnd": roles["date"],
            "BillingCurrency": roles["currency"],
            "BilledCost": roles["cost"],
            "EffectiveCost": roles["cost"],
        }
        optional = {
            "BillingAccountName": "account_name",
            "ChargeCategory": "charge_type",
            "ChargeFrequency": "frequency",
            "ServiceName": "meter_category",
            "ChargeDescription": "meter_name",
            "RegionId": "region",
            "ResourceId": "resource_id",
            "ResourceName": "resource_name",
            "SkuId": "meter_id",
            "SubAccountId": "subscription_id",
            "SubAccountName": "subscription_name",
            "InvoiceId": "invoice_id",
            "ListCost": "payg_cost",
            "CommitmentDiscountId": "reservation_id",
            "CommitmentDiscountName": "reservation_name",
            "Tags": "tags",
            "ConsumedQuantity": "quantity",
            "PricingQuantity": "quantity",
            "ConsumedUnit": "unit",
            "PricingUnit": "unit",
        }
        for focus_name, role in optional.items():
            if role in roles:
                focus[focus_name] = roles[role]
        extra = [
            roles[role]
            for role in ("pricing_model", "additional_info", "meter_sub_category", "resource_group")
            if role in roles
        ]
        return AzureColumnMap(focus=focus, extra=extra, present=roles)

    def spelling(self, lowered: str) -> str:
        return lowered

    def extras(self, batch: pa.RecordBatch, columns: ColumnMap) -> dict[str, pa.Array]:
        names = batch.schema.names
        shown = {"meter_sub_category": "x_MeterSubCategory", "resource_group": "x_ResourceGroup"}
        return {
            label: batch.column(names.index(columns.present[role]))
            for role, label in shown.items()
            if role in columns.present
        }

    def to_focus(self, batch: pa.RecordBatch, columns: AzureColumnMap) -> dict[str, pa.Array]:
        names = batch.schema.names
        roles = columns.present

        def column(role: str) -> pa.Array | None:
            source = roles.get(role)
            return None if source is None else batch.column(names.index(source))

        length = batch.num_rows
        arrays = {
            focus_name: batch.column(names.index(source))
            for focus_name, source in columns.focus.items()
        }
        arrays["ProviderName"] = pa.array(["Microsoft"] * length, pa.string())
        day = _dates(column("date"), roles["date"])
        arrays["ChargePeriodStart"] = day
        arrays["ChargePeriodEnd"] = pc.add(day, pa.scalar(timedelta(days=1)))
        start, end = column("period_start"), column("period_end")
        if self.PERIOD_FROM_DATE and _empty(start) and _empty(end):
            # Some real MCA exports leave both empty: the period is the calendar month of date.
            arrays["BillingPeriodStart"], arrays["BillingPeriodEnd"] = _months(day)
            note = (
                f"{self.SPELLING['billingperiodstartdate']} and "
                f"{self.SPELLING['billingperiodenddate']} are empty: the billing period was "
                f"taken from the charge dates (the calendar month of {roles['date']})"
            )
            if note not in columns.notes:
                columns.notes.append(note)
        else:
            arrays["BillingPeriodStart"] = _dates(start, roles.get("period_start", "?"))
            arrays["BillingPeriodEnd"] = pc.add(
                _dates(end, roles.get("period_end", "?")), pa.scalar(timedelta(days=1))
            )
        charge = column("charge_type")
        arrays["ChargeCategory"] = (
            _lookup(charge, CHARGE_CATEGORY, roles.get("charge_type"), "a charge type")
            if charge is not None
            else pa.array(["Usage"] * length, pa.string())
        )
        if charge is not None:
            # A reservation's or savings plan's unused part is its own charge type: FOCUS says
            # CommitmentDiscountStatus = Unused (the insights' unused commitments read it).
            unused = pc.fill_null(
                pc.is_in(
                    pc.utf8_lower(pc.utf8_trim_whitespace(charge)),
                    value_set=pa.array(["unusedreservation", "unusedsavingsplan"]),
                ),
                False,
            )
            arrays["CommitmentDiscountStatus"] = pc.if_else(
                unused, pa.scalar("Unused", pa.string()), pa.scalar(None, pa.string())
            )
        if "frequency" in roles:
            arrays["ChargeFrequency"] = _lookup(
                column("frequency"), FREQUENCY, roles["frequency"], "a frequency"
            )
        arrays["PricingCategory"] = _pricing(
            column("pricing_model"), column("meter_name"), column("meter_sub_category"), length
        )
        if "meter_category" in roles:
            lowered = pc.utf8_lower(pc.utf8_trim_whitespace(column("meter_category")))
            keys = pa.array(list(SERVICE_CATEGORY), pa.string())
            found = pc.take(
                pa.array(list(SERVICE_CATEGORY.values()), pa.string()),
                pc.index_in(lowered, value_set=keys),
            )
            arrays["ServiceCategory"] = pc.fill_null(found, "Other")
        if "resource_id" in roles:
            arrays["ResourceId"] = pc.utf8_lower(column("resource_id"))
        if "tags" in roles:
            arrays["Tags"] = _tags(column("tags"))
        if "unit" in roles and "quantity" in roles:
            units, pricing = _packs(column("unit"), column("quantity"), roles["quantity"])
            arrays["ConsumedUnit"] = arrays["PricingUnit"] = units
            arrays["PricingQuantity"] = pricing
        if "additional_info" in roles:
            arrays["SkuPriceDetails"] = _vm_size(column("additional_info"))
        return arrays


def _empty(array: pa.Array | None) -> bool:
    """No value at all: the column is absent, or every field is null or blank."""
    if array is None:
        return True
    trimmed = pc.utf8_trim_whitespace(pc.fill_null(array, ""))
    return pc.all(pc.equal(pc.utf8_length(trimmed), 0)).as_py()


def _months(day: pa.Array) -> tuple[pa.Array, pa.Array]:
    """The first midnight of each day's calendar month, and of the month after (UTC)."""
    encoded = pc.dictionary_encode(day)
    starts, ends = [], []
    for moment in encoded.dictionary.to_pylist():
        first = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        starts.append(first)
        ends.append(
            first.replace(year=first.year + 1, month=1)
            if first.month == 12
            else first.replace(month=first.month + 1)
        )
    zone = pa.timestamp("us", tz="UTC")
    return (
        pc.take(pa.array(starts, zone), encoded.indices),
        pc.take(pa.array(ends, zone), encoded.indices),
    )


def _dates(array: pa.Array, column: str) -> pa.Array:
    """`01/31/2025` (or ISO) → midnight UTC of that day; a value that is neither is named."""
    encoded = pc.dictionary_encode(array)
    out = []
    for value in encoded.dictionary.to_pylist():
        match = US_DATE.match(value or "")
        iso = ISO_DATE.match(value or "")
        try:
            if match:
                month, day, year = (int(g) for g in match.groups())
            elif iso:
                year, month, day = (int(g) for g in iso.groups())
            else:
                raise ValueError
            out.append(f"{year:04d}-{month:02d}-{day:02d}T00:00:00Z")
            pc.cast(pa.array([out[-1]]), pa.timestamp("us", tz="UTC"))
        except (ValueError, pa.ArrowInvalid):
            index = pc.index(array, value).as_py()
            raise SourceValueError(index, column, value, "a date such as 01/31/2025") from None
    text = pc.take(pa.array(out, pa.string()), encoded.indices)
    if array.null_count:
        index = pc.index(pc.is_null(array), True).as_py()
        raise SourceValueError(index, column, None, "a date such as 01/31/2025")
    return pc.cast(text, pa.timestamp("us", tz="UTC"))


def _lookup(array: pa.Array, table: dict[str, str], column: str, what: str) -> pa.Array:
    encoded = pc.dictionary_encode(array)
    out = []
    for value in encoded.dictionary.to_pylist():
        key = re.sub(r"[^a-z]", "", value.lower())
        if key not in table:
            index = pc.index(array, value).as_py()
            raise SourceValueError(
                index, column, value, f"{what} ({', '.join(sorted(set(table.values())))})"
            )
        out.append(table[key])
    return pc.take(pa.array(out, pa.string()), encoded.indices)


def _pricing(model, meter, sub_category, length: int) -> pa.Array:
    """Spot (PricingModel Spot, or a meter ending in Spot / Low Priority) is Dynamic;
    reservations and savings plans are Committed; on-demand is Standard."""
    category = pa.nulls(length, pa.string())
    if model is not None:
        lowered = pc.utf8_lower(pc.fill_null(model, ""))
        category = pc.if_else(pc.equal(lowered, "ondemand"), "Standard", category)
        committed = pc.is_in(lowered, value_set=pa.array(["reservation", "savingsplan"]))
        category = pc.if_else(committed, "Committed", category)
        category = pc.if_else(pc.equal(lowered, "spot"), "Dynamic", category)
    for names in (meter, sub_category):
        if names is not None:
            spot = pc.fill_null(
                pc.match_substring_regex(names, SPOT_METER.pattern, ignore_case=True), False
            )
            category = pc.if_else(spot, "Dynamic", category)
    return category


def _tags(array: pa.Array) -> pa.Array:
    """EA writes `"k": "v","k2": "v2"` (no braces); MCA writes a JSON object."""
    trimmed = pc.utf8_trim_whitespace(array)
    bare = pc.and_(pc.invert(pc.starts_with(trimmed, "{")), pc.greater(pc.utf8_length(trimmed), 0))
    wrapped = pc.binary_join_element_wise("{", trimmed, "}", "")
    return pc.if_else(pc.fill_null(bare, False), wrapped, array)


def _packs(units: pa.Array, quantity: pa.Array, column: str) -> tuple[pa.Array, pa.Array]:
    """The unit without its pack size, and Quantity in packs (`100 Hours`: hours / 100)."""
    encoded = pc.dictionary_encode(units)
    names, sizes = [], []
    for value in encoded.dictionary.to_pylist():
        match = PACK.match(value)
        if match:
            size = Decimal(match.group(1)) * {"": 1, "K": 1000, "M": 1000000}[match.group(2)]
            names.append(match.group(3).strip() or "Units")
            sizes.append(size)
        else:
            names.append(value.strip())
            sizes.append(Decimal(1))
    unit_names = pc.take(pa.array(names, pa.string()), encoded.indices)
    pricing: list[str | None] = []
    for index, (code, amount) in enumerate(
        zip(encoded.indices.to_pylist(), quantity.to_pylist(), strict=True)
    ):
        if amount is None or code is None:
            pricing.append(None)
            continue
        text = str(amount).strip()
        try:
            if not NUMBER.fullmatch(text):
                raise InvalidOperation
            pricing.append(format(Decimal(text) / sizes[code], "f"))
        except InvalidOperation:
            raise SourceValueError(index, column, amount, "a decimal number") from None
    return unit_names, pa.array(pricing, pa.string())


def _vm_size(array: pa.Array) -> pa.Array:
    """AdditionalInfo's ServiceType (the VM size) as SkuPriceDetails' InstanceType.

    AdditionalInfo is descriptive; one that is not JSON leaves the size unknown rather than
    failing the import."""
    encoded = pc.dictionary_encode(array)
    out = []
    for value in encoded.dictionary.to_pylist():
        try:
            info = json.loads(value)
        except (json.JSONDecodeError, TypeError):
            info = None
        size = info.get("ServiceType") if isinstance(info, dict) else None
        out.append(json.dumps({"InstanceType": size}) if size else None)
    return pc.take(pa.array(out, pa.string()), encoded.indices)


class AzureEaFormat(AzureFormat):
    name = "azure-ea"
    label = "Azure EA cost export"
    COLUMNS = {
        "account": ("billingaccountid",),
        "account_name": ("billingaccountname",),
        "period_start": ("billingperiodstartdate",),
        "period_end": ("billingperiodenddate",),
        "date": ("date",),
        "currency": ("billingcurrency",),
        "cost": ("cost", "costinbillingcurrency"),
        "payg_cost": ("paygcostinbillingcurrency",),
        "charge_type": ("chargetype",),
        "frequency": ("frequency",),
        "pricing_model": ("pricingmodel",),
        "meter_category": ("metercategory",),
        "meter_sub_category": ("metersubcategory",),
        "meter_name": ("metername",),
        "meter_id": ("meterid",),
        "region": ("resourcelocation", "meterregion"),
        "resource_id": ("resourceid", "instancename"),
        "resource_name": ("resourcename",),
        "resource_group": ("resourcegroup",),
        "subscription_id": ("subscriptionid",),
        "subscription_name": ("subscriptionname",),
        "invoice_id": ("invoiceid",),
        "reservation_id": ("reservationid",),
        "reservation_name": ("reservationname",),
        "tags": ("tags",),
        "quantity": ("quantity",),
        "unit": ("unitofmeasure",),
        "additional_info": ("additionalinfo",),
    }
    REQUIRED = ("account", "period_start", "period_end", "date", "currency", "cost")
    SPELLING = {
        "billingaccountid": "BillingAccountId",
        "billingperiodstartdate": "BillingPeriodStartDate",
        "billingperiodenddate": "BillingPeriodEndDate",
        "date": "Date",
        "billingcurrency": "BillingCurrency",
        "cost": "Cost",
    }

    def detect(self, header: list[str]) -> bool:
        names = {name.strip() for name in header}
        return {"Cost", "MeterCategory", "Date"} <= names

    def spelling(self, lowered: str) -> str:
        return self.SPELLING.get(lowered, lowered)


class AzureMcaFormat(AzureFormat):
    name = "azure-mca"
    label = "Azure MCA cost export"
    PERIOD_FROM_DATE = True
    COLUMNS = {
        **AzureEaFormat.COLUMNS,
        # Invoices belong to the billing profile under an MCA.
        "account": ("billingprofileid", "billingaccountid"),
        "account_name": ("billingprofilename", "billingaccountname"),
        "cost": ("costinbillingcurrency",),
        "resource_id": ("instancename", "resourceid"),
        "resource_group": ("resourcegroupname", "resourcegroup"),
        "region": ("resourcelocation", "location", "meterregion"),
    }
    REQUIRED = ("account", "date", "currency", "cost")
    SPELLING = {
        "billingprofileid": "billingProfileId",
        "billingperiodstartdate": "billingPeriodStartDate",
        "billingperiodenddate": "billingPeriodEndDate",
        "date": "date",
        "billingcurrency": "billingCurrency",
        "costinbillingcurrency": "costInBillingCurrency",
    }

    def detect(self, header: list[str]) -> bool:
        names = {name.strip() for name in header}
        return {"costInBillingCurrency", "meterCategory", "date"} <= names

    def spelling(self, lowered: str) -> str:
        return self.SPELLING.get(lowered, lowered)
