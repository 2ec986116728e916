"""Weekly digests for 1,000 subscribers over the benchmark organisation (bench/attribution_org.py)
sent through an SMTP server on loopback, against rendering the same 1,000 digests without sending,
in the same run.

The subscribers are spread over the organisation's 8 teams as its people would be: leads and
members, most with all their projects, some with one project or a minimum amount. The SMTP server
is aiosmtpd in a process of its own on 127.0.0.1, counting what it accepts. Each pass starts from
no deliveries; the rendering pass builds and renders every digest (subject, text, HTML, the whole
MIME message) exactly as the sending pass does, and only skips the claim, the SMTP conversation
and the marking. The order is render, dry run, send, dry run, render: `ratio` is the send
against the mean of the two renders (the database's caches are as warm for one as for the other),
`ratio_to_dry_run` the send against the mean of the two dry runs. The send is `manage.py
digests_send --period weekly --json` in a process of its own, as a person runs it: its time
includes the process start, and that is the time that must be under 60 s. The dry run is the same
command with `--dry-run`: the same process start, subscriptions and reads, every message built and
generated to its bytes, nothing claimed, sent or marked (the deliveries are deleted before each,
and each must have built as many messages as the send sent). The same command with `--help`
(Django set up, every app loaded, nothing sent) is timed last: `process_start_seconds`, the part of
the send that the rendering in this process never pays.

On a shared machine the wall-clock times move with everyone else's work; `cpu_seconds` says what
each part cost in CPU (user and system): the renders' (this process's), the send command's, the
`--help` command's and the SMTP server's, over the whole run (Postgres's own is in none of them).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/<a copy of costsite_bench> \\
        python bench/digests_send.py [--subscribers 1000]

The first run adds the bench users and, if the organisation has no findings yet, recomputes them
(not timed). Goal: sending ≤ 1.5x the rendering alone, and under 60 s in all.
"""

import argparse
import json
import os
import random
import resource
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")
os.environ.setdefault("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")

SERVER = r"""
import asyncio, signal, sys
from aiosmtpd.controller import Controller

class Count:
    accepted = 0
    async def handle_DATA(self, server, session, envelope):
        Count.accepted += len(envelope.rcpt_tos)
        return "250 OK"

# SIGTERM is waited for, not delivered: blocked before the server's thread starts (it inherits).
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
controller = Controller(Count(), hostname="127.0.0.1", port=int(sys.argv[1]))
controller.start()
print("ready", flush=True)
signal.sigwait({signal.SIGTERM})
controller.stop()
print(Count.accepted, flush=True)
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def subscribers_ensure(count: int) -> None:
    from django.contrib.auth import get_user_model

    from apps.accounts.models import Membership, Team
    from apps.digests.models import Subscription

    users = get_user_model().objects
    have = users.filter(username__startswith="digest-bench-").count()
    if have >= count:
        return
    rng = random.Random(21)  # noqa: S311 (a benchmark's layout, not a secret)
    teams = list(Team.objects.prefetch_related("projects"))
    for n in range(have, count):
        team = teams[n % len(teams)]
        user = users.create(
            username=f"digest-bench-{n:04d}", email=f"digest-bench-{n:04d}@example.com"
        )
        role = Membership.Role.LEAD if n % 10 == 0 else Membership.Role.MEMBER
        Membership.objects.create(user=user, team=team, role=role)
        subscription = Subscription.objects.create(
            user=user, minimum_amount=Decimal("100") if rng.random() < 0.2 else Decimal("0")
        )
        if rng.random() < 0.3:
            subscription.projects.set([rng.choice(list(team.projects.all()))])


def findings_ensure() -> None:
    from apps.insights.models import Finding
    from apps.insights.services import findings_recompute

    if not Finding.objects.exists():
        clock = time.perf_counter()
        findings_recompute(reason="digests benchmark")
        print(f"findings recomputed in {time.perf_counter() - clock:.1f} s", file=sys.stderr)


def children_cpu() -> float:
    """CPU seconds (user and system) of this process's children waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def render_all(now: datetime) -> tuple[float, int, int, float]:
    """Build and render every digest due, as digests_send does, without sending: seconds, bytes,
    distinct digests built (`built` also keeps the run's reads: those are not counted), CPU
    seconds."""
    from apps.digests import selectors, services
    from apps.digests.selectors import Digest

    clock, cpu = time.perf_counter(), time.process_time()
    start, end = selectors.period_of(frequency="weekly", day=now.date())
    built: dict = {}
    rendered: dict = {}
    size = 0
    due = list(selectors.subscriptions_due(frequency="weekly"))
    readers = selectors.readers_of(due)
    for subscription in due:
        key = selectors.digest_view_key(
            subscription=subscription, period_start=start, period_end=end, readers=readers
        )
        digest = built.get(key)
        if digest is None:
            digest = built[key] = selectors.digest_build(
                subscription=subscription,
                period_start=start,
                period_end=end,
                shared=built,
                readers=readers,
            )
        if not digest.is_empty:
            size += len(
                services.digest_message(subscription=subscription, digest=digest, rendered=rendered)
                .message()
                .as_bytes()
            )
    distinct = sum(isinstance(v, Digest) for v in built.values())
    return time.perf_counter() - clock, size, distinct, time.process_time() - cpu


