"""The finding-hours' day rollup, on PostgreSQL: each finding's days (FindingDay) and months
(FindingMonth, the days summed), and the line-hours several waste findings share, grouped by
that set of findings (FindingShareGroup), counted once per group and day (FindingShareDay) and
kept hour by hour (FindingSharedHour); and what a recompute's refresh reads of each
finding's days outside its period (FindingDayHours, FindingDayOwner).

The recompute writes the hours of the days it recomputes, then rebuilds these for those days in
the same transaction, so that a page never reads days that disagree with the hours; a finding
deleted in the admin has the days it was seen rebuilt. Elsewhere (SQLite: the demo, a
developer's machine) the pages read the hours themselves and nothing is written here.
"""

from datetime import date, timedelta

from django.db import connection, transaction
from django.db.models import Max, Min

from costsite.months import month_start, next_month_start

from .compute import day_start
from .models import (
    NOT_WASTE_KINDS,
    Finding,
    FindingDay,
    FindingDayHours,
    FindingDayOwner,
    FindingHour,
    FindingMonth,
    FindingShareDay,
    FindingSharedHour,
    FindingShareGroup,
    FindingShareMember,
)

SHARED = "insights_shared_tmp"  # the period's shared waste hours, with their group's members


def day_rollup_used() -> bool:
    """Whether the pages read the day rollup (PostgreSQL, where the recompute keeps it)."""
    return connection.vendor == "postgresql"


# A transaction-scoped advisory lock: one rebuild at a time (the recompute's, an admin delete's),
# each seeing the other's rows once it has them, never writing the same days twice.
REBUILD_LOCK = 0x66696E64  # "find"


def day_rollup_rebuild(
    *, start: date | None, end: date | None, months: bool = True, lives: bool = True
) -> dict[str, int]:
    """The rollup of the UTC days `[start, end)` (None: unbounded) made again from the hours,
    and of the months they fall in (unless `months` is false: migration 0010, before their
    table), and the days the refresh reads of a finding's life (unless `lives` is false:
    migrations before their tables), in a transaction (the caller's, when it has one) that
    holds the rebuild lock to its end. Returns how many rows of each table were written."""
    if not day_rollup_used():
        return {
            "days": 0,
            "shared_hours": 0,
            "share_days": 0,
            "months": 0,
            "life_days": 0,
            "owner_days": 0,
        }
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [REBUILD_LOCK])
        return _rebuild(start=start, end=end, months=months, lives=lives)


def _windows(start: date | None, end: date | None) -> tuple[str, list, str, list]:
    """The SQL conditions (and their parameters) of the hours, and of the days, of `[start,
    end)`: each a string of "AND ..." to follow a WHERE."""
    hour_window, day_window, params, day_params = "", "", [], []
    if start is not None:
        hour_window += " AND hour >= %s"
        day_window += " AND day >= %s"
        params.append(day_start(start))
        day_params.append(start)
    if end is not None:
        hour_window += " AND hour < %s"
        day_window += " AND day < %s"
        params.append(day_start(end))
        day_params.append(end)
    return hour_window, params, day_window, day_params


