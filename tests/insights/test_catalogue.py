"""The price catalogue: the shipped files load, refused rows are named by file, row and column,
and a file-level fault changes nothing."""

import json
import shutil
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apps.insights.catalogue import DATA_DIR
from apps.insights.models import GpuInstancePrice, GpuTypeMemory, ModelApiPrice, StorageEgressPrice

pytestmark = pytest.mark.django_db


def test_the_shipped_catalogue_loads_and_leaves_out_spot_prices_above_on_demand():
    out = StringIO()
    call_command("prices_load", "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert result["loaded"] == {
        "gpuinstanceprice": 1497,
        "gputypememory": 16,
        "modelapiprice": ModelApiPrice.objects.count(),
        "storageegressprice": 38,
    }
    assert len(result["refused"]) == 15
    assert result["refused"][0] == (
        "gpu_instance_prices.csv, row 182, column spot_price_per_hour: spot 10.3379 is above "
        "on-demand 10.33786: spot price left out"
    )
    assert (
        GpuInstancePrice.objects.get(source="gpu_instance_prices.csv row 182").spot_per_hour is None
    )
    t4 = GpuInstancePrice.objects.get(
        provider="aws", instance_type="g4dn.12xlarge", region="af-south-1"
    )
    assert (t4.gpu_type, t4.gpu_count, t4.on_demand_per_hour, t4.spot_per_hour) == (
        "T4",
        Decimal("4"),
        Decimal("5.19"),
        Decimal("0.519"),
    )
    assert (t4.source, t4.as_of.isoformat()) == ("gpu_instance_prices.csv row 2", "2026-11-30")
    h200 = GpuTypeMemory.objects.get(gpu_type="H200")
    assert (h200.memory_gb, h200.source) == (
        Decimal("141"),
        "https://www.nvidia.com/en-us/data-center/h200/",
    )
    assert ModelApiPrice.objects.count() > 3000
    assert StorageEgressPrice.objects.filter(provider="aws", item="storage_standard").exists()


def test_bad_rows_are_refused_by_file_row_and_column(tmp_path):
    for name in DATA_DIR.iterdir():
        shutil.copy(name, tmp_path / name.name)
    (tmp_path / "gpu_instance_prices.csv").write_text(
        "cloud,instance_type,accelerator_name,accelerator_count,vcpus,memory_gib,region,"
        "price_per_hour,spot_price_per_hour\n"
        "aws,g5.xlarge,A10G,1,4,16,us-east-1,1.006,0.4\n"
        "aws,g5.xlarge,A10G,one,4,16,us-west-2,1.006,0.4\n"
        "aws,g5.xlarge,A10G,1,4,16,us-east-1,1.1,0.4\n"
        "aws,g5.xlarge,A10G,1,4,16,eu-west-1,,\n"
        "aws,g5.xlarge,,1,4,16,eu-west-2,-1,\n"
    )
    out = StringIO()
    call_command("prices_load", "--dir", str(tmp_path), stdout=out)
    refused = [text for text in out.getvalue().splitlines() if text.startswith("refused")]
    assert refused == [
        "refused: gpu_instance_prices.csv, row 3, column accelerator_count: 'one' is not a number",
        "refused: gpu_instance_prices.csv, row 4, column region: repeats row 2 (same instance, "
        "GPUs and region)",
        "refused: gpu_instance_prices.csv, row 5, column price_per_hour: neither an on-demand nor "
        "a spot price",
        "refused: gpu_instance_prices.csv, row 6, column accelerator_name: is empty",
        "refused: gpu_instance_prices.csv, row 6, column price_per_hour: '-1' must be at least 0",
    ]
    assert GpuInstancePrice.objects.count() == 1


def test_a_missing_column_changes_nothing(tmp_path):
    call_command("prices_load", stdout=StringIO())
    before = GpuInstancePrice.objects.count()
    for name in DATA_DIR.iterdir():
        shutil.copy(name, tmp_path / name.name)
    (tmp_path / "storage_egress_prices.csv").write_text("cloud,service\naws,s3\n")
    with pytest.raises(CommandError) as error:
        call_command("prices_load", "--dir", str(tmp_path), stdout=StringIO())
    assert str(error.value) == (
        "storage_egress_prices.csv: missing column(s) item, region, volume_tier, unit, price_usd, "
        "source_url, source_kind, notes"
    )
    assert GpuInstancePrice.objects.count() == before
