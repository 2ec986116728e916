"""Billing file formats: one module per format, each mapping its columns onto FOCUS's.

FOCUS is the internal shape. A format module knows how to recognise its header and how to turn a
batch of its rows (every column read as text) into FOCUS-named text columns; everything after that
(validation, attribution, load, rollups) is shared. To add a format (AWS CUR, GCP, Azure), write a
module with a `BillingFormat` subclass and add it to `FORMATS` below.
A CUR delivery (a manifest and its parts) is read part by part into one delivery.
"""

from .anthropic import AnthropicCostFormat, AnthropicUsageFormat
from .aws_cur import AwsCur2Format, AwsCurFormat, AwsCurParquetFormat
from .azure import AzureEaFormat, AzureMcaFormat
from .base import BillingFormat, ColumnMap
from .focus import FocusFormat
from .gcp import GcpFormat
from .litellm import LiteLlmSpendLogsFormat
from .openai import OpenAiCostsFormat, OpenAiUsageFormat
from .openrouter import OpenRouterActivityFormat, OpenRouterGenerationFormat

# Detection asks each in turn. FOCUS comes last: Azure's headers share three of its column names
# (BillingAccountId, BillingAccountName, BillingCurrency); the others look for their own.
FORMATS: dict[str, BillingFormat] = {
    fmt.name: fmt
    for fmt in (
        AwsCurFormat(),
        AwsCurParquetFormat(),
        AwsCur2Format(),
        GcpFormat(),
        AzureEaFormat(),
        AzureMcaFormat(),
        # Hosted model APIs (saved JSON pages; LiteLLM's spend logs as CSV too).
        OpenAiCostsFormat(),
        OpenAiUsageFormat(),
        AnthropicCostFormat(),
        AnthropicUsageFormat(),
        LiteLlmSpendLogsFormat(),
        OpenRouterGenerationFormat(),
        OpenRouterActivityFormat(),
        FocusFormat(),
    )
}


def format_names() -> list[str]:
    return ["auto", "focus", *(name for name in FORMATS if name != "focus")]


def format_detect(header: list[str]) -> BillingFormat | None:
    """The first format that recognises this header, or None."""
    for fmt in FORMATS.values():
        if fmt.detect(header):
            return fmt
    return None


__all__ = ["FORMATS", "BillingFormat", "ColumnMap", "format_detect", "format_names"]
