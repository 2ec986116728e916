"""AWS Cost and Usage Reports: legacy CSV, the Athena/Parquet flavour and CUR 2.0.

Facts: shared/reference/billing-formats.md §2. The three spell the same columns differently
(`lineItem/UnblendedCost`, `line_item_unblended_cost`), so every header is first turned into the
Athena snake_case names and one mapping serves all three. Columns come and go month to month: a
column the mapping reads but the file lacks is null, never a failure, except the few that key a
delivery or hold its money.

EffectiveCost is the amortised cost of the CUDOS formula (reserved instances and savings plans);
spot is `pricing/term = Spot` or a `SpotUsage` usage type; the billing account is the payer.
"""

import json
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import BillingFileError, MissingColumnError, SourceValueError
from ..normalise import NUMBER, instance_from_usage_type
from .base import BillingFormat, ColumnMap

_WORD_BREAK = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z])")


def athena_name(name: str) -> str:
    """`lineItem/UnblendedCost` → `line_item_unblended_cost`, `reservation/ReservationARN` →
    `reservation_reservation_a_r_n` (AWS's own rule, odd `a_r_n` included)."""
    name = name.strip()
    if "/" not in name:
        return name.lower()
    category, _, rest = name.partition("/")
    if category == "resourceTags":
        # The tag key keeps its spelling; only the prefix changes.
        return "resource_tags_" + rest.replace(":", "_").lower()
    snake = _WORD_BREAK.sub("_", f"{category}/{rest}")
    return re.sub(r"[/:]", "_", snake).lower()


# FOCUS column → the Athena name it is read from (first present wins).
PLAIN = {
    "BillingAccountId": ("bill_payer_account_id",),
    "BillingAccountName": ("bill_payer_account_name",),
    "BillingPeriodStart": ("bill_billing_period_start_date",),
    "BillingPeriodEnd": ("bill_billing_period_end_date",),
    "ChargePeriodStart": ("line_item_usage_start_date",),
    "ChargePeriodEnd": ("line_item_usage_end_date",),
    "BillingCurrency": ("line_item_currency_code",),
    "BilledCost": ("line_item_unblended_cost",),
    "ListCost": ("pricing_public_on_demand_cost",),
    "ChargeDescription": ("line_item_line_item_description",),
    "ConsumedQuantity": ("line_item_usage_amount",),
    "PricingQuantity": ("line_item_usage_amount",),
    "PricingUnit": ("pricing_unit",),
    "ServiceName": ("product_product_name", "line_item_product_code"),
    "RegionId": ("product_region_code", "product_region"),
    "AvailabilityZone": ("line_item_availability_zone",),
    "ResourceId": ("line_item_resource_id",),
    "SkuId": ("product_sku",),
    "SubAccountId": ("line_item_usage_account_id",),
    "SubAccountName": ("line_item_usage_account_name",),
    "InvoiceId": ("bill_invoice_id",),
}
REQUIRED = (
    "bill_payer_account_id",
    "bill_billing_period_start_date",
    "bill_billing_period_end_date",
    "line_item_usage_start_date",
    "line_item_usage_end_date",
    "line_item_currency_code",
    "line_item_line_item_type",
    "line_item_unblended_cost",
)
LEGACY_SPELLING = {
    "bill_payer_account_id": "bill/PayerAccountId",
    "bill_billing_period_start_date": "bill/BillingPeriodStartDate",
    "bill_billing_period_end_date": "bill/BillingPeriodEndDate",
    "line_item_usage_start_date": "lineItem/UsageStartDate",
    "line_item_usage_end_date": "lineItem/UsageEndDate",
    "line_item_currency_code": "lineItem/CurrencyCode",
    "line_item_line_item_type": "lineItem/LineItemType",
    "line_item_unblended_cost": "lineItem/UnblendedCost",
}
# Read when present for the derived columns.
DERIVED = (
    "line_item_line_item_type",
    "line_item_usage_type",
    "line_item_product_code",
    "pricing_term",
    "product_instance_type",
    "product_product_family",
    "product_gpu",
    "reservation_reservation_a_r_n",
    "reservation_effective_cost",
    "reservation_unused_amortized_upfront_fee_for_billing_period",
    "reservation_unused_recurring_fee",
    "savings_plan_savings_plan_a_r_n",
    "savings_plan_savings_plan_effective_cost",
    "savings_plan_total_commitment_to_date",
    "savings_plan_used_commitment",
)
# Provider columns kept on each line, under the names FOCUS exports with AWS columns use.
EXTRA = {
    "line_item_usage_type": "x_UsageType",
    "line_item_operation": "x_Operation",
    "line_item_line_item_type": "x_LineItemType",
    "pricing_term": "x_PricingTerm",
    # Where a transfer goes (billing.storage): location names, and newer exports' region codes.
    "product_from_location": "x_FromLocation",
    "product_to_location": "x_ToLocation",
    "product_from_region_code": "x_FromRegionCode",
    "product_to_region_code": "x_ToRegionCode",
}

