"""Benchmark: what a Plotly bundle costs on its own in Chromium, warm: the script loaded and run,
then a stacked bar chart drawn and painted. Compares bundles in the same run.

    python bench/plotly_bundle.py static/vendor/plotly-basic-3.7.0.min.js OTHER.js ...

Each bundle is served with a bare page from a temporary folder on loopback. The page inserts the
bundle as a script, then draws 10 bar traces of 90 days stacked, as the overview's daily chart
does. Each bundle gets `--contexts` new browser contexts, alternating with the others, and the
third load of each context is kept: the HTTP cache and V8's code cache are warm, as on a
returning user's visit. Reported: medians of the script's load and run, the chart's draw (its
`Plotly.newPlot` promise), and the frame after it (painted).

Other bundles can be built from the npm package with esbuild, for example core and bar only:

    npm install plotly.js@3.7.0 esbuild
    cat > entry.js <<'JS'
    var Plotly = require("plotly.js/lib/core");
    Plotly.register([require("plotly.js/lib/bar")]);
    module.exports = Plotly;
    JS
    npx esbuild entry.js --bundle --minify --format=iife --global-name=Plotly \\
        --define:global=window --define:define.amd=false --target=es2016 --outfile=core-bar.js
"""

import argparse
import functools
import http.server
import json
import shutil
import statistics
import tempfile
import threading
from pathlib import Path

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>bundle</title></head><body>
<div id="chart" style="width:900px;height:400px"></div>
<script>
var started = performance.now();
var script = document.createElement("script");
script.src = new URLSearchParams(location.search).get("bundle");
script.onload = function () {
  var loaded = performance.now();
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
      requestAnimationFrame(function () {
        setTimeout(function () {
          window.result = {load_ms: loaded - started, draw_ms: drawn - loaded,
                           painted_ms: performance.now() - loaded};
        }, 0);
      });
    });
};
document.head.appendChild(script);
</script></body></html>"""


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundles", nargs="+", type=Path)
    parser.add_argument("--contexts", type=int, default=8)
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "page.html").write_text(PAGE)
        names, sizes = [], {}
        for index, bundle in enumerate(args.bundles):
            name = f"{index}-{bundle.name}"
            shutil.copyfile(bundle, root / name)
            names.append(name)
            sizes[name] = bundle.stat().st_size
        server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(Quiet, directory=folder)
        )
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}/page.html"
        results: dict[str, list[dict]] = {name: [] for name in names}
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=shutil.which("chromium"),
                headless=True,
                args=["--no-sandbox", "--disable-background-networking"],
            )
            for attempt in range(args.contexts):
                for name in names:
                    context = browser.new_context()
                    page = context.new_page()
                    errors: list[str] = []
                    page.on("pageerror", lambda error, errors=errors: errors.append(str(error)))
                    for _ in range(3):
                        page.goto(f"{base}?bundle={name}&visit={attempt}")
                        try:
                            page.wait_for_function("window.result", timeout=15_000)
                        except Exception:
                            raise SystemExit(f"{name}: no chart drawn: {errors}") from None
                    results[name].append(page.evaluate("window.result"))
                    context.close()
            browser.close()
        server.shutdown()
    summary = {
        name: {
            "bytes": sizes[name],
            **{key: round(statistics.median(r[key] for r in runs), 1) for key in runs[0]},
        }
        for name, runs in results.items()
    }
    for name, figures in summary.items():
        print(name, json.dumps(figures))


if __name__ == "__main__":
    main()
