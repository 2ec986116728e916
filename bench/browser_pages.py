"""Browser benchmark: time from navigation start to the first Plotly chart drawn, in Chromium
driven by Playwright, against the dashboard under gunicorn (DEBUG off, collected static files
served by WhiteNoise with its far-future cache headers), as staff and as a team lead.

    createdb -h 127.0.0.1 -U postgres -T costsite_bench cs_browser   # logins write sessions
    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/cs_browser python bench/browser_pages.py
    dropdb -h 127.0.0.1 -U postgres cs_browser

or on the demo organisation (`manage.py seed_demo` into a PostgreSQL database of its own), where
the server's time is small and the browser's share is what is left:

    ... python bench/browser_pages.py --users admin,vision-lead --password costsite-demo

Debian's chromium (`apt-get install -y chromium`), headless. Each user logs in through the login
form once; for each of the overview, a project page of theirs, the waste page, the GPU fleet
page and the storage page, `--runs` (3) times, interleaved:

- cold: a new browser context (empty HTTP cache) opens the page;
- warm: new tabs of the same context open it twice more; the third visit is reported (static
  files from the HTTP cache without a request, and V8's code cache, which Chromium writes on a
  script's second load, in use);
- same tab: a fourth tab opens it twice and the second is reported, as a user moving from page
  to page in one tab sees it (the tab's renderer has compiled and run Plotly before, where a new
  tab's reads it back from the code cache);
- the same page with the chart scripts left out (Plotly and charts.js blocked through the
  DevTools protocol, which keeps the HTTP cache, unlike Playwright's request routing): its
  DOMContentLoaded, cold and warm: the issue's limit (the first chart within 1.5x it);
- the trivial login-required view of bench/load_site.py ("ok"): its load event, cold and warm.

Per visit, in ms from navigation start (performance.now() of the page): the first chart drawn
(charts.js marks a chart `data-drawn` once Plotly has drawn it; a MutationObserver notes it, and
the figure is the start of the frame that paints it), DOMContentLoaded, the first byte, when the
Plotly bundle had run and each Plotly.react call (results.json); the JS and CSS transferred
(Resource Timing's transferSize: 0 for a file from the cache). Reported from navigation start and
after the first byte (the browser's share), medians and worst of the runs, each ratio taken
within a run. `--baseline-static DIR` serves another tree's collected static files from a second
gunicorn and measures both in the same runs (an A/B of the front end on a shared machine). The
load average before and after is reported. Results: `--out` (bench/out/browser/), report.md and
results.json.
"""

import argparse
import json
import os
import secrets
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")
os.environ["DJANGO_SECRET_KEY"] = secrets.token_urlsafe(50)
os.environ["DJANGO_DEBUG"] = "false"

from bench.load import free_port, serve  # noqa: E402