CHARGE_CATEGORY = {
    "Usage": "Usage",
    "DiscountedUsage": "Usage",
    "SavingsPlanCoveredUsage": "Usage",
    "SavingsPlanNegation": "Usage",
    "Fee": "Purchase",
    "RIFee": "Purchase",
    "SavingsPlanUpfrontFee": "Purchase",
    "SavingsPlanRecurringFee": "Purchase",
    "Tax": "Tax",
    "Credit": "Credit",
    "Refund": "Credit",
    "EdpDiscount": "Credit",
    "PrivateRateDiscount": "Credit",
    "BundledDiscount": "Credit",
    "SppDiscount": "Credit",
    "DistributorDiscount": "Credit",
}
CHARGE_FREQUENCY = {
    "Fee": "One-Time",
    "SavingsPlanUpfrontFee": "One-Time",
    "RIFee": "Recurring",
    "SavingsPlanRecurringFee": "Recurring",
}
COMMITTED = ("DiscountedUsage", "SavingsPlanCoveredUsage")
# Product family first (EC2 bills disks and traffic too), then the product code.
FAMILY_CATEGORY = {
    "Compute Instance": "Compute",
    "Compute Instance (bare metal)": "Compute",
    "Dedicated Host": "Compute",
    "ML Instance": "AI and Machine Learning",
    "Storage": "Storage",
    "Storage Snapshot": "Storage",
    "Data Transfer": "Networking",
    "NAT Gateway": "Networking",
    "Load Balancer": "Networking",
}
PRODUCT_CATEGORY = {
    "AmazonEC2": "Compute",
    "AmazonECS": "Compute",
    "AmazonEKS": "Compute",
    "AWSLambda": "Compute",
    "AmazonSageMaker": "AI and Machine Learning",
    "AmazonBedrock": "AI and Machine Learning",
    "AmazonS3": "Storage",
    "AmazonEFS": "Storage",
    "AmazonFSx": "Storage",
    "AmazonCloudFront": "Networking",
    "AmazonVPC": "Networking",
    "AWSDataTransfer": "Networking",
    "AmazonRDS": "Databases",
    "AmazonDynamoDB": "Databases",
    "AmazonRedshift": "Analytics",
    "AmazonAthena": "Analytics",
    "AmazonCloudWatch": "Management and Governance",
}


def _is_snake(header: list[str]) -> set[str]:
    return {name.strip() for name in header}


