"""id_in: an id column among a list of ids, the list sent as one parameter on PostgreSQL."""

import pytest
from django.db.models import Q

from apps.projects.models import Project
from costsite.lookups import id_in
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db


def test_the_rows_are_those_an_in_list_selects():
    first, _, third = ProjectFactory(), ProjectFactory(), ProjectFactory()
    wanted = [first.pk, third.pk, 10**9]
    chosen = Project.objects.filter(id_in("pk", wanted)).order_by("pk")
    assert list(chosen) == list(Project.objects.filter(pk__in=wanted).order_by("pk"))
    assert list(chosen) == [first, third]


def test_the_list_is_one_parameter_however_long():
    ids = list(range(1, 501))
    sql, params = Project.objects.filter(id_in("team_id", ids)).query.sql_with_params()
    assert '"projects_project"."team_id" = ANY(%s)' in sql
    assert params == (ids,)


def test_it_combines_with_other_conditions():
    kept, other = ProjectFactory(), ProjectFactory()
    either = id_in("pk", [kept.pk]) | Q(slug=other.slug)
    assert set(Project.objects.filter(either)) == {kept, other}
    assert list(Project.objects.filter(id_in("pk", [kept.pk]) & Q(slug=other.slug))) == []


def test_an_empty_list_and_what_is_not_a_whole_number_are_refused():
    with pytest.raises(ValueError, match=r"id_in\('pk'\) needs at least one id"):
        id_in("pk", [])
    for ids in (["7"], [1, None], [True]):
        with pytest.raises(TypeError, match=r"id_in\('pk'\) takes whole numbers only"):
            id_in("pk", ids)
