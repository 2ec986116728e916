"""Load test: the dashboard under gunicorn on loopback, with PostgreSQL and the benchmark
organisation, as a team uses it. Not in CI (it takes two minutes and a filled database).

    createdb -h 127.0.0.1 -U postgres -T costsite_bench cs_load   # logins write sessions
    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/cs_load python bench/load.py
    dropdb -h 127.0.0.1 -U postgres cs_load

Two runs of Locust (bench/locustfile.py) against one gunicorn (DEBUG off, persistent database
connections), each user logged in as one of the organisation's people (its staff, team leads and
members, who see their team's projects) and browsing the overview, a project of theirs, the
waste page and a model of theirs, and a trivial login-required view in the same mix:

1. `--users` (50) users with think time (`--think`, 3 to 7 s between requests) for
   `--duration` (60 s): requests per second, p50, p95 and errors per page, and each page's p95
   as a ratio to the trivial view's under the same load. Goal: no errors, every page's p95
   under 300 ms and within 10x the trivial view's.
2. A closed loop: `--closed-users` (8) users without think time for `--closed-duration` (30 s):
   the throughput the server holds.

With `--warm`, every page the users browse is first requested once, one after the other (each
person's overview, waste page, projects and models), so that the timed runs see the cache as a
working day leaves it; without it they start cold (empty the cache first: every first visit of a
team to a page then computes its figures).

Each user starts logged in (a session made by this script, as a login makes it: fifty password
hashes at once would measure the login); the figures are counted from when all users have
started (Locust's --reset-stats). It refuses the shared `costsite_bench`: sessions are written.
"""

import argparse
import csv
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")
# One key for this process, which makes the sessions, and gunicorn's, which reads them.
os.environ["DJANGO_SECRET_KEY"] = secrets.token_urlsafe(50)
os.environ["DJANGO_DEBUG"] = "false"
PAGES = ["overview", "project page", "waste page", "model page"]
START_TIMEOUT = 180


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def people(users: int) -> list[dict]:
    """One logged-in session per Locust user, round the benchmark organisation's people, each
    with the projects and models that person sees. The sessions are made here, as a login makes
    them: fifty password hashes at once would measure the login, not the pages."""
    import django

    django.setup()
    from django.contrib.auth import (
        BACKEND_SESSION_KEY,
        HASH_SESSION_KEY,
        SESSION_KEY,
        get_user_model,
    )
    from django.contrib.sessions.backends.db import SessionStore

    from apps.deployments.models import Model
    from apps.projects.models import Project

    found = []
    for user in get_user_model().objects.filter(username__startswith="bench-").order_by("pk"):
        projects = Project.objects.all()
        if not user.is_staff:
            projects = projects.filter(team__memberships__user=user)
        slugs = list(projects.order_by("slug").values_list("slug", flat=True))
        models = list(
            Model.objects.filter(project__slug__in=slugs)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        if slugs and models:
            found.append((user, {"projects": slugs, "models": models}))
    if not found:
        sys.exit("No bench-* users: fill the database with bench/attribution_org.py first.")
    sessions = []
    for number in range(users):
        user, pages = found[number % len(found)]
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        sessions.append({"username": user.username, "session": session.session_key, **pages})
    return sessions


def serve(port: int, workers: int, out: Path) -> subprocess.Popen:
    """gunicorn as in production: debug off, static files collected and served by WhiteNoise."""
    log = out / "gunicorn.log"
    env = {
        **os.environ,
        "DJANGO_DEBUG": "false",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "DJANGO_STATIC_ROOT": str(out / "static"),
        "DATABASE_CONN_MAX_AGE": "600",
        "CELERY_TASK_ALWAYS_EAGER": "true",
    }
    if not (out / "static" / "staticfiles.json").exists():  # collected by an earlier run
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--no-input", "-v", "0"],
            cwd=ROOT,
            env=env,
            check=True,
        )
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "bench.load_site:application"]
        + ["--bind", f"127.0.0.1:{port}", "--workers", str(workers), "--timeout", "60"]
        # The app is imported once, before the workers fork (start-up is not what is measured).
        + ["--preload"]
        + ["--access-logfile", "-", "--error-logfile", "-"],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health/", timeout=5)
            return server
        except OSError:
            if server.poll() is not None:
                sys.exit(f"gunicorn exited with {server.returncode}; see {log}")
            time.sleep(0.5)
    server.kill()
    sys.exit(f"gunicorn did not answer within {START_TIMEOUT} s; see {log}")