class CurFormat(BillingFormat):
    """What the three CUR flavours share; subclasses say how a header is recognised and where
    tags live."""

    def names(self, header: list[str]) -> dict[str, str]:
        """Athena name → the header's own spelling."""
        out: dict[str, str] = {}
        for name in header:
            out.setdefault(athena_name(name), name)
        return out

    def tag_columns(self, names: dict[str, str]) -> dict[str, str]:
        """Source column → tag key, for tags held one column each."""
        tags = {}
        for athena, source in names.items():
            if not athena.startswith("resource_tags_"):
                continue
            if source.startswith("resourceTags/"):
                tags[source] = source.split("/", 1)[1]
            else:
                tags[source] = _tag_key(athena.removeprefix("resource_tags_"))
        return tags

    def column_map(self, header: list[str]) -> ColumnMap:
        names = self.names(header)
        missing = [self.spelling(a) for a in REQUIRED if a not in names]
        if missing:
            raise MissingColumnError(missing, format_label=self.label)
        focus = {}
        for focus_name, candidates in PLAIN.items():
            present = [names[a] for a in candidates if a in names]
            if present:
                focus[focus_name] = present[0]
        # The amortised cost is computed; errors in it name the column they come from.
        focus["EffectiveCost"] = names["line_item_unblended_cost"]
        derived = {a: names[a] for a in DERIVED if a in names}
        extra = [names[a] for a in EXTRA if a in names]
        tags = self.tag_columns(names)
        return CurColumnMap(
            focus=focus,
            extra=[*extra, *derived.values(), *tags],
            version=self.version_of(names),
            athena=names,
            tags=tags,
            shown_extra={names[a]: shown for a, shown in EXTRA.items() if a in names},
        )

    def version_of(self, names: dict[str, str]) -> str:
        return ""

    def spelling(self, athena: str) -> str:
        """A column's name as this flavour's header spells it (for messages)."""
        return athena

    def extras(self, batch: pa.RecordBatch, columns: "CurColumnMap") -> dict[str, pa.Array]:
        names = batch.schema.names
        return {
            shown: batch.column(names.index(source))
            for source, shown in columns.shown_extra.items()
        }

    def tags_json(self, batch: pa.RecordBatch, columns: "CurColumnMap") -> pa.Array:
        return _tags_from_columns(batch, columns.tags)

    def to_focus(self, batch: pa.RecordBatch, columns: "CurColumnMap") -> dict[str, pa.Array]:
        length = batch.num_rows
        names = batch.schema.names

        def column(athena: str) -> pa.Array:
            source = columns.athena.get(athena)
            if source is None or source not in names:
                return pa.nulls(length, pa.string())
            return _text(batch.column(names.index(source)))

        arrays = {
            focus_name: _text(batch.column(names.index(source)))
            for focus_name, source in columns.focus.items()
        }
        arrays["ProviderName"] = pa.array(["AWS"] * length, pa.string())
        line_type = column("line_item_line_item_type")
        usage_type = column("line_item_usage_type")
        arrays["ChargeCategory"] = _lookup(line_type, CHARGE_CATEGORY, "Usage")
        arrays["ChargeFrequency"] = _lookup(line_type, CHARGE_FREQUENCY, "Usage-Based")
        spot = pc.or_(
            pc.fill_null(pc.equal(column("pricing_term"), "Spot"), False),
            pc.fill_null(pc.match_substring(usage_type, "SpotUsage"), False),
        )
        committed = pc.fill_null(pc.is_in(line_type, pa.array(COMMITTED)), False)
        on_demand = pc.fill_null(pc.equal(column("pricing_term"), "OnDemand"), False)
        category = pa.nulls(length, pa.string())
        category = pc.if_else(on_demand, "Standard", category)
        category = pc.if_else(committed, "Committed", category)
        arrays["PricingCategory"] = pc.if_else(spot, "Dynamic", category)
        commitment = pc.coalesce(
            column("reservation_reservation_a_r_n"), column("savings_plan_savings_plan_a_r_n")
        )
        arrays["CommitmentDiscountId"] = pc.if_else(
            committed, commitment, pa.nulls(length, pa.string())
        )
        service = pc.coalesce(
            _lookup(column("product_product_family"), FAMILY_CATEGORY, None),
            _lookup(column("line_item_product_code"), PRODUCT_CATEGORY, "Other"),
        )
        arrays["ServiceCategory"] = service
        arrays["SkuPriceDetails"] = _sku_details(
            pc.coalesce(column("product_instance_type"), _instances(usage_type)),
            column("product_gpu"),
        )
        arrays["Tags"] = self.tags_json(batch, columns)
        arrays["EffectiveCost"] = _amortised(line_type, column, columns)
        return arrays


@dataclass(frozen=True)
class CurColumnMap(ColumnMap):
    """A CUR header's map: its Athena names, its tag columns (or tag map) and the provider
    columns shown in a line's `extra` under their `x_` names."""

    athena: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    shown_extra: dict[str, str] = field(default_factory=dict)
    tag_map: str | None = None


def _tag_key(snake: str) -> str:
    """`user_project` → `user:project`, as the legacy CSV and the aliases spell it."""
    for prefix in ("user_", "aws_"):
        if snake.startswith(prefix):
            return prefix[:-1] + ":" + snake[len(prefix) :]
    return snake