CHART_SCRIPTS = ["*vendor/plotly-*.js", "*/costsite/charts*.js"]
# Installed before any script of the page: when the first chart is marked drawn, the time
# (performance.now(), from navigation start) and the time the frame that paints it starts.
TIMING_SCRIPT = """
(() => {
  window.__bench = {};
  const SELECTOR = "div.chart[data-drawn=true] .main-svg";
  const seen = () => {
    if (window.__bench.chart !== undefined || !document.querySelector(SELECTOR)) return false;
    window.__bench.chart = performance.now();
    // The frame that paints it: its animation-frame callback's time (a timeout queued there
    // would run after whatever else the page queued, such as the next chart's draw).
    requestAnimationFrame(() => { window.__bench.painted = performance.now(); });
    return true;
  };
  // When the Plotly bundle has run (its last act is to set window.Plotly), and each draw.
  let plotly;
  Object.defineProperty(window, "Plotly", {
    configurable: true,
    get: () => plotly,
    set: (value) => {
      window.__bench.plotly = performance.now();
      const react = value.react;
      value.react = function () {
        const started = performance.now();
        const result = react.apply(this, arguments);
        (window.__bench.draws = window.__bench.draws || []).push([started, performance.now()]);
        return result;
      };
      plotly = value;
    },
  });
  new MutationObserver((_, observer) => { if (seen()) observer.disconnect(); })
    .observe(document, {subtree: true, childList: true, attributes: true,
                        attributeFilter: ["data-drawn"]});
})();
"""
MEASURE = """
() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const files = performance.getEntriesByType("resource")
    .filter(r => /\\.(js|css)(\\?|$)/.test(r.name));
  return {
    ttfb: nav.responseStart,
    server: nav.responseStart - nav.requestStart,
    response_end: nav.responseEnd,
    interactive: nav.domInteractive,
    dcl: nav.domContentLoadedEventStart,
    load: nav.loadEventStart,
    chart: window.__bench ? window.__bench.chart : undefined,
    plotly_ready: window.__bench ? window.__bench.plotly : undefined,
    draws: window.__bench ? window.__bench.draws : undefined,
    plotly_loaded: (performance.getEntriesByType("resource")
      .find(r => r.name.includes("vendor/plotly-")) || {}).responseEnd,
    painted: window.__bench ? window.__bench.painted : undefined,
    static_transferred: files.reduce((sum, r) => sum + r.transferSize, 0),
    static_files: files.length,
    static_from_cache: files.filter(r => r.transferSize === 0).length,
    static_body: files.reduce((sum, r) => sum + r.encodedBodySize, 0),
    document_transferred: nav.transferSize,
  };
}
"""


def pages_of(username: str) -> dict[str, str]:
    """The pages measured for one user: a project page of a project the user sees."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.urls import reverse

    from apps.projects.models import Project

    user = get_user_model().objects.get(username=username)
    projects = Project.objects.order_by("slug")
    if not user.is_staff:
        projects = projects.filter(team__memberships__user=user)
    project = projects.first()
    if project is None:
        sys.exit(f"{username} sees no project: fill the database with bench/attribution_org.py.")
    return {
        "overview": reverse("home"),
        "project page": reverse("project_detail", args=[project.slug]),
        "waste page": reverse("waste"),
        "GPU fleet": reverse("gpu_fleet"),
        "storage page": reverse("storage"),
    }


def login(browser, base: str, username: str, password: str) -> dict:
    """The session of a login through the form, as Playwright storage state."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(base + "/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("form button[type=submit], form input[type=submit]")
    page.wait_for_load_state("load")
    if "/login/" in page.url:
        sys.exit(f"logging in as {username} failed")
    state = context.storage_state()
    context.close()
    return state


def visit(
    context, url: str, *, chart: bool, block: bool = False, timeout_s: float, again: bool = False
) -> dict:
    """One navigation in a new tab of `context`; the figures of MEASURE. With `again`, the tab
    opens the page once first and the second navigation is measured: a user going from page to
    page in one tab, whose renderer has run the page's scripts before."""
    page = context.new_page()
    if block:
        cdp = context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.send("Network.setBlockedURLs", {"urls": CHART_SCRIPTS})
    page.add_init_script(TIMING_SCRIPT)
    for _ in range(2 if again else 1):
        response = page.goto(url, wait_until="load", timeout=timeout_s * 1000)
        if response is None or response.status != 200:
            sys.exit(f"{url} answered {response and response.status}")
        if chart:  # polled from here: the strict CSP forbids the eval of wait_for_function
            deadline = time.monotonic() + timeout_s
            while page.evaluate("() => window.__bench.painted") is None:
                if time.monotonic() > deadline:
                    sys.exit(f"{url}: no chart drawn within {timeout_s} s")
                time.sleep(0.05)
    figures = page.evaluate(MEASURE)
    if block and figures["chart"] is not None:
        sys.exit(f"{url}: a chart was drawn with the chart scripts blocked")
    page.close()
    return figures


def measure(browser, state: dict, url: str, *, chart: bool, block: bool, timeout_s: float):
    """A cold visit (a new context), two warm ones (new tabs of the same context), and one in
    the same tab (a fourth tab, which opens the page twice: the second is measured)."""
    context = browser.new_context(storage_state=state, viewport={"width": 1440, "height": 900})
    try:
        visits = [
            visit(context, url, chart=chart, block=block, timeout_s=timeout_s) for _ in range(3)
        ]
        return [
            *visits,
            visit(context, url, chart=chart, block=block, timeout_s=timeout_s, again=True),
        ]
    finally:
        context.close()


