"""FOCUS 1.0, 1.1 and 1.2 (FinOps Open Cost and Usage Specification).

Facts from the spec's sources, condensed in shared/reference/billing-formats.md §1. Headers are
matched without case (real files spell `SkuPriceid`); unknown columns are ignored, and of the
providers' own columns (`x_*`) those costsite reads are kept in a line's `extra`.
"""

from ..errors import MissingColumnError
from ..focus_spec import (  # noqa: F401  (re-exported: the format's column facts)
    ALL_COLUMNS_1_0,
    CHARGE_CATEGORIES,
    COLUMNS,
    COLUMNS_BY_NAME,
    FOCUS_1_2_COLUMNS,
    NEW_IN_1_1,
    NEW_IN_1_2,
    OPEN_ENUMS,
    SERVICE_CATEGORIES,
    Column,
)
from .base import BillingFormat, ColumnMap

_FOCUS_NAMES = frozenset(name.lower() for name in FOCUS_1_2_COLUMNS)
# Columns named in the message for a file that is not FOCUS.
SIGNATURE = ("ChargePeriodStart", "BilledCost", "EffectiveCost")
# No other export's header holds three FOCUS column names (CUR, GCP and Azure spell theirs
# differently), and a FOCUS file missing a mandatory column is still recognised, so that the
# message can name the column.
DETECT_AT_LEAST = 3
# The provider columns kept (the same names the CUR format keeps, so that an AWS line reads alike
# from either export; Azure's resource group and meter for rules and GPU meters). Each kept
# column costs load time (about 0.3 s a million rows on PostgreSQL, measured), so not all are.
KEPT_PROVIDER_COLUMNS = ("x_UsageType", "x_Operation", "x_ResourceGroupName", "x_SkuMeterName")


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
        kept = {name.lower() for name in KEPT_PROVIDER_COLUMNS}
        extra = [name for name in header if name.strip().lower() in kept]
        present = {name.strip().lower() for name in header}
        version = "1.0"
        if any(name.lower() in present for name in NEW_IN_1_1):
            version = "1.1"
        if any(name.lower() in present for name in NEW_IN_1_2):
            version = "1.2"
        return ColumnMap(focus=focus, extra=extra, version=version)
