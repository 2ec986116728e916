"""Browser benchmark: time from navigation start to the first Plotly chart drawn, in Chromium
driven by Playwright, against the dashboard under gunicorn (DEBUG off, collected static files
served by WhiteNoise with its far-future cache headers) on a copy of the benchmark organisation.

    createdb -h 127.0.0.1 -U postgres -T costsite_bench cs_browser   # logins write sessions
    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/cs_browser python bench/browser_pages.py
    dropdb -h 127.0.0.1 -U postgres cs_browser

Debian's chromium (`apt-get install -y chromium`), headless. Logged in through the login form
as the organisation's staff user and as a team lead; for each of the overview, a project page,
the waste page, the GPU fleet page and the storage page, `--runs` (3) times:

- cold: a new browser context (empty HTTP cache) opens the page;
- warm: a new tab of the same context opens it again, twice (the second visit is the steady
  state: static files from the HTTP cache with no request at all, and V8's code cache, which
  Chromium writes on the second load of a script, used); both are recorded, the second reported;
- the same page with the chart scripts left out (Plotly and charts.js blocked through the
  DevTools protocol, which keeps the HTTP cache, unlike Playwright's request routing): its
  DOMContentLoaded, cold and warm, as above: the issue's limit (first chart <= 1.5x it);
- the trivial login-required view of bench/load_site.py ("ok"): its load event, cold and warm.

Per page, in ms from navigation start (the page's own clock, performance.now()): the first chart
drawn (charts.js marks a chart `data-drawn` right after Plotly has drawn it; recorded by a
MutationObserver and taken after the next frame), DOMContentLoaded, and the server's time to
the first byte; the bytes of JS and CSS transferred (Resource Timing's transferSize: 0 for a
file served from the cache), cold and warm. Medians and worst of the runs. The load average of
the machine before and after is reported (it is shared: the ratios are the figures that count).
Results go to `--out` (bench/out/browser/): report.md and results.json.
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

PASSWORD = "bench-password"  # bench/attribution_org.py's
CHART_SCRIPTS = ["*plotly-basic*.js", "*/costsite/charts*.js"]
# Installed before any script of the page: when the first chart is marked drawn, the time
# (performance.now(), from navigation start) and, after the next frame, the time it is painted.
TIMING_SCRIPT = """
(() => {
  window.__bench = {};
  const SELECTOR = "div.chart[data-drawn=true] .main-svg";
  const seen = () => {
    if (window.__bench.chart !== undefined || !document.querySelector(SELECTOR)) return false;
    window.__bench.chart = performance.now();
    const painted = () => { window.__bench.painted = performance.now(); };
    requestAnimationFrame(() => setTimeout(painted, 0));
    return true;
  };
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


def login(browser, base: str, username: str) -> dict:
    """The session of a login through the form, as Playwright storage state."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(base + "/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("form button[type=submit], form input[type=submit]")
    page.wait_for_load_state("load")
    if "/login/" in page.url:
        sys.exit(f"logging in as {username} failed")
    state = context.storage_state()
    context.close()
    return state


def visit(context, url: str, *, chart: bool, block: bool = False, timeout_s: float) -> dict:
    """One navigation in a new tab of `context`; the figures of MEASURE."""
    page = context.new_page()
    if block:
        cdp = context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.send("Network.setBlockedURLs", {"urls": CHART_SCRIPTS})
    page.add_init_script(TIMING_SCRIPT)
    response = page.goto(url, wait_until="load", timeout=timeout_s * 1000)
    if response is None or response.status != 200:
        sys.exit(f"{url} answered {response and response.status}")
    if chart:
        page.wait_for_function(
            "() => window.__bench.painted !== undefined", timeout=timeout_s * 1000
        )
    figures = page.evaluate(MEASURE)
    if block and figures["chart"] is not None:
        sys.exit(f"{url}: a chart was drawn with the chart scripts blocked")
    page.close()
    return figures


def measure(browser, state: dict, url: str, *, chart: bool, block: bool, timeout_s: float):
    """A cold visit (a new context) and two warm ones (new tabs of the same context)."""
    context = browser.new_context(storage_state=state, viewport={"width": 1440, "height": 900})
    try:
        return [
            visit(context, url, chart=chart, block=block, timeout_s=timeout_s) for _ in range(3)
        ]
    finally:
        context.close()


def _stats(values: list[float]) -> tuple[float, float]:
    return statistics.median(values), max(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--users", default="bench-staff,bench-lead-0")
    parser.add_argument("--pages", default="", help="comma-separated page names (default all)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per navigation")
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
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = serve(port, args.workers, args.out)
    results = {}
    started = time.monotonic()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium,
                headless=True,
                args=["--no-sandbox", "--disable-background-networking"],
            )
            for username in users:
                state = login(browser, base, username)
                results[username] = {}
                # Runs interleaved: each run measures every page, then the next run.
                for run in range(args.runs):
                    trivial = measure(
                        browser,
                        state,
                        base + "/bench/trivial/",
                        chart=False,
                        block=False,
                        timeout_s=args.timeout,
                    )
                    results[username].setdefault("trivial", []).append(trivial)
                    for name, path in plan[username].items():
                        with_charts = measure(
                            browser, state, base + path, chart=True, block=False,
                            timeout_s=args.timeout,
                        )  # fmt: skip
                        without = measure(
                            browser, state, base + path, chart=False, block=True,
                            timeout_s=args.timeout,
                        )  # fmt: skip
                        entry = results[username].setdefault(name, {"path": path, "runs": []})
                        entry["runs"].append({"charts": with_charts, "no_charts": without})
                        print(
                            f"{username} run {run + 1} {name}: first chart "
                            f"{with_charts[0]['painted']:.0f} cold / "
                            f"{with_charts[2]['painted']:.0f} warm ms",
                            flush=True,
                        )
            browser.close()
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except Exception:
            server.kill()
    load_after = os.getloadavg()
    lines = report(results, users, plan, args.runs)
    lines += [
        "",
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
        "| ÷ trivial page cold / warm | JS+CSS transferred cold / warm KiB |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    front = [
        "After the first byte (the browser's share: the page without the server's time):",
        "",
        "| user | page | first chart cold / warm ms | without charts, DOMContentLoaded "
        "cold / warm ms | ÷ without charts cold / warm |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for username in users:
        trivial = results[username]["trivial"]
        trivial_cold = [r[0]["load"] for r in trivial]
        trivial_warm = [r[2]["load"] for r in trivial]
        for name in plan[username]:
            entry = results[username][name]["runs"]
            visit = {"cold": 0, "warm": 2}
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
            cold, warm = col["cold"], col["warm"]
            row = [
                f"{ms(cold['ttfb'])} / {ms(warm['ttfb'])}",
                f"{ms(cold['chart'])} / {ms(warm['chart'])}",
                f"{ms(cold['bare'])} / {ms(warm['bare'])}",
                f"{ratio(cold['chart'], cold['bare'])} / {ratio(warm['chart'], warm['bare'])}",
                f"{ratio(cold['chart'], trivial_cold)} / {ratio(warm['chart'], trivial_warm)}",
                f"{statistics.median(cold['kib']):.0f} / {max(warm['kib']):.1f}",
            ]
            row_front = [
                f"{ms(cold['chart_front'])} / {ms(warm['chart_front'])}",
                f"{ms(cold['bare_front'])} / {ms(warm['bare_front'])}",
                f"{ratio(cold['chart_front'], cold['bare_front'])} / "
                f"{ratio(warm['chart_front'], warm['bare_front'])}",
            ]
            full.append(f"| {username} | {name} | " + " | ".join(row) + " |")
            front.append(f"| {username} | {name} | " + " | ".join(row_front) + " |")
        full.append(
            f"| {username} | trivial page, load event | | {ms(trivial_cold)} / {ms(trivial_warm)}"
            " | | | | |"
        )
    note = (
        f"Medians (worst) of {runs} runs. Warm: the third visit in the same browser context; "
        "JS+CSS warm is the worst run's."
    )
    return [*full, "", *front, "", note]


if __name__ == "__main__":
    main()
