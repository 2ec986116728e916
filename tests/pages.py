"""Reading a page as a person reads it: the text of a table's cells."""

from html.parser import HTMLParser


class _Table(HTMLParser):
    def __init__(self, table_id: str):
        super().__init__()
        self.table_id = table_id
        self.rows: list[list[str]] = []
        self._depth = 0  # tables open inside the sought one, itself included
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table" and (self._depth or dict(attrs).get("id") == self.table_id):
            self._depth += 1
        elif self._depth == 1 and tag == "tr":
            self.rows.append([])
        elif self._depth == 1 and tag in ("td", "th") and self.rows:
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "table" and self._depth:
            self._depth -= 1
        elif self._cell is not None and tag in ("td", "th"):
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def table_rows(html: str, table_id: str) -> list[list[str]]:
    """The rows of the table `#table_id` (its header row first), each a list of its cells' text
    with white space collapsed."""
    reader = _Table(table_id)
    reader.feed(html)
    reader.close()
    if not reader.rows:
        raise AssertionError(f"no table #{table_id} with rows on the page")
    return reader.rows