def _rebuild(*, start: date | None, end: date | None, months: bool, lives: bool) -> dict[str, int]:
    tables = {
        "hours": FindingHour._meta.db_table,
        "findings": Finding._meta.db_table,
        "days": FindingDay._meta.db_table,
        "groups": FindingShareGroup._meta.db_table,
        "members": FindingShareMember._meta.db_table,
        "share_days": FindingShareDay._meta.db_table,
        "shared": FindingSharedHour._meta.db_table,
    }
    hour_window, params, day_window, day_params = _windows(start, end)
    not_waste = list(NOT_WASTE_KINDS)
    written = {}
    with connection.cursor() as cursor:
        for table in ("days", "share_days"):
            cursor.execute(f"DELETE FROM {tables[table]} WHERE true{day_window}", day_params)
        cursor.execute(f"DELETE FROM {tables['shared']} WHERE true{hour_window}", params)
        # The period's waste hours whose line-hour two or more findings hold, each with the set
        # of those findings (one grouping of the period's waste hours).
        cursor.execute(f"DROP TABLE IF EXISTS {SHARED}")
        cursor.execute(
            f"""
            CREATE TEMPORARY TABLE {SHARED} AS
            WITH waste AS MATERIALIZED (
                SELECT hours.finding_id, hours.line_key, hours.hour, hours.currency,
                       hours.wasted, hours.spend
                FROM {tables["hours"]} AS hours
                JOIN {tables["findings"]} AS finding ON finding.id = hours.finding_id
                WHERE hours.wasted > 0 AND NOT (finding.kind = ANY(%s)){hour_window}
            ), line_hours AS (
                SELECT line_key, hour, currency,
                       string_agg(finding_id::text, ',' ORDER BY finding_id) AS members,
                       count(*) AS size,
                       least(sum(wasted), max(spend)) AS counted
                FROM waste
                GROUP BY line_key, hour, currency
                HAVING count(*) > 1
            )
            SELECT waste.*, line_hours.members, line_hours.size, line_hours.counted
            FROM waste JOIN line_hours USING (line_key, hour, currency)
            """,
            [not_waste, *params],
        )
        # New sets of findings become groups, with their members.
        cursor.execute(
            f"""
            WITH added AS (
                INSERT INTO {tables["groups"]} (members, size)
                SELECT DISTINCT members, size FROM {SHARED}
                ON CONFLICT (members) DO NOTHING
                RETURNING id, members
            )
            INSERT INTO {tables["members"]} (group_id, finding_id)
            SELECT added.id, member::bigint
            FROM added, unnest(string_to_array(added.members, ',')) AS member
            """
        )
        cursor.execute(
            f"""
            INSERT INTO {tables["shared"]}
                (finding_id, group_id, line_key, hour, currency, wasted, spend)
            SELECT shared.finding_id, grouped.id, shared.line_key, shared.hour, shared.currency,
                   shared.wasted, shared.spend
            FROM {SHARED} AS shared JOIN {tables["groups"]} AS grouped USING (members)
            ORDER BY grouped.id, shared.hour
            """
        )
        written["shared_hours"] = cursor.rowcount
        # Each line-hour once (its findings' rows all carry its count).
        cursor.execute(
            f"""
            INSERT INTO {tables["share_days"]} (group_id, day, currency, counted)
            SELECT grouped.id, line_hours.day, line_hours.currency, sum(line_hours.counted)
            FROM (
                SELECT DISTINCT members, line_key, hour, currency, counted,
                       (hour AT TIME ZONE 'UTC')::date AS day
                FROM {SHARED}
            ) AS line_hours
            JOIN {tables["groups"]} AS grouped USING (members)
            GROUP BY grouped.id, line_hours.day, line_hours.currency
            """
        )
        written["share_days"] = cursor.rowcount
        # Each finding's days: every hour's wasted, and of its waste hours the wasted no other
        # finding shares (its waste hours' wasted less its shared hours'; none where the finding
        # had no waste hour that day: a lever, unattributed spend, hours of nothing wasted).
        cursor.execute(
            f"""
            INSERT INTO {tables["days"]} (finding_id, day, currency, wasted, alone)
            SELECT days.finding_id, days.day, days.currency, days.wasted,
                   coalesce(days.waste, 0) - coalesce(shared.wasted, 0)
            FROM (
                SELECT hours.finding_id, (hours.hour AT TIME ZONE 'UTC')::date AS day,
                       hours.currency, sum(hours.wasted) AS wasted,
                       sum(hours.wasted) FILTER (
                           WHERE hours.wasted > 0 AND NOT (finding.kind = ANY(%s))
                       ) AS waste
                FROM {tables["hours"]} AS hours
                JOIN {tables["findings"]} AS finding ON finding.id = hours.finding_id
                WHERE true{hour_window}
                GROUP BY 1, 2, 3
            ) AS days
            LEFT JOIN (
                SELECT finding_id, (hour AT TIME ZONE 'UTC')::date AS day, currency,
                       sum(wasted) AS wasted
                FROM {SHARED}
                GROUP BY 1, 2, 3
            ) AS shared USING (finding_id, day, currency)
            ORDER BY days.finding_id, days.day
            """,
            [not_waste, *params],
        )
        written["days"] = cursor.rowcount
        if months:
            written["months"] = _months_rebuild(cursor, start=start, end=end)
        if lives:
            written.update(lives_rebuild(cursor, start=start, end=end))
        cursor.execute(f"DROP TABLE {SHARED}")
        # Groups no day names any more (their findings no longer share an hour) go.
        orphans = f"""SELECT grouped.id FROM {tables["groups"]} AS grouped
                      WHERE NOT EXISTS (SELECT 1 FROM {tables["share_days"]} AS share_day
                                        WHERE share_day.group_id = grouped.id)"""
        cursor.execute(f"DELETE FROM {tables['members']} WHERE group_id IN ({orphans})")
        cursor.execute(f"DELETE FROM {tables['groups']} WHERE id IN ({orphans})")
    return written