@dataclass
class Timed:
    seconds: float
    cpu: float
    stdout: str


def timed(command: list[str]) -> Timed:
    """Run a command as a person runs it; its wall-clock and CPU seconds and its output."""
    clock, cpu = time.perf_counter(), children_cpu()
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
    return Timed(time.perf_counter() - clock, children_cpu() - cpu, done.stdout)


def statuses_of(output: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in output.splitlines():
        status = json.loads(line)["status"]
        counts[status] = counts.get(status, 0) + 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subscribers", type=int, default=1000)
    args = parser.parse_args()
    port = free_port()
    os.environ["EMAIL_HOST"], os.environ["EMAIL_PORT"] = "127.0.0.1", str(port)

    import django

    django.setup()
    from apps.digests.models import Delivery, Subscription
    from apps.digests.services import subscriptions_ensure

    subscribers_ensure(args.subscribers)
    subscriptions_ensure()
    # Only the bench's subscribers: the organisation's own leads are left out of the count.
    Subscription.objects.exclude(user__username__startswith="digest-bench-").update(active=False)
    findings_ensure()
    from apps.spend.selectors import data_as_of

    newest = data_as_of()
    day = newest.date()
    monday = day - timedelta(days=day.weekday())
    now = datetime(monday.year, monday.month, monday.day, 8, tzinfo=UTC)

    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(port)], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout.readline().strip() == "ready"
    try:
        Delivery.objects.all().delete()
        render_1, size, distinct, render_cpu_1 = render_all(now)
        command = [sys.executable, str(ROOT / "manage.py"), "digests_send", "--period", "weekly"]
        command += ["--now", now.isoformat(), "--json"]
        dry_1 = timed(command + ["--dry-run"])
        # The send as a person runs it: the command, its process start included.
        send = timed(command)
        results = [json.loads(line) for line in send.stdout.splitlines()]
        Delivery.objects.all().delete()
        dry_2 = timed(command + ["--dry-run"])
        render_2, _, _, render_cpu_2 = render_all(now)
        # What of the send is the process start alone: the same command, up to its --help.
        start = timed([*command[:2], "digests_send", "--help"])
    finally:
        server.send_signal(signal.SIGTERM)
        accepted = int(server.stdout.readline().strip() or 0)
        cpu = children_cpu()
        server.wait()
        server_cpu = children_cpu() - cpu
    statuses = statuses_of(send.stdout)
    dry_statuses = [statuses_of(dry_1.stdout), statuses_of(dry_2.stdout)]
    # The dry runs must have built what the send sent, no more and no fewer.
    for dry in dry_statuses:
        assert dry.get("would_send", 0) == statuses.get("sent", 0), (dry, statuses)
    render = (render_1 + render_2) / 2
    dry_run = (dry_1.seconds + dry_2.seconds) / 2
    print(
        json.dumps(
            {
                "subscribers": len(results),
                "period": (
                    f"{results[0]['period_start']} – {results[0]['period_end']}" if results else ""
                ),
                "distinct_digests": distinct,
                "statuses": statuses,
                "dry_run_statuses": dry_statuses,
                "accepted_by_smtp": accepted,
                "mime_bytes": size,
                "render_seconds": [round(render_1, 2), round(render_2, 2)],
                "dry_run_seconds": [round(dry_1.seconds, 2), round(dry_2.seconds, 2)],
                "send_seconds": round(send.seconds, 2),
                "process_start_seconds": round(start.seconds, 2),
                "ratio": round(send.seconds / render, 2),
                "ratio_to_dry_run": round(send.seconds / dry_run, 2),
                "total_seconds": round(render_1 + send.seconds + render_2, 2),
                "cpu_seconds": {
                    "render": [round(render_cpu_1, 2), round(render_cpu_2, 2)],
                    "dry_run_command": [round(dry_1.cpu, 2), round(dry_2.cpu, 2)],
                    "send_command": round(send.cpu, 2),
                    "process_start": round(start.cpu, 2),
                    "smtp_server": round(server_cpu, 2),
                },
                "load_average": [round(load, 2) for load in os.getloadavg()],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
