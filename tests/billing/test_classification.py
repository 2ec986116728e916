"""Which instances carry GPUs, and where an instance type hides in a usage type."""

import pytest

from apps.billing.normalise import instance_from_usage_type, instance_is_gpu


@pytest.mark.parametrize(
    ("instance", "gpu"),
    [
        ("p4d.24xlarge", True),
        ("p5.48xlarge", True),
        ("g4dn.xlarge", True),
        ("g6e.12xlarge", True),
        ("trn1.32xlarge", True),
        ("inf2.xlarge", True),
        ("ml.p3.2xlarge", True),  # SageMaker
        ("a2-highgpu-1g", True),  # GCP
        ("a3-highgpu-8g", True),
        ("g2-standard-4", True),
        ("Standard_NC24ads_A100_v4", True),  # Azure
        ("Standard_ND96asr_v4", True),
        ("m6i.xlarge", False),
        ("c6i.4xlarge", False),
        ("ml.t3.medium", False),
        ("n2-standard-8", False),
        ("Standard_D4s_v5", False),
        ("gp3", False),
    ],
)
def test_an_instance_type_is_known_to_carry_gpus_or_not(instance, gpu):
    assert instance_is_gpu(instance) is gpu


@pytest.mark.parametrize(
    ("usage_type", "instance"),
    [
        ("BoxUsage:p4d.24xlarge", "p4d.24xlarge"),
        ("USE2-SpotUsage:g5.xlarge", "g5.xlarge"),
        ("Notebk:ml.t3.medium", "ml.t3.medium"),
        ("EBS:VolumeUsage.gp3", None),
        ("DataTransfer-Out-Bytes", None),
        ("TimedStorage-ByteHrs", None),
    ],
)
def test_the_instance_type_is_read_out_of_an_aws_usage_type(usage_type, instance):
    assert instance_from_usage_type(usage_type) == instance
