"""The WSGI module gunicorn serves leaves the garbage collector only what requests make: every
view imported and everything of start-up frozen (costsite.wsgi), so that a full collection
does not walk the modules during a request."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import gc, json, sys
import costsite.wsgi
print(json.dumps({
    "views": sorted(m for m in ("apps.spend.views", "apps.gpu.views", "apps.insights.views")
                    if m in sys.modules),
    "frozen": gc.get_freeze_count(),
    "tracked": len(gc.get_objects()),
    "callable": callable(costsite.wsgi.application),
}))
"""


def test_the_wsgi_module_imports_every_view_and_freezes_what_start_up_made():
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120
    )

    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert probe["views"] == ["apps.gpu.views", "apps.insights.views", "apps.spend.views"]
    assert probe["callable"] is True
    # Start-up makes about 190,000 objects; what is left to collect is what the probe made since.
    assert probe["frozen"] > 100_000
    assert probe["tracked"] < probe["frozen"] / 20