def _text(array) -> pa.Array:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_string(array.type) or pa.types.is_timestamp(array.type):
        return array
    if pa.types.is_large_string(array.type) or pa.types.is_dictionary(array.type):
        return pc.cast(array, pa.string())
    if pa.types.is_date(array.type) or pa.types.is_decimal(array.type):
        return array
    if pa.types.is_floating(array.type) or pa.types.is_integer(array.type):
        return pc.cast(array, pa.string())
    return array


def _lookup(array: pa.Array, table: dict[str, str], default: str | None) -> pa.Array:
    keys = pa.array(list(table), pa.string())
    values = pa.array(list(table.values()), pa.string())
    found = pc.take(values, pc.index_in(array, value_set=keys))
    if default is None:
        return found
    return pc.fill_null(found, default)


def _instances(usage_type: pa.Array) -> pa.Array:
    encoded = pc.dictionary_encode(usage_type)
    found = [instance_from_usage_type(v) for v in encoded.dictionary.to_pylist()]
    return pc.take(pa.array(found, pa.string()), encoded.indices)


def _sku_details(instance: pa.Array, gpu: pa.Array) -> pa.Array:
    """`{"InstanceType": …, "GpuCount": …}` per row from the product attributes."""
    encoded = pc.dictionary_encode(
        pc.binary_join_element_wise(
            pc.fill_null(instance, ""), pc.fill_null(_text(gpu), ""), "\x1f"
        )
    )
    out = []
    for value in encoded.dictionary.to_pylist():
        name, _, count = value.partition("\x1f")
        details = {}
        if name.strip():
            details["InstanceType"] = name.strip()
        if count.strip().isdigit():
            details["GpuCount"] = int(count.strip())
        out.append(json.dumps(details) if details else None)
    return pc.take(pa.array(out, pa.string()), encoded.indices)


def _tags_from_columns(batch: pa.RecordBatch, tags: dict[str, str]) -> pa.Array:
    """One JSON object per row from one column per tag; an empty cell is no tag."""
    length = batch.num_rows
    if not tags:
        return pa.nulls(length, pa.string())
    parts = []
    for source, key in tags.items():
        array = _text(batch.column(batch.schema.names.index(source)))
        array = pc.if_else(
            pc.fill_null(pc.utf8_is_space(array), False), pa.scalar(None, pa.string()), array
        )
        array = pc.if_else(pc.equal(array, ""), pa.scalar(None, pa.string()), array)
        encoded = pc.dictionary_encode(array)
        escaped = [json.dumps(v) for v in encoded.dictionary.to_pylist()]
        array = pc.take(pa.array(escaped, pa.string()), encoded.indices)
        fragment = pc.binary_join_element_wise(json.dumps(key) + ":", array, ",", "")
        parts.append(pc.fill_null(fragment, ""))
    joined = pc.binary_join_element_wise(*parts, "")
    body = pc.utf8_slice_codeunits(joined, 0, -1)
    out = pc.binary_join_element_wise("{", body, "}", "")
    return pc.if_else(pc.equal(joined, ""), pa.scalar(None, pa.string()), out)