def warm(port: int, who: list[dict]) -> tuple[int, float]:
    """Every page the users will browse requested once (each person's overview, waste page,
    projects and models), one after the other, as a working day's first visits leave the
    cache. Returns the pages requested and the seconds it took."""
    seen, pages, clock = set(), 0, time.perf_counter()
    for person in who:
        if person["username"] in seen:
            continue
        seen.add(person["username"])
        urls = ["/", "/waste/"]
        urls += [f"/projects/{slug}/" for slug in person["projects"]]
        urls += [f"/models/{pk}/" for pk in person["models"]]
        for url in urls:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}{url}",
                headers={"Cookie": f"sessionid={person['session']}"},
            )
            with urllib.request.urlopen(request, timeout=120) as answer:  # noqa: S310 (loopback)
                answer.read()
            pages += 1
    return pages, time.perf_counter() - clock


def locust(
    *, port: int, users: int, duration: int, think: str, prefix: Path, who: list[dict]
) -> dict:
    env = {**os.environ, "LOAD_PEOPLE": json.dumps(who), "LOAD_THINK": think}
    spawn_rate = max(1, users // 5)
    subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(ROOT / "bench" / "locustfile.py")]
        + ["--headless", "--host", f"http://127.0.0.1:{port}", "--only-summary"]
        + ["--users", str(users), "--spawn-rate", str(spawn_rate), "--run-time", f"{duration}s"]
        + ["--reset-stats", "--csv", str(prefix), "--loglevel", "WARNING"],
        cwd=ROOT,
        env=env,
        check=False,  # Locust exits 1 when a request failed: the figures say so
        timeout=duration + 120,
    )
    rows = {}
    with open(f"{prefix}_stats.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            rows[row["Name"]] = {
                "requests": int(row["Request Count"]),
                "failures": int(row["Failure Count"]),
                "rps": round(float(row["Requests/s"]), 2),
                "p50_ms": float(row["50%"]),
                "p95_ms": float(row["95%"]),
            }
    return rows


def report(title: str, rows: dict) -> list[str]:
    trivial = rows["trivial view"]["p95_ms"]
    lines = [
        f"{title}",
        "| request | requests | errors | req/s | p50 ms | p95 ms | p95 / trivial |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in ["trivial view", *PAGES, "Aggregated"]:
        row = rows.get(name)
        if row is None:
            continue
        ratio = row["p95_ms"] / trivial if trivial else float("inf")
        lines.append(
            f"| {name} | {row['requests']:,} | {row['failures']} | {row['rps']} "
            f"| {row['p50_ms']:.0f} | {row['p95_ms']:.0f} | {ratio:.1f}x |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--duration", type=int, default=60)
    parser.add_argument("--think", default="3,7", help='seconds "min,max" between requests')
    parser.add_argument("--closed-users", type=int, default=8)
    parser.add_argument("--closed-duration", type=int, default=30)
    parser.add_argument("--workers", type=int, default=4, help="gunicorn worker processes")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "load")
    parser.add_argument(
        "--warm",
        action="store_true",
        help="request every page once before the timed runs (the cache as a day leaves it)",
    )
    args = parser.parse_args()

    database = os.environ.get("DATABASE_URL", "")
    if database.rstrip("/").rsplit("/", 1)[-1] == "costsite_bench":
        sys.exit("Logins write sessions: run it on a copy (createdb -T costsite_bench ...).")
    args.out.mkdir(parents=True, exist_ok=True)
    who = people(max(args.users, args.closed_users))
    port = free_port()
    server = serve(port, args.workers, args.out)
    warmed = None
    try:
        if args.warm:
            warmed = warm(port, who)
            print(f"Warmed {warmed[0]} pages in {warmed[1]:.1f} s", flush=True)
        think = locust(
            port=port,
            users=args.users,
            duration=args.duration,
            think=args.think,
            prefix=args.out / "think",
            who=who,
        )
        closed = locust(
            port=port,
            users=args.closed_users,
            duration=args.closed_duration,
            think="0",
            prefix=args.out / "closed",
            who=who,
        )
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    lines = report(
        f"{args.users} users, think time {args.think} s, {args.duration} s, "
        f"gunicorn --workers {args.workers}"
        + (f", after {warmed[0]} pages requested once ({warmed[1]:.0f} s)" if warmed else "")
        + ":",
        think,
    )
    lines += [""] + report(
        f"Closed loop: {args.closed_users} users without think time, {args.closed_duration} s:",
        closed,
    )
    pages = [think[name] for name in PAGES if name in think]
    trivial = think["trivial view"]["p95_ms"]
    errors = sum(row["failures"] for row in think.values()) + sum(
        row["failures"] for row in closed.values()
    )
    worst = max(row["p95_ms"] for row in pages)
    verdict = {
        "warm": args.warm,
        "errors": errors,
        "worst_page_p95_ms": worst,
        "worst_ratio_to_trivial": round(worst / trivial, 2) if trivial else None,
        "goal_met": errors == 0 and worst < 300 and worst <= 10 * trivial,
    }
    lines += ["", json.dumps(verdict)]
    (args.out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
