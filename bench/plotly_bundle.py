"""Benchmark: what a Plotly bundle costs on its own in Chromium, warm: the bundle run, then a
stacked bar chart drawn. Compares bundles in the same run.

    python bench/plotly_bundle.py static/vendor/plotly-costsite-3.7.0.min.js OTHER.js ...

Each bundle is served from a temporary folder on loopback, with a bare page that loads it as
costsite's pages do: a deferred script in the head, then a second deferred script that draws,
at DOMContentLoaded, 10 bar traces of 90 days stacked (as the overview's daily chart). Scripts
are served with far-future cache headers. For each bundle, `--contexts` new browser contexts,
alternating with the others, each opening the page three times, and the third is kept (the HTTP
cache and V8's code cache warm, as on a returning user's visit), two ways:

- new tab: each visit in a new tab of the context (a new renderer, which reads the compiled
  bundle back from the code cache);
- same tab: the three visits in one tab (its renderer has compiled and run the bundle before).

Reported, medians in ms from navigation start: the bundle run (the second script starts),
and the chart drawn (its `Plotly.newPlot` promise settled), and the draw alone.

Other bundles can be built from the npm package with esbuild (static/vendor/README.md has the
command of costsite's); for example Plotly's *basic* bundle is `npm pack
plotly.js-basic-dist-min@3.7.0`.
"""

import argparse
import functools
import http.server
import shutil
import statistics
import tempfile
import threading
from pathlib import Path

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>bundle</title>
<script src="BUNDLE" defer></script><script src="draw.js" defer></script></head><body>
<div id="chart" style="width:900px;height:400px"></div></body></html>"""

DRAW = """window.bundleRun = performance.now();
document.addEventListener("DOMContentLoaded", function () {
  var started = performance.now();
  var data = [];
  for (var trace = 0; trace < 10; trace++) {
    var x = [], y = [];
    for (var day = 0; day < 90; day++) {
      x.push(new Date(Date.UTC(2026, 8, 1 + day)).toISOString().slice(0, 10));
      y.push(10 + ((trace * 37 + day * 11) % 90));
    }
    data.push({type: "bar", name: "project " + trace, x: x, y: y});
  }
  Plotly.newPlot("chart", data, {barmode: "stack"}, {responsive: true, displaylogo: false})
    .then(function () {
      var drawn = performance.now();
      window.result = {bundle_run_ms: window.bundleRun, chart_ms: drawn,
                       draw_ms: drawn - started};
    });
});"""


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def end_headers(self) -> None:
        if self.path.split("?")[0].endswith(".js"):
            self.send_header("Cache-Control", "max-age=315360000, public, immutable")
        super().end_headers()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundles", nargs="+", type=Path)
    parser.add_argument("--contexts", type=int, default=8)
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "draw.js").write_text(DRAW)
        names, sizes = [], {}
        for index, bundle in enumerate(args.bundles):
            name = f"{index}-{bundle.name}"
            shutil.copyfile(bundle, root / name)
            (root / f"{name}.html").write_text(PAGE.replace("BUNDLE", name))
            names.append(name)
            sizes[name] = bundle.stat().st_size
        server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(Quiet, directory=folder)
        )
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}"
        results = {(name, way): [] for name in names for way in ("new tab", "same tab")}
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=shutil.which("chromium"),
                headless=True,
                args=["--no-sandbox", "--disable-background-networking"],
            )
            for attempt in range(args.contexts):
                for name in names:
                    for way in ("new tab", "same tab"):
                        context = browser.new_context()
                        page = None
                        for visit in range(3):
                            if page is None or way == "new tab":
                                page = context.new_page()
                            page.goto(f"{base}/{name}.html?visit={attempt}.{visit}")
                            try:
                                page.wait_for_function("window.result", timeout=15_000)
                            except Exception:
                                raise SystemExit(f"{name}: no chart drawn") from None
                        results[(name, way)].append(page.evaluate("window.result"))
                        context.close()
            browser.close()
        server.shutdown()
    print("| bundle | bytes | way | bundle run | chart drawn | of it, the draw |")
    print("| --- | ---: | --- | ---: | ---: | ---: |")
    for (name, way), runs in results.items():
        figures = [statistics.median(run[key] for run in runs) for key in runs[0]]
        cells = " | ".join(f"{value:.1f}" for value in figures)
        print(f"| {name} | {sizes[name]:,} | {way} | {cells} |")


if __name__ == "__main__":
    main()
