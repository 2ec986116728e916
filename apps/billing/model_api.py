"""Model API spend on a line: provider, model, token direction, tokens and requests.

Two ways in:
- the hosted-API formats (OpenAI, Anthropic, LiteLLM, OpenRouter) say it themselves: their
  `to_focus` hands the model, direction, tokens and requests over under the `API_*` names below,
  and every line of theirs is model API spend;
- the clouds' model services sit inside the bills already imported (Bedrock in CUR, Azure OpenAI
  meters, Vertex AI SKUs): the model and the direction are parsed from the usage type, meter name
  or SKU description, once per distinct value. A line of such a service that cannot be parsed is
  still model API spend, with the model `unknown` and the direction `other`.

Tokens of a cloud line come from its consumed quantity and unit: `1K tokens` and `1M tokens`
multiply, a unit that counts tokens (or none, or Azure's `Units` once its pack size is taken out
of Quantity) is taken as it is, anything else (hours of cache storage, model units) leaves the
tokens empty.
"""

import re
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

from .models import CostKind, TokenDirection

DEC = pa.decimal128(38, 15)
UNKNOWN = "unknown"
# The names a hosted-API format's `to_focus` hands its model API columns over under.
API_MODEL = "_api_model"
API_DIRECTION = "_api_token_direction"
API_TOKENS = "_api_tokens"
API_REQUESTS = "_api_requests"
API_NAMES = (API_MODEL, API_DIRECTION, API_TOKENS, API_REQUESTS)

INPUT = TokenDirection.INPUT.value
CACHED = TokenDirection.CACHED_INPUT.value
WRITE = TokenDirection.CACHE_WRITE.value
OUTPUT = TokenDirection.OUTPUT.value
OTHER = TokenDirection.OTHER.value

# -- Bedrock (CUR usage types) -------------------------------------------------------------------

REGION_PREFIX = re.compile(r"^[A-Z]{2,4}\d?-")
BEDROCK_TOKENS = re.compile(
    r"^(?P<model>.+?)-(?:mantle-)?(?P<direction>input-tokens|output-tokens|"
    r"cache-read-input-token-count|cache-write-input-token-count)(?:-.*)?$",
    re.IGNORECASE,
)
BEDROCK_DIRECTIONS = {
    "input-tokens": INPUT,
    "output-tokens": OUTPUT,
    "cache-read-input-token-count": CACHED,
    "cache-write-input-token-count": WRITE,
}
BEDROCK_EDITION = re.compile(r"\s*\((amazon )?bedrock edition\)\s*$", re.IGNORECASE)


