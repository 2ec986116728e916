"""What an import process carries: pyarrow's first look for pandas (30 MB, 0.4 s) finds none, and
pandas still works where asked for by name."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")
import django
django.setup()
import pyarrow as pa
import pyarrow.compute as pc
from apps.billing.importing import _arrow_without_pandas
print("pandas" in sys.modules)
_arrow_without_pandas()
pa.array([1, 2]), pa.scalar("x"), pc.fill_null(pa.array(["a", None]), "b")
print("pandas" in sys.modules)
import pandas as pd
print(pa.Table.from_pandas(pd.DataFrame({"a": [1, 2]})).num_rows)
"""


def test_an_import_leaves_pandas_unimported_and_pandas_still_works_when_asked_for():
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr
    # Not imported at start, not by pyarrow's conversions, and a DataFrame still converts.
    assert done.stdout.split() == ["False", "False", "2"]
