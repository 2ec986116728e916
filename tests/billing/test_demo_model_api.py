"""The demo's gateway log: one file a month, and none for a month the window only grazes."""

import csv
from datetime import UTC, datetime

from apps.demo.model_api import DAYS, _hours, gateway_log_write


def test_a_month_with_no_office_hour_in_the_window_writes_no_file(tmp_path):
    """Seeded on a Friday evening, 4 December 2026: the window opens on Friday 30 October at
    22:00, after office hours, and October's last day is a Saturday. October has no request, and
    a log with a header and no rows is refused by the importer, so no October file is written."""
    paths, traffic = gateway_log_write(tmp_path, _hours(datetime(2026, 12, 4, 22, 30, tzinfo=UTC)))

    assert [path.name for path in paths] == [
        "litellm-spend-logs-2026-11.csv",
        "litellm-spend-logs-2026-12.csv",
    ]
    assert sorted(path.name for path in tmp_path.iterdir()) == [path.name for path in paths]
    rows = {path.name: list(csv.DictReader(path.open(encoding="utf-8"))) for path in paths}
    assert all(rows.values())
    # Every hour of the window is still reported to the traffic, October's two evening hours
    # among them with no request, and the requests written are the requests counted.
    assert len(traffic) == DAYS * 24
    assert traffic[0].hour == datetime(2026, 10, 30, 22, tzinfo=UTC)
    assert [figures.requests for figures in traffic[:26]] == [0] * 26
    assert sum(figures.requests for figures in traffic) == sum(map(len, rows.values()))
