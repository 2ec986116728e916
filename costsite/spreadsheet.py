"""Text a spreadsheet would run, made text: the one rule every CSV export of the site applies
to its text cells (OWASP, "CSV Injection").

A cell runs as a formula in Excel, LibreOffice or Google Sheets when it starts with `=`, `+`,
`-` or `@`, or with a tab or carriage return that some of them skip first; `|` and `;` start
DDE payloads (`|cmd`) and the list separator of some locales. Spreadsheets also skip leading
spaces and line breaks, and read the fullwidth forms (`＝`, `＋`, `－`, `＠`) as the ASCII ones,
so the first character that counts is the first one that is neither blank nor invisible, read
as Unicode's compatibility form (NFKC: `＝` is `=`, `﹦` too). Such a cell gets a leading
apostrophe, the spreadsheets' own "this is text" mark. A cell that is a plain number (`-12.50`,
`+3`, `1e-7`) cannot run and stays as it is, so negative amounts stay numbers.
"""

import re
import unicodedata

# After the blanks a spreadsheet skips: what makes a cell a formula or a DDE call.
FORMULA_STARTS = frozenset("=+-@|;")
# Before anything else: a spreadsheet skips these (or treats them as a formula start).
CONTROL_STARTS = ("\t", "\r", "\n")
NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def _counts(char: str) -> bool:
    """Whether a spreadsheet reads this character rather than skipping it: blanks (spaces,
    line breaks, no-break spaces) and invisible format characters (zero-width space, BOM)
    are skipped."""
    return not (char.isspace() or unicodedata.category(char) == "Cf")


def neutralised(text: str) -> str:
    """`text` as a cell no spreadsheet runs."""
    if NUMBER.fullmatch(text):
        return text
    if text.startswith(CONTROL_STARTS):
        return "'" + text
    first = next((char for char in text if _counts(char)), "")
    if first and unicodedata.normalize("NFKC", first)[:1] in FORMULA_STARTS:
        return "'" + text
    return text
