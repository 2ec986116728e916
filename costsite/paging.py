"""One page of a list sorted and cut in the database: which page a URL asks for, and what a pager
says about it ("GPUs 51–100 of 10,701 · page 2 of 215")."""

from dataclasses import dataclass

from django.http import QueryDict

# More pages than any list has, and a number every database takes as a parameter: a page past
# the last shows the last, and `?page=99999999999999999999` would overflow SQLite's integers.
LAST_PAGE_ASKED = 2**31 - 1


def page_asked(params: QueryDict) -> int:
    """The page a URL asks for (`?page=N`); 1 when it asks for none or for nonsense."""
    try:
        return min(max(1, int(params.get("page", 1))), LAST_PAGE_ASKED)
    except ValueError:
        return 1


@dataclass(frozen=True)
class Window:
    """Page `number` of `count` items, `per_page` a page. Made by `page_window`, which keeps the
    number within the pages there are."""

    count: int
    number: int
    per_page: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.count // self.per_page))

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def has_next(self) -> bool:
        return self.number < self.pages

    @property
    def offset(self) -> int:
        """The index of the page's first item: `items[window.offset : window.stop]`."""
        return (self.number - 1) * self.per_page

    @property
    def stop(self) -> int:
        return self.number * self.per_page

    @property
    def first(self) -> int:
        """The page's first item, counted from 1 (0 when there is none)."""
        return self.offset + 1 if self.count else 0

    @property
    def last(self) -> int:
        return min(self.count, self.stop)


def page_window(*, count: int, asked: int, per_page: int) -> Window:
    """Page `asked` of `count` items; past the last page, the last one."""
    pages = Window(count=count, number=1, per_page=per_page).pages
    return Window(count=count, number=min(max(1, asked), pages), per_page=per_page)