def _amortised(line_type: pa.Array, column, columns: "CurColumnMap") -> pa.Array:
    """EffectiveCost by the CUDOS formula (shared/reference/billing-formats.md §2.1), as text.

    Each line type takes one column, or the sum of two for unused commitments; a row whose
    line type needs a column that is empty or absent is named by row and that column.
    """
    unblended = column("line_item_unblended_cost")
    length = len(unblended)
    zero = pa.array(["0"] * length, pa.string())
    effective = unblended
    picks = {
        "SavingsPlanCoveredUsage": "savings_plan_savings_plan_effective_cost",
        "DiscountedUsage": "reservation_effective_cost",
    }
    for kind, athena in picks.items():
        rows = pc.fill_null(pc.equal(line_type, kind), False)
        if not pc.any(rows).as_py():
            continue
        value = column(athena)
        _require(rows, value, columns, athena)
        effective = pc.if_else(rows, value, effective)
    for kind in ("SavingsPlanNegation", "SavingsPlanUpfrontFee"):
        effective = pc.if_else(pc.fill_null(pc.equal(line_type, kind), False), zero, effective)
    reserved_fee = pc.and_(
        pc.fill_null(pc.equal(line_type, "Fee"), False),
        pc.fill_null(pc.not_equal(column("reservation_reservation_a_r_n"), ""), False),
    )
    effective = pc.if_else(reserved_fee, zero, effective)
    sums = {
        "SavingsPlanRecurringFee": (
            "savings_plan_total_commitment_to_date",
            "savings_plan_used_commitment",
            -1,
        ),
        "RIFee": (
            "reservation_unused_amortized_upfront_fee_for_billing_period",
            "reservation_unused_recurring_fee",
            1,
        ),
    }
    for kind, (first, second, sign) in sums.items():
        rows = pc.fill_null(pc.equal(line_type, kind), False)
        if not pc.any(rows).as_py():
            continue
        a, b = column(first), column(second)
        _require(rows, a, columns, first)
        _require(rows, b, columns, second)
        values: list[str | None] = [None] * length
        for index in pc.indices_nonzero(rows).to_pylist():
            values[index] = format(
                _number(a[index].as_py(), index, columns, first)
                + sign * _number(b[index].as_py(), index, columns, second),
                "f",
            )
        effective = pc.if_else(rows, pa.array(values, pa.string()), effective)
    return effective


def _require(rows: pa.Array, value: pa.Array, columns: "CurColumnMap", athena: str) -> None:
    missing = pc.and_(rows, pc.is_null(value))
    if pc.any(missing).as_py():
        index = pc.index(missing, True).as_py()
        raise SourceValueError(index, columns.athena.get(athena, athena), None, "a decimal number")


def _number(text, index: int, columns: "CurColumnMap", athena: str) -> Decimal:
    value = str(text).strip()
    try:
        if NUMBER.fullmatch(value):
            return Decimal(value)
    except InvalidOperation:
        pass
    raise SourceValueError(index, columns.athena.get(athena, athena), text, "a decimal number")


class AwsCurFormat(CurFormat):
    """Legacy CUR as CSV (plain or gzip): `category/Name` columns, one column per tag."""

    name = "aws-cur"
    label = "AWS CUR"

    def detect(self, header: list[str]) -> bool:
        return any(name.strip().lower() == "lineitem/unblendedcost" for name in header)

    def spelling(self, athena: str) -> str:
        return LEGACY_SPELLING.get(athena, athena)


class AwsCurParquetFormat(CurFormat):
    """The Athena flavour (usually Parquet): snake_case, one `resource_tags_*` column per tag."""

    name = "aws-cur-parquet"
    label = "AWS CUR (Athena/Parquet)"

    def detect(self, header: list[str]) -> bool:
        names = _is_snake(header)
        return "line_item_unblended_cost" in names and "resource_tags" not in names


