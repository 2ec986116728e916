"""FOCUS 1.0, 1.1 and 1.2 (FinOps Open Cost and Usage Specification).

Facts from the spec's sources, condensed in shared/reference/billing-formats.md §1. Headers are
matched without case (real files spell `SkuPriceid`); unknown columns are ignored and provider
columns (`x_*`) are kept.
"""

from dataclasses import dataclass

from ..errors import MissingColumnError
from .base import BillingFormat, ColumnMap


@dataclass(frozen=True)
class Column:
    """One FOCUS column as the importer treats it.

    kind: string, decimal, datetime, json or enum. `required`: the import cannot do without the
    column (it keys deliveries, days or money); the spec's other Mandatory columns are read when
    present and null when not, as real exports drop some. `not_null`: a row may not leave it empty.
    """

    name: str
    kind: str = "string"
    field: str | None = None
    required: bool = False
    not_null: bool = False
    values: tuple[str, ...] = ()


CHARGE_CATEGORIES = ("Usage", "Purchase", "Tax", "Credit", "Adjustment")
SERVICE_CATEGORIES = (
    "AI and Machine Learning",
    "Analytics",
    "Business Applications",
    "Compute",
    "Databases",
    "Developer Tools",
    "Multicloud",
    "Identity",
    "Integration",
    "Internet of Things",
    "Management and Governance",
    "Media",
    "Migration",
    "Mobile",
    "Networking",
    "Security",
    "Storage",
    "Web",
    "Other",
)

COLUMNS: tuple[Column, ...] = (
    Column("BillingAccountId", field="billing_account_id", required=True, not_null=True),
    Column("BillingAccountName", field="billing_account_name"),
    Column("BillingPeriodStart", "datetime", "billing_period_start", required=True, not_null=True),
    Column("BillingPeriodEnd", "datetime", "billing_period_end", required=True, not_null=True),
    Column("ChargePeriodStart", "datetime", "charge_period_start", required=True, not_null=True),
    Column("ChargePeriodEnd", "datetime", "charge_period_end", required=True, not_null=True),
    Column("BillingCurrency", field="billing_currency", required=True, not_null=True),
    Column("BilledCost", "decimal", "billed_cost", required=True, not_null=True),
    Column("EffectiveCost", "decimal", "effective_cost", required=True, not_null=True),
    Column("ListCost", "decimal", "list_cost"),
    Column("ContractedCost", "decimal", "contracted_cost"),
    Column(
        "ChargeCategory",
        "enum",
        "charge_category",
        required=True,
        not_null=True,
        values=CHARGE_CATEGORIES,
    ),
    Column("ChargeClass", "enum", "charge_class", values=("Correction",)),
    Column(
        "ChargeFrequency",
        "enum",
        "charge_frequency",
        values=("One-Time", "Recurring", "Usage-Based"),
    ),
    Column("ChargeDescription", field="charge_description"),
    Column(
        "PricingCategory",
        "enum",
        "pricing_category",
        values=("Standard", "Dynamic", "Committed", "Other"),
    ),
    Column("PricingQuantity", "decimal", "pricing_quantity"),
    Column("PricingUnit", field="pricing_unit"),
    Column("ConsumedQuantity", "decimal", "consumed_quantity"),
    Column("ConsumedUnit", field="consumed_unit"),
    Column("CommitmentDiscountId", field="commitment_discount_id"),
    Column("CommitmentDiscountName", field="commitment_discount_name"),
    Column(
        "CommitmentDiscountCategory",
        "enum",
        "commitment_discount_category",
        values=("Spend", "Usage"),
    ),
    Column("CommitmentDiscountType", field="commitment_discount_type"),
    Column(
        "CommitmentDiscountStatus", "enum", "commitment_discount_status", values=("Used", "Unused")
    ),
    Column("CommitmentDiscountQuantity", "decimal", "commitment_discount_quantity"),
    Column("CommitmentDiscountUnit", field="commitment_discount_unit"),
    Column("ProviderName", field="provider_name"),
    Column("ServiceName", field="service_name"),
    # New categories appear between versions; an unknown one is kept as written (cost kind other).
    Column("ServiceCategory", "enum", "service_category", values=SERVICE_CATEGORIES),
    Column("ServiceSubcategory", field="service_subcategory"),
    Column("RegionId", field="region_id"),
    Column("RegionName", field="region_name"),
    Column("AvailabilityZone", field="availability_zone"),
    Column("ResourceId", field="resource_id"),
    Column("ResourceName", field="resource_name"),
    Column("ResourceType", field="resource_type"),
    Column("SkuId", field="sku_id"),
    Column("SkuPriceId", field="sku_price_id"),
    Column("SkuPriceDetails", "json"),
    Column("SubAccountId", field="sub_account_id"),
    Column("SubAccountName", field="sub_account_name"),
    Column("InvoiceId", field="invoice_id"),
    Column("Tags", "json", "tags"),
)
COLUMNS_BY_NAME = {column.name: column for column in COLUMNS}
# Enumerations whose unknown values are kept rather than rejected.
OPEN_ENUMS = {"ServiceCategory"}

