"""The allocation page's preview: how much spend a change of a tag key alias or an allocation rule
would move, and from whom, before it is saved.

The preview is exact and equal to what saving then moves, because it runs the same code: the
change is applied inside a savepoint, the attribution facts are loaded from it (Attributor.load,
as the re-attribution does) and the savepoint is rolled back; then what the change can touch is
attributed again in memory and nothing is written. It reads raw lines, which pages never do
(DESIGN.md): it runs only when someone asks for it, and reads only the lines the change can reach.

- A rule reaches only the lines that tags, registered resources and model API keys did not reach
  when they were stored. The attribution reads of them their tags, four fields, the cost kind and,
  for a resource a run or deployment registered, their time: the database sums them in one pass
  by all of that but the time, a registered resource's lines kept apart, and the re-attribution's
  diff runs on the sums (services.unreached_dry_run), over the whole history. A fact changed
  since without a re-attribution of its own (a project created that tags name) moves these lines
  here as in the run; the preview does not look past them (a line a shrunk window no longer
  gives its run, another rule's lines whose project's usual workload changed): the run after
  saving attributes all history again and moves those too.
- An alias changes what tags name, so every line with the alias's key is attributed again line by
  line (services.attribution_dry_run, the re-attribution's own diff), up to PREVIEW_MAX_LINES.
"""

import copy
import time
from collections.abc import Callable

from django.db import connection, transaction
from django.db.models import BooleanField, Q, QuerySet
from django.db.models.expressions import RawSQL

from apps.projects.models import AllocationRule, TagKeyAlias

from .attribution import Attributor, alias_key
from .models import AttributedBy, CostLineItem, Delivery
from .selectors_allocation import Movement, movement_from_rows
from .services import attribution_dry_run, unreached_dry_run
from .services_attribution import pattern_regex

# An alias preview reads at most this many lines: a change that reaches more is saved without one,
# and the run then says what moved. Measured (bench/reattribution.py, 2-core machine, shared):
# lines are read by COPY at about 23,000 lines/s end to end, so 100,000 lines take about 4-5 s.
PREVIEW_MAX_LINES = 100_000


def _reachable(narrow: Callable[[QuerySet], QuerySet]) -> int:
    deliveries = Delivery.objects.filter(status=Delivery.Status.CURRENT)
    return sum(
        narrow(CostLineItem.objects.of_delivery(delivery)).count() for delivery in deliveries
    )


def _attributor_after(apply: Callable[[], None]) -> Attributor:
    """The attribution facts as they would be after `apply`, which is rolled back."""
    with transaction.atomic():
        apply()
        attributor = Attributor.load()
        transaction.set_rollback(True)
    return attributor


def _preview(apply: Callable[[], None], narrow: Callable[[QuerySet], QuerySet]) -> Movement:
    """An alias change's preview (a rule's on SQLite): the lines it can reach attributed again,
    line by line."""
    started = time.monotonic()
    reachable = _reachable(narrow)
    if reachable > PREVIEW_MAX_LINES:
        return Movement(lines=0, sources=[], targets=[], too_many_lines=reachable)
    attributor = _attributor_after(apply)
    moves = attribution_dry_run(attributor=attributor, narrow=narrow)
    return movement_from_rows(
        moves.as_json(), lines=moves.lines, seconds=round(time.monotonic() - started, 3)
    )


def _rule_preview(apply: Callable[[], None], rules: list[AllocationRule]) -> Movement:
    """A rule change's preview, over the whole history however long: the lines it can reach are
    summed in the database by what the rules read, and the sums attributed again.

    SQLite (the demo's database) adds decimals up as floating point, so there the lines are read
    one by one, as an alias's are (a demo's history is small)."""
    if connection.vendor != "postgresql":
        return _preview(apply, _rule_lines(rules))
    started = time.monotonic()
    attributor = _attributor_after(apply)
    # unreached_dry_run reads only the lines no tag or registered resource reached.
    moves = unreached_dry_run(attributor=attributor, narrow=_rule_matches(rules))
    return movement_from_rows(
        moves.as_json(), lines=moves.lines, seconds=round(time.monotonic() - started, 3)
    )


def _rule_matches(rules: list[AllocationRule]) -> Callable[[QuerySet], QuerySet]:
    """Lines a rule matches, before or after the change.

    The database matches the pattern without case as the attribution (RE2) does; a few exotic
    Unicode case pairs (the Kelvin sign and k) could differ, which no billing field holds.
    """
    matches = Q()
    for rule in rules:
        matches |= Q(**{f"{rule.field}__iregex": pattern_regex(rule.pattern)})

    def narrow(lines: QuerySet) -> QuerySet:
        return lines.filter(matches)

    return narrow


def _rule_lines(rules: list[AllocationRule]) -> Callable[[QuerySet], QuerySet]:
    """Lines a rule change can move: those tags and registered resources did not reach (the rules
    see only these), matched by the rule before or after the change."""
    matches = _rule_matches(rules)

    def narrow(lines: QuerySet) -> QuerySet:
        return matches(
            lines.filter(attributed_by__in=[AttributedBy.RULE.value, AttributedBy.NONE.value])
        )

    return narrow


def _alias_lines(aliases: list[TagKeyAlias]) -> Callable[[QuerySet], QuerySet]:
    """Lines an alias change can move: those with a tag whose key is the alias's, before or after
    the change (keys compared without case or spaces, as the attribution compares them)."""
    keys = sorted({alias_key(alias.key) for alias in aliases})

    def narrow(lines: QuerySet) -> QuerySet:
        lines = lines.exclude(tags={})
        if connection.vendor != "postgresql" or not all(key.isascii() for key in keys):
            return lines
        # For ASCII keys, dropping what is not printable ASCII and lowering is the same test.
        has_key = RawSQL(
            "CASE WHEN jsonb_typeof(tags) = 'object' THEN EXISTS (SELECT 1 FROM "
            "jsonb_object_keys(tags) AS k WHERE regexp_replace(lower(k), '[^!-~]', '', 'g') "
            "= ANY(%s)) ELSE false END",
            (keys,),
            output_field=BooleanField(),
        )
        return lines.filter(has_key)

    return narrow


def allocation_rule_preview(
    *, rule: AllocationRule, original: AllocationRule | None = None
) -> Movement:
    """What saving `rule` (new, or `original` changed into it) would move."""
    candidate = copy.copy(rule)
    if original is None:
        candidate.pk = None
        candidate._state.adding = True

    return _rule_preview(candidate.save, [r for r in (original, rule) if r is not None])


def allocation_rule_delete_preview(*, rule: AllocationRule) -> Movement:
    return _rule_preview(copy.copy(rule).delete, [rule])


def tag_key_alias_preview(*, alias: TagKeyAlias, original: TagKeyAlias | None = None) -> Movement:
    """What saving `alias` (new, or `original` changed into it) would move."""
    candidate = copy.copy(alias)
    if original is None:
        candidate.pk = None
        candidate._state.adding = True
    return _preview(candidate.save, _alias_lines([a for a in (original, alias) if a is not None]))


def tag_key_alias_delete_preview(*, alias: TagKeyAlias) -> Movement:
    return _preview(copy.copy(alias).delete, _alias_lines([alias]))