class AwsCur2Format(CurFormat):
    """CUR 2.0 (Data Exports): snake_case with map columns for tags and the product's long tail;
    in CSV the maps are JSON text."""

    name = "aws-cur2"
    label = "AWS CUR 2.0"

    def detect(self, header: list[str]) -> bool:
        names = _is_snake(header)
        return "line_item_unblended_cost" in names and "resource_tags" in names

    def version_of(self, names: dict[str, str]) -> str:
        return "2.0"

    def column_map(self, header: list[str]) -> ColumnMap:
        columns = super().column_map(header)
        names = columns.athena
        extra = list(columns.extra)
        for map_column in ("resource_tags", "product"):
            if map_column in names:
                extra.append(names[map_column])
        return CurColumnMap(
            focus=columns.focus,
            extra=[*dict.fromkeys(extra)],
            version=columns.version,
            athena=names,
            tags={},
            shown_extra=columns.shown_extra,
            tag_map=names.get("resource_tags"),
        )

    def to_focus(self, batch: pa.RecordBatch, columns: "CurColumnMap") -> dict[str, pa.Array]:
        arrays = super().to_focus(batch, columns)
        names = batch.schema.names
        product = columns.athena.get("product")
        if product in names:
            # The long tail of product attributes lives in the `product` map.
            attributes = _map_rows(batch.column(names.index(product)), product)
            found = [_product_fields(row) for row in attributes]
            instance = pa.array([f[0] for f in found], pa.string())
            gpu = pa.array([f[1] for f in found], pa.string())
            service = pa.array([f[2] for f in found], pa.string())
            top = columns.athena.get("product_instance_type")
            usage = columns.athena.get("line_item_usage_type")
            candidates = [_text(batch.column(names.index(c))) for c in (top,) if c in names] + [
                instance
            ]
            if usage in names:
                candidates.append(_instances(_text(batch.column(names.index(usage)))))
            arrays["SkuPriceDetails"] = _sku_details(pc.coalesce(*candidates), gpu)
            if "ServiceName" in arrays:
                arrays["ServiceName"] = pc.coalesce(service, arrays["ServiceName"])
            else:
                arrays["ServiceName"] = service
        return arrays

    def tags_json(self, batch: pa.RecordBatch, columns: "CurColumnMap") -> pa.Array:
        names = batch.schema.names
        if columns.tag_map is None or columns.tag_map not in names:
            return pa.nulls(batch.num_rows, pa.string())
        rows = _map_rows(batch.column(names.index(columns.tag_map)), columns.tag_map)
        out = []
        for index, row in enumerate(rows):
            if row is None:
                out.append(None)
                continue
            if not isinstance(row, dict):
                raise SourceValueError(
                    index, columns.tag_map, row, "a map of tag keys to values (a JSON object)"
                )
            tags = {_tag_key(str(key)): value for key, value in row.items() if value not in ("",)}
            out.append(json.dumps(tags) if tags else None)
        return pa.array(out, pa.string())


def _map_rows(array, column: str) -> list:
    """A map column's rows as dicts: Parquet maps as they are, CSV's as parsed JSON."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_map(array.type):
        return [None if row is None else dict(row) for row in array.to_pylist()]
    rows = []
    cache: dict[str, object] = {}
    for index, text in enumerate(_text(array).to_pylist()):
        if text is None or not text.strip():
            rows.append(None)
            continue
        if text not in cache:
            try:
                cache[text] = json.loads(text)
            except json.JSONDecodeError as exc:
                raise SourceValueError(
                    index, column, text, f"a JSON object ({exc.msg} at character {exc.pos + 1})"
                ) from None
        rows.append(cache[text])
    return rows


def _product_fields(row) -> tuple[str | None, str | None, str | None]:
    if not isinstance(row, dict):
        return None, None, None
    instance = row.get("instance_type") or None
    gpu = row.get("gpu")
    name = row.get("product_name") or None
    return instance, None if gpu in (None, "") else str(gpu), name


# -- manifests -------------------------------------------------------------------------------


def manifest_parts(path: str | Path, *, root: str | Path | None = None) -> list[Path] | None:
    """The parts of a CUR delivery's manifest (`*-Manifest.json`), found beside it; None when
    the path is not a manifest.

    `reportKeys` are S3 keys; a downloaded delivery keeps the parts in the manifest's folder,
    under their key or their file name. A part must resolve (links followed) inside `root`:
    the manifest's own folder, or the folder source's root it was found in. A key that leads
    elsewhere (an absolute path, `..`, a link out) fails the import, naming the key.
    """
    path = Path(path)
    inside = Path(root if root is not None else path.parent).resolve()
    if not path.name.lower().endswith("manifest.json"):
        return None
    label = path.name
    try:
        manifest = json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError as exc:
        raise BillingFileError(label, "does not exist or is not a file") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BillingFileError(label, f"is not a readable CUR manifest (JSON): {exc}") from exc
    keys = manifest.get("reportKeys") if isinstance(manifest, dict) else None
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
        raise BillingFileError(label, "is not a CUR manifest: it has no reportKeys list")
    parts = []
    for key in keys:
        candidates = [path.parent / key, path.parent / Path(key).name]
        found = next((c for c in candidates if c.is_file()), None)
        if found is not None and not found.resolve().is_relative_to(inside):
            raise BillingFileError(
                label,
                f"lists part {key!r}, which is outside "
                f"{'the source' if root is not None else 'its own folder'}: a manifest's parts "
                "must be inside it",
            )
        if found is None:
            raise BillingFileError(
                label, f"lists part {key!r}, which is not beside it ({Path(key).name})"
            )
        parts.append(found)
    return parts
