"""Retake the README's screenshot from a running demo (`PORT=8000 bash scripts/demo` first):

    .venv/bin/python docs/screenshots/capture.py [http://127.0.0.1:8000]

Drives Debian's chromium through Playwright (no browser download) and logs in as a team lead.
"""

import shutil
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

BASE = sys.argv[1].rstrip("/") if len(sys.argv) > 1 else "http://127.0.0.1:8000"
OUT = Path(__file__).resolve().parent / "projects.png"

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
    page.goto(f"{BASE}/")
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(OUT))
    browser.close()
print(OUT)
