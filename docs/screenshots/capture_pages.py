"""Retake the screenshots of every kind of page from a running demo (`bash scripts/demo`):

    .venv/bin/python docs/screenshots/capture_pages.py [http://127.0.0.1:8000]

As staff, at 1440 pixels wide (a desktop) and 390 (a phone), it opens the overview, a project, a
model, an experiment, a deployment, the unattributed page, the GPU fleet and one GPU, waits for
every chart to be drawn and writes `<page>-1440.png` and `<page>-390.png` beside this script.
It fails if a page logs a console error (a CSP violation counts) or a chart is not drawn. The
pages are found by following the demo's own links, so the script needs no ids. Each screenshot is
saved as a 256-colour palette PNG (Pillow), a fraction of the size of the browser's own and alike
to the eye; `--shrink FILE...` does only that to files already taken.
"""

import shutil
import sys
from pathlib import Path

from PIL import Image

BASE = sys.argv[1].rstrip("/") if len(sys.argv) > 1 else "http://127.0.0.1:8000"
HERE = Path(__file__).resolve().parent
WIDTHS = (1440, 390)


def first_link(page, url: str, selector: str) -> str:
    page.goto(url)
    return page.locator(selector).first.get_attribute("href")


def _links(page, prefix: str) -> list[str]:
    return page.eval_on_selector_all(
        f"a[href^='{prefix}']", "links => links.map(a => a.getAttribute('href'))"
    )


def pages(page) -> dict[str, str]:
    """The overview, then the first project (in the list's order) that has a model, an experiment
    and a deployment, and those; the unattributed page; the fleet and its first GPU."""
    page.goto(f"{BASE}/projects/")
    projects = [h for h in _links(page, "/projects/") if h.count("/") == 3 and "?" not in h]
    found = {"overview": "/?preset=90d"}
    for project in projects:
        page.goto(BASE + project)
        kinds = {kind: _links(page, f"/{kind}s/") for kind in ("experiment", "model", "deployment")}
        details = {
            kind: [h for h in links if h.rstrip("/").split("/")[-1].isdigit()]
            for kind, links in kinds.items()
        }
        if all(details.values()):
            found["project"] = f"{project}?preset=90d"
            found.update({kind: links[0] for kind, links in details.items()})
            break
    found["unattributed"] = "/unattributed/?preset=90d"
    found["gpus"] = "/gpus/"
    page.goto(f"{BASE}/gpus/")
    found["gpu"] = next(h for h in _links(page, "/gpus/") if h.strip("/").split("/")[-1].isdigit())
    return found


def shrink(path: Path) -> None:
    """The screenshot as a palette PNG: a page is flat colours and text, 256 colours hold it."""
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def capture() -> list[Path]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        return _capture(p)


def _capture(p) -> list[Path]:
    browser = p.chromium.launch(
        executable_path=shutil.which("chromium"),
        args=["--no-sandbox", "--disable-background-networking"],
    )
    written = []
    for width in WIDTHS:
        page = browser.new_page(viewport={"width": width, "height": 900})
        problems: list[str] = []
        page.on("console", lambda msg, seen=problems: msg.type == "error" and seen.append(msg.text))
        page.on("pageerror", lambda error, seen=problems: seen.append(str(error)))
        page.goto(f"{BASE}/login/")
        page.fill("input[name=username]", "admin")
        page.fill("input[name=password]", "costsite-demo")
        page.click("[type=submit]")
        page.wait_for_load_state("networkidle")
        for name, path in pages(page).items():
            page.goto(BASE + path)
            page.wait_for_load_state("networkidle")
            charts = page.locator("div.chart[data-figure]")
            for index in range(charts.count()):
                chart = charts.nth(index)
                if chart.is_visible():
                    page.wait_for_selector(
                        f"div.chart[data-figure='{chart.get_attribute('data-figure')}'][data-drawn=true]"
                    )
            target = HERE / f"{name}-{width}.png"
            page.screenshot(path=str(target), full_page=True)
            shrink(target)
            written.append(target)
            if problems:
                raise SystemExit(f"{name} at {width}px: {problems}")
        page.close()
    browser.close()
    return written


if __name__ == "__main__":
    if sys.argv[1:2] == ["--shrink"]:
        for name in sys.argv[2:]:
            shrink(Path(name))
    else:
        print("\n".join(str(path) for path in capture()))
