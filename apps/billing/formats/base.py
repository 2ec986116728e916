"""What every billing format provides to the shared pipeline."""

from dataclasses import dataclass, field

import pyarrow as pa


@dataclass(frozen=True)
class ColumnMap:
    """How a file's header maps onto FOCUS: FOCUS column → the source column it comes from.

    `extra` are provider columns (`x_*`) kept in the line item's `extra` JSON; `version` is the
    format version the header shows; `notes` say what the format had to infer (shown with the
    import's result).
    """

    focus: dict[str, str]
    extra: list[str] = field(default_factory=list)
    version: str = ""
    # What the format had to make up, for the import's summary (filled while reading batches).
    notes: list[str] = field(default_factory=list, compare=False)

    @property
    def source_columns(self) -> list[str]:
        return [*dict.fromkeys([*self.focus.values(), *self.extra])]


class BillingFormat:
    """A billing export format. Subclasses map their header and rows onto FOCUS columns."""

    name: str = ""
    label: str = ""
    # A log of single requests (a gateway's): its rows are rolled up into a line per UTC day
    # and everything else they share before they are loaded (FocusNormaliser._per_day).
    per_request: bool = False

    def detect(self, header: list[str]) -> bool:
        """Whether a file with this header is in this format."""
        raise NotImplementedError

    def column_map(self, header: list[str]) -> ColumnMap:
        """Map the header onto FOCUS; raise `MissingColumnError` naming what is missing."""
        raise NotImplementedError

    def extras(self, batch: pa.RecordBatch, columns: ColumnMap) -> dict[str, pa.Array]:
        """Provider columns kept in a line's `extra` JSON, by the name they are shown under."""
        return {name: batch.column(name) for name in columns.extra}

    def to_focus(self, batch: pa.RecordBatch, columns: ColumnMap) -> dict[str, pa.Array]:
        """FOCUS-named columns for one batch of source rows (same rows, same order).

        The default renames; a format whose values need more than a rename (CUR's amortised cost,
        Azure's US dates) overrides this.
        """
        names = batch.schema.names
        arrays = {}
        for focus_name, source in columns.focus.items():
            arrays[focus_name] = batch.column(names.index(source))
        return arrays
