"""Errors an import reports to whoever gave it the file: each says where and what is wrong."""


def _shown(value: object, limit: int = 80) -> str:
    text = str(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return repr(text)


class BillingImportError(Exception):
    """Bad input: the run fails with this message and nothing of it stays behind."""


class BillingFileError(BillingImportError):
    """A fault of the whole file: empty, binary, truncated, not a format we know."""

    def __init__(self, file: str, problem: str):
        self.file = file
        self.problem = problem
        super().__init__(f"{file}: {problem}")


class BillingRowError(BillingImportError):
    """A value that cannot be understood: names the row (the header is row 1) and the column."""

    def __init__(
        self, file: str, row: int, column: str, value: object, expected: str, *, problem: str = ""
    ):
        self.file, self.row, self.column, self.value = file, row, column, value
        if value is None:
            detail = f"empty, but {expected} is required"
        elif problem:  # what is wrong, when "is not <expected>" would mislead
            detail = f"{_shown(value)} {problem}"
        else:
            detail = f"{_shown(value)} is not {expected}"
        super().__init__(f"{file}: row {row}, column {column}: {detail}")


class MissingColumnError(Exception):
    """A header without a column the import cannot do without (the file is named by the caller)."""

    def __init__(self, missing: list[str], format_label: str):
        self.missing = missing
        noun = "column" if len(missing) == 1 else "columns"
        super().__init__(f"missing mandatory {format_label} {noun} {', '.join(missing)}")


class SourceValueError(Exception):
    """A bad value a format found while mapping a batch onto FOCUS: the batch's row index and the
    source column; the importer adds the file and the row number (`at`)."""

    def __init__(self, index: int, column: str, value: object, expected: str, *, problem: str = ""):
        self.index, self.column, self.value, self.expected = index, column, value, expected
        self.problem = problem
        super().__init__(f"row index {index}, column {column}")

    def at(self, file: str, first_row: int) -> BillingRowError:
        return BillingRowError(
            file,
            first_row + self.index,
            self.column,
            self.value,
            self.expected,
            problem=self.problem,
        )