def _squashed(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def bedrock_parse(usage_type: str, product_name: str) -> tuple[str, str]:
    """(model, direction) of a Bedrock line, from its usage type and product name.

    `USE1-Claude4.6Sonnet-input-tokens` names the model itself; the Marketplace-style
    `USE1-MP:USE1_InputTokenCount-Units` (and `…_input_tokens_standard-Units`) does not, and the
    model is the product's name without "(Amazon Bedrock Edition)".
    """
    usage = (usage_type or "").strip()
    bare = REGION_PREFIX.sub("", usage)
    matched = BEDROCK_TOKENS.match(bare)
    if matched and ":" not in bare:
        return matched["model"], BEDROCK_DIRECTIONS[matched["direction"].lower()]
    squashed = _squashed(bare)
    direction = OTHER
    for marker, found in (
        ("cacheread", CACHED),
        ("cachewrite", WRITE),
        ("inputtoken", INPUT),
        ("outputtoken", OUTPUT),
    ):
        if marker in squashed:
            direction = found
            break
    product = BEDROCK_EDITION.sub("", product_name or "").strip()
    if not product or _squashed(product) in {"amazonbedrock", "bedrock"}:
        product = UNKNOWN
    return product, direction


# -- Azure OpenAI (meter names) -----------------------------------------------------------------

AZURE_INPUT = {"inp", "input", "inpt"}
AZURE_OUTPUT = {"outp", "output", "outpt"}
AZURE_SKIP = {"cached", "batch", "tokens", "token"}


def azure_parse(meter: str) -> tuple[str, str]:
    """(model, direction) from an Azure OpenAI meter: `gpt-4o-mini-0718-Inp-glbl Tokens`,
    `gpt 4.5 0227 cached Inp glbl`, `GPT 5 Inpt Glbl`, `gpt-4-8K-Batch-Inp-glbl`."""
    words = [word for word in re.split(r"[\s\-_]+", (meter or "").strip()) if word]
    lowered = [word.lower() for word in words]
    for position, word in enumerate(lowered):
        if word in AZURE_INPUT or word in AZURE_OUTPUT:
            if word in AZURE_OUTPUT:
                direction = OUTPUT
            elif "cached" in lowered[:position]:
                direction = CACHED
            else:
                direction = INPUT
            model = "-".join(w for w in lowered[:position] if w not in AZURE_SKIP)
            return model or UNKNOWN, direction
    return UNKNOWN, OTHER


# -- Vertex AI (SKU descriptions) ---------------------------------------------------------------

VERTEX_STOP = {
    "ga",
    "global",
    "text",
    "input",
    "output",
    "thinking",
    "image",
    "audio",
    "video",
    "batch",
    "priority",
    "predictions",
    "caching",
    "long",
    "short",
    "context",
    "tokens",
    "characters",
}
VERTEX_TOKEN_SKU = re.compile(r"\b(input|output|caching|tokens?)\b", re.IGNORECASE)


def vertex_parse(sku: str) -> tuple[str, str]:
    """(model, direction) from a Vertex AI SKU: `Gemini 2.5 Flash GA Text Input - Predictions`,
    `… Thinking Text Output - Predictions`, `… Input Text Caching` (a cached read), `… Text
    Input Caching Storage` (storage hours: other)."""
    text = re.sub(r"\s*-\s*predictions\s*$", "", (sku or "").strip(), flags=re.IGNORECASE)
    lowered = text.lower()
    if "caching storage" in lowered:
        direction = OTHER
    elif "caching" in lowered:
        direction = CACHED
    elif re.search(r"\binput\b", lowered):
        direction = INPUT
    elif re.search(r"\boutput\b", lowered):
        direction = OUTPUT
    else:
        direction = OTHER
    model = []
    for word in text.split():
        if word.lower() in VERTEX_STOP:
            break
        model.append(word.lower())
    return ("-".join(model) or UNKNOWN), direction


# -- which lines -----------------------------------------------------------------------------


def cloud_parse(service: str, usage_type: str, description: str, sub_category: str):
    """(model, direction) of a cloud bill's model-service line, or None for any other line."""
    lowered = (service or "").lower()
    if "bedrock" in lowered or BEDROCK_TOKENS.match(REGION_PREFIX.sub("", usage_type or "")):
        return bedrock_parse(usage_type, service)
    if lowered in {"foundry models", "azure openai"} or (
        lowered == "cognitive services" and "openai" in _squashed(sub_category or description)
    ):
        return azure_parse(description)
    if lowered == "cognitive services" and re.search(
        r"\b(inp|inpt|outp|input|output)\b", (description or "").lower()
    ):
        return azure_parse(description)
    if lowered == "vertex ai" and VERTEX_TOKEN_SKU.search(description or ""):
        return vertex_parse(description)
    return None


CANDIDATE_SERVICE = re.compile(r"bedrock|foundry|cognitive|openai|vertex", re.IGNORECASE)
TOKEN_USAGE = re.compile(r"token", re.IGNORECASE)


def unit_multiplier(unit: str | None) -> Decimal | None:
    """How many tokens one unit of a cloud line's quantity is, or None where it is no count."""
    text = (unit or "").strip().lower()
    if not text:
        return Decimal(1)
    if re.search(r"\b1\s*m\b|million", text):
        return Decimal(1_000_000)
    if re.search(r"\b1\s*k\b|thousand|\bk tokens", text):
        return Decimal(1000)
    if "token" in text or "count" in text or text in {"units", "unit"}:
        return Decimal(1)
    return None


class ModelApiColumns:
    """The model API columns of one file's batches, remembering what it parsed."""

    def __init__(self):
        self._parsed: dict[tuple, tuple | None] = {}
        self._units: dict[str | None, Decimal | None] = {}

    def columns(
        self,
        arrays: dict[str, pa.Array],
        extras: dict[str, pa.Array],
        out: dict[str, pa.Array],
        length: int,
        clean,
    ) -> dict[str, pa.Array]:
        """`model`, `token_direction`, `tokens`, `requests` and the cost kind made model API
        where a line is model API spend."""
        if API_MODEL in arrays:
            return self._given(arrays, length, clean)
        empty = {
            "model": pa.nulls(length, pa.string()),
            "token_direction": pa.nulls(length, pa.string()),
            "tokens": pa.nulls(length, DEC),
            "requests": pa.nulls(length, DEC),
        }
        service = out.get("service_name")
        if service is None or not length:
            return empty
        usage = next(
            (clean(a) for n, a in extras.items() if n.strip().lower() == "x_usagetype"),
            pa.nulls(length, pa.string()),
        )
        gateway = self._gateway_lines(out)
        # Most batches of a cloud bill hold no model service: look at distinct values only.
        if (
            gateway is None
            and not any(s and CANDIDATE_SERVICE.search(s) for s in pc.unique(service).to_pylist())
            and not any(u and TOKEN_USAGE.search(u) for u in pc.unique(usage).to_pylist())
        ):
            return empty
        sub_category = next(
            (
                clean(a)
                for n, a in extras.items()
                if n.strip().lower() in {"x_metersubcategory", "x_skumetersubcategory"}
            ),
            pa.nulls(length, pa.string()),
        )
        description = out.get("charge_description", pa.nulls(length, pa.string()))
        keys = pa.table(
            {
                "s": pc.fill_null(service, ""),
                "u": pc.fill_null(usage, ""),
                "d": pc.fill_null(description, ""),
                "m": pc.fill_null(sub_category, ""),
            }
        )
        joined = pc.binary_join_element_wise(keys["s"], keys["u"], keys["d"], keys["m"], "\x1f")
        encoded = pc.dictionary_encode(joined.combine_chunks())
        models, directions = [], []
        for value in encoded.dictionary.to_pylist():
            key = tuple(value.split("\x1f"))
            if key not in self._parsed:
                self._parsed[key] = cloud_parse(*key)
            parsed = self._parsed[key]
            models.append(parsed[0] if parsed else None)
            directions.append(parsed[1] if parsed else None)
        model = pc.take(pa.array(models, pa.string()), encoded.indices)
        direction = pc.take(pa.array(directions, pa.string()), encoded.indices)
        if gateway is not None:
            model = pc.if_else(gateway, out["resource_name"], model)
            direction = pc.if_else(gateway, OTHER, direction)
        if not model.null_count < length:
            return empty
        is_api = pc.is_valid(model)
        unit = pc.coalesce(out["consumed_unit"], out["pricing_unit"])
        unit_codes = pc.dictionary_encode(unit)
        factors = []
        for value in unit_codes.dictionary.to_pylist():
            if value not in self._units:
                self._units[value] = unit_multiplier(value)
            factor = self._units[value]
            factors.append(None if factor is None else float(factor))
        factor = pc.take(pa.array(factors, pa.float64()), unit_codes.indices)
        if unit.null_count:
            factor = pc.if_else(pc.is_null(unit), 1.0, factor)
        # Counts of whole tokens: a float product rounds back exactly (below 2**53).
        product = pc.round(pc.multiply(pc.cast(out["consumed_quantity"], pa.float64()), factor))
        tokens = pc.cast(pc.cast(product, pa.int64()), DEC)
        tokens = pc.if_else(
            pc.and_(is_api, pc.not_equal(pc.fill_null(direction, OTHER), OTHER)),
            tokens,
            pa.scalar(None, DEC),
        )
        return {
            "model": model,
            "token_direction": direction,
            "tokens": tokens,
            "requests": pa.nulls(length, DEC),
            "cost_kind": pc.if_else(is_api, CostKind.MODEL_API.value, out["cost_kind"]),
        }

    @staticmethod
    def _gateway_lines(out: dict[str, pa.Array]) -> pa.Array | None:
        """The lines of a gateway's FOCUS export (LiteLLM's): AI and Machine Learning without
        an instance, whose ResourceName, ResourceType and ChargeDescription all are the model.
        None when the batch has none."""
        category = out.get("service_category")
        if (
            category is None
            or not pc.any(
                pc.fill_null(pc.equal(category, "AI and Machine Learning"), False)
            ).as_py()
        ):
            return None
        name = out["resource_name"]
        found = pc.fill_null(
            pc.and_(
                pc.and_(
                    pc.equal(category, "AI and Machine Learning"),
                    pc.is_null(out["instance_type"]),
                ),
                pc.and_(
                    pc.equal(name, out["resource_type"]),
                    pc.equal(name, out["charge_description"]),
                ),
            ),
            False,
        )
        return found if pc.any(found).as_py() else None

    def _given(self, arrays: dict[str, pa.Array], length: int, clean) -> dict[str, pa.Array]:
        model = pc.fill_null(clean(arrays[API_MODEL]), UNKNOWN)
        direction = arrays.get(API_DIRECTION)
        direction = (
            pa.repeat(pa.scalar(OTHER, pa.string()), length)
            if direction is None
            else pc.fill_null(clean(direction), OTHER)
        )

        def number(name: str) -> pa.Array:
            array = arrays.get(name)
            if array is None:
                return pa.nulls(length, DEC)
            if pa.types.is_decimal(array.type) or pa.types.is_integer(array.type):
                return pc.cast(array, DEC)
            return pc.cast(clean(array), DEC)

        return {
            "model": model,
            "token_direction": direction,
            "tokens": number(API_TOKENS),
            "requests": number(API_REQUESTS),
            "cost_kind": pa.repeat(pa.scalar(CostKind.MODEL_API.value, pa.string()), length),
        }