def _stats(values: list[float]) -> tuple[float, float]:
    return statistics.median(values), max(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--users", default="bench-staff,bench-lead-0")
    parser.add_argument(
        "--password", default="bench-password", help="the users' (bench/attribution_org.py's)"
    )
    parser.add_argument("--pages", default="", help="comma-separated page names (default all)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per navigation")
    parser.add_argument(
        "--baseline-static",
        type=Path,
        help="collected static files (with their staticfiles.json) of another tree, served by a "
        "second gunicorn and measured in the same runs (an A/B of the front end); this tree's "
        "templates name the files, so a variant of a file must be there under the same name",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "browser")
    args = parser.parse_args()

    database = os.environ.get("DATABASE_URL", "")
    if database.rstrip("/").rsplit("/", 1)[-1] == "costsite_bench":
        sys.exit("Logins write sessions: run it on a copy (createdb -T costsite_bench ...).")
    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("Debian's chromium is not installed: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    users = args.users.split(",")
    wanted = [name for name in args.pages.split(",") if name]
    plan = {}
    for username in users:
        pages = pages_of(username)
        plan[username] = {n: u for n, u in pages.items() if not wanted or n in wanted}
    load_before = os.getloadavg()
    # The variants served side by side, each by its own gunicorn (the same code and database;
    # only the collected static files differ), measured in turn within each run.
    variants = {"this tree": args.out}
    if args.baseline_static is not None:
        baseline = args.out / "baseline"
        baseline.mkdir(exist_ok=True)
        if not (baseline / "static").exists():
            (baseline / "static").symlink_to(args.baseline_static.resolve())
        variants["baseline"] = baseline
    servers, bases = [], {}
    results = {variant: {} for variant in variants}
    started = time.monotonic()
    try:
        for variant, out in variants.items():
            port = free_port()
            servers.append(serve(port, args.workers, out))
            bases[variant] = f"http://127.0.0.1:{port}"
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium,
                headless=True,
                args=["--no-sandbox", "--disable-background-networking"],
            )
            for username in users:
                # One login: the session cookie is the host's (127.0.0.1), whatever the port.
                state = login(browser, bases["this tree"], username, args.password)
                # Runs interleaved: each run measures every page of every variant in turn.
                for run in range(args.runs):
                    for variant, base in bases.items():
                        mine = results[variant].setdefault(username, {})
                        trivial = measure(
                            browser, state, base + "/bench/trivial/", chart=False, block=False,
                            timeout_s=args.timeout,
                        )  # fmt: skip
                        mine.setdefault("trivial", []).append(trivial)
                        for name, path in plan[username].items():
                            with_charts = measure(
                                browser, state, base + path, chart=True, block=False,
                                timeout_s=args.timeout,
                            )  # fmt: skip
                            without = measure(
                                browser, state, base + path, chart=False, block=True,
                                timeout_s=args.timeout,
                            )  # fmt: skip
                            entry = mine.setdefault(name, {"path": path, "runs": []})
                            entry["runs"].append({"charts": with_charts, "no_charts": without})
                            print(
                                f"{variant}: {username} run {run + 1} {name}: first chart "
                                f"{with_charts[0]['painted']:.0f} cold / "
                                f"{with_charts[2]['painted']:.0f} warm ms",
                                flush=True,
                            )
            browser.close()
    finally:
        for server in servers:
            server.terminate()
            try:
                server.wait(timeout=30)
            except Exception:
                server.kill()
    load_after = os.getloadavg()
    lines = []
    for variant in variants:
        if len(variants) > 1:
            lines += [f"## {variant}", ""]
        lines += report(results[variant], users, plan, args.runs) + [""]
    lines += [
        f"Load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
        f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} "
        f"(2 cores, shared); {time.monotonic() - started:.0f} s; gunicorn --workers "
        f"{args.workers}; {args.runs} runs.",
    ]
    (args.out / "results.json").write_text(
        json.dumps({"load_before": load_before, "load_after": load_after, "results": results})
    )
    (args.out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def report(results: dict, users: list[str], plan: dict, runs: int) -> list[str]:
    """Two tables, medians (worst) over the runs; cold = first visit, warm = third visit; each
    ratio is taken within a run (same load), then its median and worst."""

    def ms(values):
        median, worst = _stats(values)
        return f"{median:.0f} ({worst:.0f})"

    def ratio(times, limits):
        median, worst = _stats([t / b for t, b in zip(times, limits, strict=True)])
        return f"{median:.2f} ({worst:.2f})"

    full = [
        "From navigation start (what the user waits for; the server's time included):",
        "",
        "| user | page | server, first byte cold / warm ms | first chart cold / warm ms "
        "| without charts, DOMContentLoaded cold / warm ms | ÷ without charts cold / warm "
        "| ÷ trivial page cold / warm | JS+CSS transferred cold / warm KiB "
        "| same tab: first chart / without charts ms | same tab: ÷ without charts |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    front = [
        "After the first byte (the browser's share: the page without the server's time):",
        "",
        "| user | page | first chart cold / warm ms | without charts, DOMContentLoaded "
        "cold / warm ms | ÷ without charts cold / warm | same tab: first chart / without "
        "charts ms |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for username in users:
        trivial = results[username]["trivial"]
        trivial_cold = [r[0]["load"] for r in trivial]
        trivial_warm = [r[2]["load"] for r in trivial]
        for name in plan[username]:
            entry = results[username][name]["runs"]
            visit = {"cold": 0, "warm": 2, "tab": 3}
            col = {}
            for kind, index in visit.items():
                charts = [r["charts"][index] for r in entry]
                bare = [r["no_charts"][index] for r in entry]
                col[kind] = {
                    "ttfb": [c["ttfb"] for c in charts],
                    "chart": [c["painted"] for c in charts],
                    "bare": [b["dcl"] for b in bare],
                    "chart_front": [c["painted"] - c["ttfb"] for c in charts],
                    "bare_front": [b["dcl"] - b["ttfb"] for b in bare],
                    "kib": [c["static_transferred"] / 1024 for c in charts],
                }
            cold, warm, tab = col["cold"], col["warm"], col["tab"]
            row = [
                f"{ms(cold['ttfb'])} / {ms(warm['ttfb'])}",
                f"{ms(cold['chart'])} / {ms(warm['chart'])}",
                f"{ms(cold['bare'])} / {ms(warm['bare'])}",
                f"{ratio(cold['chart'], cold['bare'])} / {ratio(warm['chart'], warm['bare'])}",
                f"{ratio(cold['chart'], trivial_cold)} / {ratio(warm['chart'], trivial_warm)}",
                f"{statistics.median(cold['kib']):.0f} / {max(warm['kib']):.1f}",
                f"{ms(tab['chart'])} / {ms(tab['bare'])}",
                ratio(tab["chart"], tab["bare"]),
            ]
            row_front = [
                f"{ms(cold['chart_front'])} / {ms(warm['chart_front'])}",
                f"{ms(cold['bare_front'])} / {ms(warm['bare_front'])}",
                f"{ratio(cold['chart_front'], cold['bare_front'])} / "
                f"{ratio(warm['chart_front'], warm['bare_front'])}",
                f"{ms(tab['chart_front'])} / {ms(tab['bare_front'])}",
            ]
            full.append(f"| {username} | {name} | " + " | ".join(row) + " |")
            front.append(f"| {username} | {name} | " + " | ".join(row_front) + " |")
        full.append(
            f"| {username} | trivial page, load event | | {ms(trivial_cold)} / {ms(trivial_warm)}"
            " | | | | | | |"
        )
    note = (
        f"Medians (worst) of {runs} runs. Warm: the third visit in the same browser context, "
        "each in a new tab; same tab: a tab's second visit, after the three; JS+CSS warm is the "
        "worst run's."
    )
    return [*full, "", *front, "", note]


if __name__ == "__main__":
    main()
