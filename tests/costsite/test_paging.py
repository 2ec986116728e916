"""Which page a URL asks for, and what the pager says of it."""

from django.http import QueryDict

from costsite.paging import page_asked, page_window


def test_a_page_asked_past_any_list_is_a_number_every_database_takes():
    assert page_asked(QueryDict("page=99999999999999999999")) == 2**31 - 1


def test_the_page_asked_is_a_positive_number_or_the_first():
    assert [page_asked(QueryDict(q)) for q in ("", "page=3", "page=0", "page=-2", "page=x")] == [
        1,
        3,
        1,
        1,
        1,
    ]


def test_a_window_counts_its_items_and_stays_within_the_pages():
    second = page_window(count=58, asked=2, per_page=50)
    assert (second.pages, second.number, second.offset, second.stop) == (2, 2, 50, 100)
    assert (second.first, second.last, second.has_previous, second.has_next) == (
        51,
        58,
        True,
        False,
    )
    beyond = page_window(count=58, asked=9, per_page=50)
    assert (beyond.number, beyond.first, beyond.last) == (2, 51, 58)
    empty = page_window(count=0, asked=3, per_page=50)
    assert (empty.pages, empty.number, empty.first, empty.last) == (1, 1, 0, 0)
    assert (empty.has_previous, empty.has_next) == (False, False)