def _months_rebuild(cursor, *, start: date | None, end: date | None) -> int:
    """FindingMonth of every month that a day of `[start, end)` falls in, summed again from the
    days (those just rebuilt and the rest of their months)."""
    window, params = "", []
    if start is not None:
        window += " AND {column} >= %s"
        params.append(month_start(start))
    if end is not None:
        window += " AND {column} < %s"
        params.append(next_month_start(end - timedelta(days=1)))
    months, days = FindingMonth._meta.db_table, FindingDay._meta.db_table
    cursor.execute(f"DELETE FROM {months} WHERE true{window.format(column='month')}", params)
    cursor.execute(
        f"""
        INSERT INTO {months} (finding_id, month, currency, wasted, alone)
        SELECT finding_id, date_trunc('month', day)::date, currency, sum(wasted), sum(alone)
        FROM {days}
        WHERE true{window.format(column="day")}
        GROUP BY 1, 2, 3
        ORDER BY 1, 2
        """,
        params,
    )
    return cursor.rowcount


def lives_rebuild(cursor, *, start: date | None, end: date | None) -> dict[str, int]:
    """FindingDayHours and FindingDayOwner of the UTC days `[start, end)`, from the hours. The
    distinct hours are counted on the hours sorted by day: grouping them by hour first hashed
    nearly every row (that statement alone, a year's 2.4M hours: 4.3 s against 2.3 s; the whole
    rebuild in the recompute's settings 8.7 s against 4.1 s)."""
    hour_window, params, day_window, day_params = _windows(start, end)
    hours = FindingHour._meta.db_table
    lives, owners = FindingDayHours._meta.db_table, FindingDayOwner._meta.db_table
    for table in (lives, owners):
        cursor.execute(f"DELETE FROM {table} WHERE true{day_window}", day_params)
    cursor.execute(
        f"""
        INSERT INTO {lives} (finding_id, day, currency, measured, hours, spend, wasted,
                             first_wasted, last_wasted)
        SELECT finding_id, (hour AT TIME ZONE 'UTC')::date, currency, measured,
               count(DISTINCT hour), sum(spend), sum(wasted),
               min(hour) FILTER (WHERE wasted > 0), max(hour) FILTER (WHERE wasted > 0)
        FROM {hours}
        WHERE true{hour_window}
        GROUP BY 1, 2, 3, 4
        ORDER BY 1, 2
        """,
        params,
    )
    written = {"life_days": cursor.rowcount}
    cursor.execute(
        f"""
        INSERT INTO {owners} (finding_id, day, project_id, experiment_id, deployment_id, spend)
        SELECT finding_id, (hour AT TIME ZONE 'UTC')::date, project_id, experiment_id,
               deployment_id, sum(spend)
        FROM {hours}
        WHERE true{hour_window}
        GROUP BY 1, 2, 3, 4, 5
        ORDER BY 1, 2
        """,
        params,
    )
    written["owner_days"] = cursor.rowcount
    return written


def days_seen(findings) -> tuple[date, date] | None:
    """The first and the last day of `findings`' hours in the rollup (None: none)."""
    seen = FindingDay.objects.filter(finding__in=findings).aggregate(
        first=Min("day"), last=Max("day")
    )
    if seen["first"] is None:
        return None
    return seen["first"], seen["last"]


def days_forget(seen: tuple[date, date] | None) -> None:
    """After findings are deleted (in the admin), the days they were seen (`days_seen` of them
    before the delete) rebuilt without them."""
    if seen is not None and day_rollup_used():
        day_rollup_rebuild(start=seen[0], end=seen[1] + timedelta(days=1))
