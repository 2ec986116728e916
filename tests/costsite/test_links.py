"""link_to gives what reverse() gives, for every value a page links to."""

import pytest
from django.urls import NoReverseMatch, reverse, set_script_prefix

from costsite.links import link_to


@pytest.mark.parametrize(
    ("name", "values"),
    [
        ("gpu_detail", [1, 42, 918273645, 10**12, "7"]),
        ("project_detail", ["vision-0", "a", "ranker_v2", "918273645", "x-918273645-y"]),
    ],
)
def test_a_link_is_what_reverse_gives(name, values):
    link = link_to(name)
    assert [link(value) for value in values] == [reverse(name, args=[v]) for v in values]


def test_the_script_prefix_is_kept():
    set_script_prefix("/costs/")
    try:
        assert link_to("gpu_detail")(5) == "/costs/gpus/5/" == reverse("gpu_detail", args=[5])
    finally:
        set_script_prefix("/")


def test_a_value_reverse_would_quote_or_refuse_goes_through_reverse():
    project = link_to("project_detail")
    with pytest.raises(NoReverseMatch):
        project("two words")
    gpu = link_to("gpu_detail")
    for refused in (-3, "abc", "1.5", True):
        with pytest.raises(NoReverseMatch):
            gpu(refused)
