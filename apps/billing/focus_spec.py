"""FOCUS 1.0, 1.1 and 1.2 columns as the importer treats them: the internal shape of a line.

Facts from the spec's sources, condensed in shared/reference/billing-formats.md §1. A module of
its own, outside `formats/`, because the shared normaliser reads it too and format modules import
the normaliser.
"""

from dataclasses import dataclass


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
