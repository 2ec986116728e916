"""Retake the README's screenshots of the spend pages from a running demo whose bill is loaded:

    .venv/bin/python docs/screenshots/capture_spend.py [http://127.0.0.1:8000] [project-slug]

Writes overview.png (the home page, last 90 days, as staff) and project-spend.png (a project's
spend section, as its team's lead would see it). Drives Debian's chromium through Playwright (no
browser download).
"""

import shutil
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

BASE = sys.argv[1].rstrip("/") if len(sys.argv) > 1 else "http://127.0.0.1:8000"
PROJECT = sys.argv[2] if len(sys.argv) > 2 else "llm-pretraining"
HERE = Path(__file__).resolve().parent

with sync_playwright() as p:
    browser = p.chromium.launch(
        executable_path=shutil.which("chromium"),
        args=["--no-sandbox", "--disable-background-networking"],
    )
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{BASE}/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", "costsite-demo")
    page.click("[type=submit]")
    page.wait_for_load_state("networkidle")
    page.goto(f"{BASE}/?preset=90d")
    page.wait_for_selector("div.chart[data-drawn=true] .main-svg")
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(HERE / "overview.png"), full_page=True)
    page.goto(f"{BASE}/projects/{PROJECT}/?preset=90d")
    page.wait_for_selector("#spend div.chart[data-drawn=true] .main-svg")
    page.wait_for_load_state("networkidle")
    page.locator("section.spend-section").screenshot(path=str(HERE / "project-spend.png"))
    browser.close()
print(HERE / "overview.png", HERE / "project-spend.png")