# The columns each version added (spec tags v1.0, v1.1, v1.2); the newest one a header shows wins.
ALL_COLUMNS_1_0 = frozenset(
    {
        "AvailabilityZone",
        "BilledCost",
        "BillingAccountId",
        "BillingAccountName",
        "BillingCurrency",
        "BillingPeriodEnd",
        "BillingPeriodStart",
        "ChargeCategory",
        "ChargeClass",
        "ChargeDescription",
        "ChargeFrequency",
        "ChargePeriodEnd",
        "ChargePeriodStart",
        "CommitmentDiscountCategory",
        "CommitmentDiscountId",
        "CommitmentDiscountName",
        "CommitmentDiscountStatus",
        "CommitmentDiscountType",
        "ConsumedQuantity",
        "ConsumedUnit",
        "ContractedCost",
        "ContractedUnitPrice",
        "EffectiveCost",
        "InvoiceIssuerName",
        "ListCost",
        "ListUnitPrice",
        "PricingCategory",
        "PricingQuantity",
        "PricingUnit",
        "ProviderName",
        "PublisherName",
        "RegionId",
        "RegionName",
        "ResourceId",
        "ResourceName",
        "ResourceType",
        "ServiceCategory",
        "ServiceName",
        "SkuId",
        "SkuPriceId",
        "SubAccountId",
        "SubAccountName",
        "Tags",
    }
)
NEW_IN_1_1 = frozenset(
    {
        "CapacityReservationId",
        "CapacityReservationStatus",
        "CommitmentDiscountQuantity",
        "CommitmentDiscountUnit",
        "ServiceSubcategory",
        "SkuMeter",
        "SkuPriceDetails",
    }
)
NEW_IN_1_2 = frozenset(
    {
        "BillingAccountType",
        "InvoiceId",
        "PricingCurrency",
        "PricingCurrencyContractedUnitPrice",
        "PricingCurrencyEffectiveCost",
        "PricingCurrencyListUnitPrice",
        "SubAccountType",
    }
)
FOCUS_1_2_COLUMNS = tuple(sorted(ALL_COLUMNS_1_0 | NEW_IN_1_1 | NEW_IN_1_2))
_FOCUS_NAMES = frozenset(name.lower() for name in FOCUS_1_2_COLUMNS)
# Columns named in the message for a file that is not FOCUS.
SIGNATURE = ("ChargePeriodStart", "BilledCost", "EffectiveCost")
# No other export's header holds three FOCUS column names (CUR, GCP and Azure spell theirs
# differently), and a FOCUS file missing a mandatory column is still recognised, so that the
# message can name the column.
DETECT_AT_LEAST = 3


class FocusFormat(BillingFormat):
    name = "focus"
    label = "FOCUS"

    def detect(self, header: list[str]) -> bool:
        lowered = {name.strip().lower() for name in header}
        return len(lowered & _FOCUS_NAMES) >= DETECT_AT_LEAST

    def column_map(self, header: list[str]) -> ColumnMap:
        by_lower: dict[str, str] = {}
        for name in header:
            by_lower.setdefault(name.strip().lower(), name)
        focus = {
            column.name: by_lower[column.name.lower()]
            for column in COLUMNS
            if column.name.lower() in by_lower
        }
        missing = [
            column.name for column in COLUMNS if column.required and column.name not in focus
        ]
        if missing:
            raise MissingColumnError(missing, format_label=self.label)
        extra = [name for name in header if name.strip().lower().startswith("x_")]
        present = {name.strip().lower() for name in header}
        version = "1.0"
        if any(name.lower() in present for name in NEW_IN_1_1):
            version = "1.1"
        if any(name.lower() in present for name in NEW_IN_1_2):
            version = "1.2"
        return ColumnMap(focus=focus, extra=extra, version=version)
