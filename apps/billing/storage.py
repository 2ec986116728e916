"""What is stored and moved: storage and transfer lines classified, their bytes, data class, model.

Bills name storage and traffic in their own words (CUR usage types such as `TimedStorage-ByteHrs`
or `USE1-USW2-AWS-Out-Bytes`, GCP SKU descriptions such as `Network Inter Region Data Transfer Out
from Americas to EMEA`, Azure meter names such as `Standard Data Transfer Out`). A line's text is
read once per distinct wording (Python looks at a few hundred distinct texts, never at rows) and
the answer is spread over the rows with Arrow, as the normaliser does for instance types.

Bytes: storage is kept as byte-seconds (bytes stored × seconds: a day's sum divided by 86,400 is
the bytes stored on average that day), transfer as bytes moved; both are whole-number multiples
of the bill's quantities (kept to a millionth). Each provider's "GB" is converted by the byte base
its own documentation gives (BYTE_BASE; the README has the table and sources).

The storage rollup (DailyStorageCost) is cut from these in the import, in a rebuild after
re-attribution, and in the migration that introduced it, all through `storage_rows`.
"""

import calendar
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
from django.db.models import Sum

DEC = pa.decimal128(38, 15)
BYTES = pa.decimal128(38, 6)  # bytes, and byte-seconds stored


class ByteSum(Sum):
    """Sum of a rollup's byte quantities (byte-seconds stored, bytes moved). A month of a large
    bucket is over 10^19 byte-seconds, beyond a 64-bit integer: SQLite keeps such whole numbers
    as integers and its SUM() fails with "integer overflow", so there it is TOTAL(), a float sum
    (SQLite's decimals are floats anyway). PostgreSQL sums them as exact numerics."""

    def as_sqlite(self, compiler, connection, **extra_context):
        return super().as_sqlite(compiler, connection, function="TOTAL", **extra_context)


class UsageClass:
    """What a storage or network line buys."""

    OBJECT = "object"
    BLOCK = "block"
    FILE = "file"
    VECTOR_DB = "vector_db"
    STORAGE_OTHER = "storage_other"
    INTERNET_EGRESS = "internet_egress"
    INTER_REGION = "inter_region"
    INTER_ZONE = "inter_zone"
    INTER_PROVIDER = "inter_provider"
    NETWORK_OTHER = "network_other"

    STORAGE = (OBJECT, BLOCK, FILE, VECTOR_DB, STORAGE_OTHER)
    TRANSFER = (INTERNET_EGRESS, INTER_REGION, INTER_ZONE, INTER_PROVIDER)
    LABELS = {
        OBJECT: "Object storage",
        BLOCK: "Block volumes",
        FILE: "File systems",
        VECTOR_DB: "Vector databases",
        STORAGE_OTHER: "Other storage",
        INTERNET_EGRESS: "Internet egress",
        INTER_REGION: "Between regions",
        INTER_ZONE: "Between zones",
        INTER_PROVIDER: "Between providers",
        NETWORK_OTHER: "Other network",
    }


class DataClass:
    DATASET = "dataset"
    CHECKPOINTS = "checkpoints"
    ARTEFACTS = "artefacts"
    VECTOR_DB = "vector-db"
    LOGS = "logs"
    UNCLASSIFIED = "unclassified"

    ALL = (DATASET, CHECKPOINTS, ARTEFACTS, VECTOR_DB, LOGS, UNCLASSIFIED)
    LABELS = {
        DATASET: "Datasets",
        CHECKPOINTS: "Checkpoints",
        ARTEFACTS: "Artefacts",
        VECTOR_DB: "Vector databases",
        LOGS: "Logs",
        UNCLASSIFIED: "Unclassified",
    }


UNKNOWN = "unknown"
# Tag values (compared without case, spaces, hyphens or underscores) → data class.
DATA_CLASS_VALUES = {
    "dataset": DataClass.DATASET,
    "datasets": DataClass.DATASET,
    "data": DataClass.DATASET,
    "trainingdata": DataClass.DATASET,
    "checkpoint": DataClass.CHECKPOINTS,
    "checkpoints": DataClass.CHECKPOINTS,
    "ckpt": DataClass.CHECKPOINTS,
    "artefact": DataClass.ARTEFACTS,
    "artefacts": DataClass.ARTEFACTS,
    "artifact": DataClass.ARTEFACTS,
    "artifacts": DataClass.ARTEFACTS,
    "modelartefacts": DataClass.ARTEFACTS,
    "modelartifacts": DataClass.ARTEFACTS,
    "vectordb": DataClass.VECTOR_DB,
    "vectordatabase": DataClass.VECTOR_DB,
    "embeddings": DataClass.VECTOR_DB,
    "log": DataClass.LOGS,
    "logs": DataClass.LOGS,
}
# The dimensions' own tag keys (TagKeyAlias adds the organisation's).
DATA_CLASS_KEY = "data_class"
MODEL_KEY = "model"

GIB = Decimal(2**30)
GB = Decimal(10**9)
# Bytes in one "GB" as each provider's documentation defines it (README, Storage and egress).
BYTE_BASE = {"aws": GIB, "amazon": GIB, "google": GIB, "gcp": GIB, "microsoft": GIB, "azure": GIB}
FOCUS_BASE = GB  # FOCUS's unit format: SI prefixes are decimal, IEC ones (GiB) binary
SIZE = {"b": 0, "byte": 0, "bytes": 0, "kb": 1, "mb": 2, "gb": 3, "tb": 4, "pb": 5}
IEC = {"kib": 1, "mib": 2, "gib": 3, "tib": 4, "pib": 5}
IEC_WORDS = {
    "kibibyte": 1,
    "kibibytes": 1,
    "mebibyte": 2,
    "mebibytes": 2,
    "gibibyte": 3,
    "gibibytes": 3,
    "tebibyte": 4,
    "tebibytes": 4,
}
# Time part of a unit → seconds it stands for (`month` needs the line's month: None).
PER_SECONDS = {
    "mo": None,
    "month": None,
    "months": None,
    "day": 86400,
    "days": 86400,
    "hr": 3600,
    "hrs": 3600,
    "hour": 3600,
    "hours": 3600,
    "second": 1,
    "seconds": 1,
}
DAY_SECONDS = 86400
UNIT = re.compile(r"^\s*(?:(\d+)\s+)?([a-z]+)(?:\s*(?:-|/|\s)\s*([a-z]+))?\s*$")

VECTOR = re.compile(r"vector|pinecone|weaviate|qdrant|milvus|zilliz|chroma", re.I)
FILE = re.compile(
    r"\befs\b|elastic ?file|fsx|filestore|file ?(storage|system|share)|azure files|\bfiles\b|"
    r"lustre|netapp",
    re.I,
)
BLOCK = re.compile(
    r"\bebs\b|ebs:|volumeusage|snapshotusage|\bpd\b|persistent disk|hyperdisk|managed disk|"
    r"\bdisks?\b|block",
    re.I,
)
OBJECT = re.compile(
    r"amazon ?s3|\bs3\b|simple storage service|timedstorage|cloud storage|\bblob|object|bucket|"
    r"data stored|standard storage|nearline|coldline|archive storage|glacier",
    re.I,
)
AWS_PAIR = re.compile(r"(?:^|\W)([A-Z]{2,4}\d?)-([A-Z]{2,4}\d?)-AWS-(Out|In)-Bytes", re.I)
INTER_PROVIDER = re.compile(
    r"inter-?provider|cross-?cloud|to (aws|azure|google|gcp)\b|multicloud", re.I
)
INTER_ZONE = re.compile(
    r"regional-bytes|inter[- ]?zone|intra[- ]?region|inter[- ]availability|cross[- ]?az|"
    r"between zones|inter[- ]?az\b",
    re.I,
)
INTER_REGION = re.compile(
    r"inter[- ]?region|between regions|cross[- ]?region|inter[- ]?continent|intra[- ]?continent|"
    r"-aws-(out|in)-bytes|region to region",
    re.I,
)
EGRESS = re.compile(
    r"out-bytes|data ?transfer ?out|internet egress|egress|download|cloudfront-out|"
    r"internet data transfer",
    re.I,
)
# GCP SKU descriptions and Azure meters name the ends of a transfer: `from X to Y`.
FROM_TO = re.compile(r"\bfrom ([\w\- ()]+?) to ([\w\- ()]+?)(?:$|\s*[,;(])", re.I)
# CUR usage-type region prefixes (the documented ones a training setup uses most).
AWS_PREFIX = {
    "USE1": "us-east-1",
    "USE2": "us-east-2",
    "USW1": "us-west-1",
    "USW2": "us-west-2",
    "CAN1": "ca-central-1",
    "EU": "eu-west-1",
    "EUW1": "eu-west-1",
    "EUW2": "eu-west-2",
    "EUW3": "eu-west-3",
    "EUC1": "eu-central-1",
    "EUN1": "eu-north-1",
    "APN1": "ap-northeast-1",
    "APN2": "ap-northeast-2",
    "APS1": "ap-southeast-1",
    "APS2": "ap-southeast-2",
    "APS3": "ap-south-1",
    "SAE1": "sa-east-1",
}
# CUR product/fromLocation and toLocation are location names.
AWS_LOCATION = {
    "US East (N. Virginia)": "us-east-1",
    "US East (Ohio)": "us-east-2",
    "US West (N. California)": "us-west-1",
    "US West (Oregon)": "us-west-2",
    "Canada (Central)": "ca-central-1",
    "EU (Ireland)": "eu-west-1",
    "EU (London)": "eu-west-2",
    "EU (Paris)": "eu-west-3",
    "EU (Frankfurt)": "eu-central-1",
    "EU (Stockholm)": "eu-north-1",
    "Asia Pacific (Tokyo)": "ap-northeast-1",
    "Asia Pacific (Seoul)": "ap-northeast-2",
    "Asia Pacific (Singapore)": "ap-southeast-1",
    "Asia Pacific (Sydney)": "ap-southeast-2",
    "Asia Pacific (Mumbai)": "ap-south-1",
    "South America (Sao Paulo)": "sa-east-1",
    "External": "internet",
}


def _kind(text: str, cost_kind: str) -> str:
    if cost_kind == "network":
        if INTER_PROVIDER.search(text):
            return UsageClass.INTER_PROVIDER
        if INTER_ZONE.search(text):
            return UsageClass.INTER_ZONE
        if INTER_REGION.search(text) or AWS_PAIR.search(text):
            return UsageClass.INTER_REGION
        if EGRESS.search(text):
            return UsageClass.INTERNET_EGRESS
        return UsageClass.NETWORK_OTHER
    if VECTOR.search(text):
        return UsageClass.VECTOR_DB
    if FILE.search(text):
        return UsageClass.FILE
    if BLOCK.search(text):
        return UsageClass.BLOCK
    if OBJECT.search(text):
        return UsageClass.OBJECT
    return UsageClass.STORAGE_OTHER


def _region(name: str | None) -> str:
    if not name:
        return UNKNOWN
    name = name.strip()
    return AWS_LOCATION.get(name, name.lower())


@dataclass(frozen=True)
class Wording:
    """One distinct wording of a line: what it says about its kind, ends and unit."""

    usage_class: str
    source: str  # "" where the line's own region is the source
    destination: str
    unit: str


def classify(
    *,
    cost_kind: str,
    service_name: str = "",
    description: str = "",
    extra: dict | None = None,
) -> tuple[str, str | None, str]:
    """(usage class, source region or None for "the line's region", destination region).

    Network lines: inter-provider, inter-zone, inter-region, internet egress, else other
    network. Storage lines: vector database, file system, block volume, object storage, else
    other storage. Ends come from CUR's product/fromLocation and toLocation (or region codes),
    a CUR usage type's region prefixes (`USE1-USW2-AWS-Out-Bytes`), a description's "from X to
    Y", else "unknown".
    """
    extra = extra or {}
    usage_type = str(extra.get("x_UsageType") or "")
    sub = str(extra.get("x_MeterSubCategory") or "")
    text = " ".join(t for t in (service_name, description, usage_type, sub) if t)
    kind = _kind(text, "network" if cost_kind == "network" else "storage")
    if kind not in UsageClass.TRANSFER:
        return kind, None, ""
    source = extra.get("x_FromRegionCode") or _region_or_none(extra.get("x_FromLocation"))
    destination = extra.get("x_ToRegionCode") or _region_or_none(extra.get("x_ToLocation"))
    pair = AWS_PAIR.search(usage_type)
    if pair and not (source and destination):
        first, second = (
            AWS_PREFIX.get(pair.group(1).upper()),
            AWS_PREFIX.get(pair.group(2).upper()),
        )
        if pair.group(3).lower() == "in":
            first, second = second, first
        source, destination = source or first, destination or second
    if not (source and destination):
        ends = FROM_TO.search(description)
        if ends:
            source = source or ends.group(1).strip().lower()
            destination = destination or ends.group(2).strip().lower()
    if kind == UsageClass.INTERNET_EGRESS and not destination:
        destination = "internet"
    return kind, (str(source) if source else None), str(destination or UNKNOWN)


def _region_or_none(name) -> str | None:
    return _region(str(name)) if name else None


def byte_base(provider_name: str) -> Decimal:
    """Bytes in one of the provider's "GB": its documentation's base, else FOCUS's (10^9)."""
    lowered = (provider_name or "").strip().lower()
    for prefix, base in BYTE_BASE.items():
        if lowered.startswith(prefix):
            return base
    return FOCUS_BASE


def unit_factor(unit: str, provider_name: str) -> tuple[int, int | None] | None:
    """How a quantity in `unit` becomes bytes: (bytes per unit, seconds per unit), or None where
    the unit is no data size.

    Seconds per unit is 0 for bytes moved (`GB`, `GiB`, `bytes`, `gibibyte`, `TB`) and the
    seconds of the time unit for bytes stored over time (`GB-Mo`, `GB/Month`, `gibibyte month`,
    `byte-seconds`, `GB-Hrs`); None stands for a month, whose length depends on the line's month.
    Both are whole numbers, so conversions stay exact.
    """
    if not unit:
        return None
    match = UNIT.match(unit.strip().lower())
    if not match:
        return None
    pack, size, per = match.groups()
    if size in ("b", "byte", "bytes"):
        per_unit = 1
    elif size in SIZE:
        # The provider's GB base fixes its KB, MB and TB alike (2^10 or 10^3 per step).
        step = 1024 if byte_base(provider_name) == GIB else 1000
        per_unit = step ** SIZE[size]
    elif size in IEC:
        per_unit = 1024 ** IEC[size]
    elif size in IEC_WORDS:
        per_unit = 1024 ** IEC_WORDS[size]
    else:
        return None
    if pack:
        per_unit *= int(pack)
    if per is None:
        return per_unit, 0
    if per not in PER_SECONDS:
        return None
    return per_unit, PER_SECONDS[per]


def days_in_month(year: int, month: int) -> int:
    return calendar.monthrange(year, month)[1]


def tag_value_key(value: str) -> str:
    return re.sub(r"[\s_\-]", "", str(value)).casefold()


def _alias_key(key: str) -> str:
    return "".join(str(key).split()).casefold()


@dataclass
class StorageFacts:
    """What the data class and model dimensions need: tag key aliases, registered models and
    owners' models, loaded once per import or rebuild."""

    data_class_keys: set[str] = field(default_factory=lambda: {DATA_CLASS_KEY, "dataclass"})
    model_keys: set[str] = field(default_factory=lambda: {MODEL_KEY})
    models: dict[str, int] = field(default_factory=dict)  # name or external id → model
    experiment_models: dict[int, int] = field(default_factory=dict)
    deployment_models: dict[int, int] = field(default_factory=dict)
    _tags: dict = field(default_factory=dict)
    _wordings: dict = field(default_factory=dict)

    @classmethod
    def from_rows(
        cls,
        aliases: Iterable[tuple[str, str]],
        models: Iterable[tuple[int, str, str]],
        experiments: Iterable[tuple[int, int | None]],
        deployments: Iterable[tuple[int, int | None]],
    ) -> "StorageFacts":
        facts = cls()
        models = list(models)
        for dimension, key in aliases:
            if dimension == "data_class":
                facts.data_class_keys.add(_alias_key(key))
            elif dimension == "model":
                facts.model_keys.add(_alias_key(key))
        for pk, name, _external_id in models:
            facts.models.setdefault(name.strip().casefold(), pk)
        for pk, _name, external_id in models:
            if external_id:
                facts.models[external_id.strip().casefold()] = pk  # an id beats a name
        facts.experiment_models = {pk: m for pk, m in experiments if m}
        facts.deployment_models = {pk: m for pk, m in deployments if m}
        return facts

    @classmethod
    def load(cls) -> "StorageFacts":
        from apps.deployments.models import Deployment, Model
        from apps.experiments.models import Experiment
        from apps.projects.models import TagKeyAlias

        return cls.from_rows(
            TagKeyAlias.objects.values_list("dimension", "key"),
            list(Model.objects.values_list("id", "name", "external_id")),
            Experiment.objects.values_list("id", "model_id"),
            Deployment.objects.values_list("id", "model_id"),
        )

    def from_tags(self, tags_json: str | None) -> tuple[str | None, int | None]:
        """(data class, model) a line's tags name, through the aliases."""
        if tags_json in self._tags:
            return self._tags[tags_json]
        data_class = model = None
        if tags_json:
            try:
                tags = json.loads(tags_json)
            except ValueError:
                tags = {}
            for key, value in (tags if isinstance(tags, dict) else {}).items():
                if value is None or isinstance(value, (dict, list)) or not str(value).strip():
                    continue
                normalised = _alias_key(key)
                if data_class is None and normalised in self.data_class_keys:
                    data_class = DATA_CLASS_VALUES.get(tag_value_key(value))
                if model is None and normalised in self.model_keys:
                    model = self.models.get(str(value).strip().casefold())
        if len(self._tags) > 100_000:
            self._tags.clear()
        self._tags[tags_json] = (data_class, model)
        return data_class, model

    def wording(self, key: str) -> Wording:
        """The classification of one distinct wording (see `_wording_key`)."""
        if key not in self._wordings:
            cost_kind, provider, service, description, extra_json, unit = key.split(KEY_SEPARATOR)
            try:
                extra = json.loads(extra_json) if extra_json else {}
            except ValueError:
                extra = {}
            kind, source, destination = classify(
                cost_kind=cost_kind,
                service_name=service,
                description=description,
                extra=extra if isinstance(extra, dict) else {},
            )
            self._wordings[key] = Wording(kind, source or "", destination, unit)
        return self._wordings[key]


KEY_SEPARATOR = "\x1f"  # between the parts of a wording's key (`storage_rows`)

STORAGE_KEYS = [
    "delivery_id",
    "day",
    "project_id",
    "experiment_id",
    "deployment_id",
    "model_id",
    "data_class",
    "usage_class",
    "provider_name",
    "region_id",
    "resource_id",
    "transfer_from",
    "transfer_to",
    "billing_currency",
]
# The line columns `storage_rows` reads.
STORAGE_LINE_COLUMNS = [
    "delivery_id",
    "charge_period_start",
    "cost_kind",
    "provider_name",
    "service_name",
    "charge_description",
    "extra",
    "tags",
    "consumed_quantity",
    "consumed_unit",
    "pricing_quantity",
    "pricing_unit",
    "region_id",
    "resource_id",
    "project_id",
    "experiment_id",
    "deployment_id",
    "billing_currency",
    "effective_cost",
    "billed_cost",
]
STORAGE_SUMS = ["effective_cost", "billed_cost", "stored_byte_seconds", "moved_bytes", "line_items"]
# The extra keys classification reads (the rest of `extra` would make every wording distinct).
WORDING_EXTRA = (
    "x_UsageType",
    "x_MeterSubCategory",
    "x_FromLocation",
    "x_ToLocation",
    "x_FromRegionCode",
    "x_ToRegionCode",
)


def _text(array) -> pa.Array:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_null(array.type):
        array = pa.nulls(len(array), pa.string())
    if not pa.types.is_string(array.type):
        array = pc.cast(array, pa.string())
    return pc.fill_null(array, "")


def _wording_extra(extra: pa.Array) -> pa.Array:
    """The wording-relevant part of each line's provider columns, as compact JSON."""
    encoded = pc.dictionary_encode(_text(extra))
    out = []
    for value in encoded.dictionary.to_pylist():
        try:
            parsed = json.loads(value) if value else {}
        except ValueError:
            parsed = {}
        kept = {k: parsed[k] for k in WORDING_EXTRA if isinstance(parsed, dict) and parsed.get(k)}
        out.append(json.dumps(kept, separators=(",", ":")) if kept else "")
    return pc.take(pa.array(out, pa.string()), encoded.indices)


def storage_rows(lines: pa.Table, facts: StorageFacts) -> pa.Table:
    """The storage rollup's rows (grouped by STORAGE_KEYS) of the storage and network lines.

    `lines` holds the line columns: delivery_id, charge_period_start, cost_kind, provider_name,
    service_name, charge_description, extra, tags, consumed_quantity, consumed_unit,
    pricing_quantity, pricing_unit, region_id, resource_id, project_id, experiment_id,
    deployment_id, billing_currency, effective_cost, billed_cost (and optionally line_items,
    for rows that are already sums of lines).
    """
    wanted = pc.is_in(_text(lines["cost_kind"]), value_set=pa.array(["storage", "network"]))
    if not pc.any(wanted).as_py():
        return _empty()
    # Only the columns read here are filtered (an import's batch holds sixty).
    read = [name for name in (*STORAGE_LINE_COLUMNS, "line_items") if name in lines.column_names]
    lines = lines.select(read).filter(wanted).combine_chunks()

    def column(name: str) -> pa.Array:
        array = lines[name]
        return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array

    length = lines.num_rows
    unit_source = pc.if_else(
        pc.is_valid(column("consumed_quantity")),
        _text(column("consumed_unit")),
        _text(column("pricing_unit")),
    )
    unit = pc.if_else(pc.equal(unit_source, ""), _text(column("pricing_unit")), unit_source)
    quantity = pc.coalesce(column("consumed_quantity"), column("pricing_quantity"))
    # Prefer the consumed unit; a line with only a pricing unit uses the pricing quantity.
    quantity = pc.if_else(
        pc.and_(pc.equal(unit_source, ""), pc.is_valid(column("pricing_quantity"))),
        column("pricing_quantity"),
        quantity,
    )
    # The parts are joined by the unit separator, which a bill's own text may hold: there it
    # reads as a space (a wording is still told by its words).
    key = pc.binary_join_element_wise(
        *(
            pc.replace_substring(part, KEY_SEPARATOR, " ")
            for part in (
                _text(column("cost_kind")),
                _text(column("provider_name")),
                _text(column("service_name")),
                _text(column("charge_description")),
                _wording_extra(column("extra")),
                unit,
            )
        ),
        KEY_SEPARATOR,
    )
    encoded = pc.dictionary_encode(key)
    wordings = [facts.wording(value) for value in encoded.dictionary.to_pylist()]
    index = encoded.indices
    usage_class = pc.take(pa.array([w.usage_class for w in wordings], pa.string()), index)
    region = _text(column("region_id"))
    source = pc.take(pa.array([w.source for w in wordings], pa.string()), index)
    transfer = pc.is_in(usage_class, value_set=pa.array(list(UsageClass.TRANSFER)))
    source = pc.if_else(
        transfer,
        pc.if_else(pc.equal(source, ""), pc.if_else(pc.equal(region, ""), UNKNOWN, region), source),
        "",
    )
    destination = pc.take(pa.array([w.destination for w in wordings], pa.string()), index)

    # Bytes: one whole-number factor per distinct (wording, month) (a month's length varies).
    provider_of = [value.split(KEY_SEPARATOR)[1] for value in encoded.dictionary.to_pylist()]
    factors = [unit_factor(w.unit, p) for w, p in zip(wordings, provider_of, strict=True)]
    day = pc.cast(pc.cast(column("charge_period_start"), pa.timestamp("us")), pa.date32())
    month = pc.add(
        pc.multiply(pc.cast(pc.year(day), pa.int64()), 100), pc.cast(pc.month(day), pa.int64())
    )
    combined = pc.dictionary_encode(
        pc.add(pc.multiply(pc.cast(index, pa.int64()), 1_000_000), month)
    )
    per_combination, stored_flags = [], []
    for value in combined.dictionary.to_pylist():
        factor = factors[value // 1_000_000]
        yyyymm = value % 1_000_000
        if factor is None:
            per_combination.append(0)
            stored_flags.append(False)
            continue
        per_unit, seconds = factor
        if seconds is None:
            seconds = days_in_month(yyyymm // 100, yyyymm % 100) * DAY_SECONDS
        per_combination.append(per_unit * seconds if seconds else per_unit)
        stored_flags.append(bool(seconds))
    factor = pc.take(pa.array(per_combination, pa.decimal256(30, 0)), combined.indices)
    is_stored = pc.take(pa.array(stored_flags, pa.bool_()), combined.indices)
    zero = pa.scalar(Decimal(0), DEC)
    amount = pc.cast(pc.fill_null(quantity, zero), pa.decimal256(40, 15))
    converted = pc.cast(pc.multiply(amount, factor), BYTES, safe=False)
    nothing = pa.scalar(Decimal(0), BYTES)
    storage_kind = pc.equal(_text(column("cost_kind")), "storage")
    stored = pc.if_else(pc.and_(is_stored, storage_kind), converted, nothing)
    moved = pc.if_else(pc.and_(pc.invert(is_stored), transfer), converted, nothing)

    # Data class and model: tags, else the owner, else unclassified.
    tags = pc.dictionary_encode(_text(column("tags")))
    named = [facts.from_tags(value or None) for value in tags.dictionary.to_pylist()]
    tag_class = pc.take(pa.array([n[0] for n in named], pa.string()), tags.indices)
    tag_model = pc.take(pa.array([n[1] for n in named], pa.int64()), tags.indices)
    experiment = pc.cast(column("experiment_id"), pa.int64())
    deployment = pc.cast(column("deployment_id"), pa.int64())
    owner_class = pc.if_else(
        pc.is_valid(experiment),
        DataClass.CHECKPOINTS,
        pc.if_else(pc.is_valid(deployment), DataClass.ARTEFACTS, pa.scalar(None, pa.string())),
    )
    vector = pc.if_else(
        pc.equal(usage_class, UsageClass.VECTOR_DB),
        DataClass.VECTOR_DB,
        pa.scalar(None, pa.string()),
    )
    data_class = pc.coalesce(tag_class, vector, owner_class, pa.scalar(DataClass.UNCLASSIFIED))
    owner_model = pc.coalesce(
        _lookup(experiment, facts.experiment_models), _lookup(deployment, facts.deployment_models)
    )
    model = pc.coalesce(tag_model, owner_model)

    counts = (
        column("line_items")
        if "line_items" in lines.column_names
        else pa.array([1] * length, pa.int64())
    )
    table = pa.table(
        {
            "delivery_id": pc.cast(column("delivery_id"), pa.int64()),
            "day": day,
            "project_id": pc.cast(column("project_id"), pa.int64()),
            "experiment_id": experiment,
            "deployment_id": deployment,
            "model_id": model,
            "data_class": data_class,
            "usage_class": usage_class,
            "provider_name": _text(column("provider_name")),
            "region_id": region,
            "resource_id": _text(column("resource_id")),
            "transfer_from": source,
            "transfer_to": pc.if_else(transfer, destination, ""),
            "billing_currency": _text(column("billing_currency")),
            "effective_cost": pc.cast(column("effective_cost"), DEC),
            "billed_cost": pc.cast(column("billed_cost"), DEC),
            "stored_byte_seconds": stored,
            "moved_bytes": moved,
            "line_items": pc.cast(counts, pa.int64()),
        }
    )
    return group(table)


def group(table: pa.Table) -> pa.Table:
    if not table.num_rows:
        return table
    grouped = table.group_by(STORAGE_KEYS, use_threads=False).aggregate(
        [(c, "sum") for c in STORAGE_SUMS]
    )
    out = {k: grouped[k] for k in STORAGE_KEYS}
    out.update({c: grouped[f"{c}_sum"] for c in STORAGE_SUMS})
    result = pa.table(out)
    # Sums of decimals widen their precision: bring them back to the columns' scale.
    for name, kind in (
        ("effective_cost", DEC),
        ("billed_cost", DEC),
        ("stored_byte_seconds", BYTES),
        ("moved_bytes", BYTES),
    ):
        result = result.set_column(
            result.column_names.index(name), name, pc.cast(result[name], kind, safe=False)
        )
    return result


def _empty() -> pa.Table:
    return pa.table(
        {
            "delivery_id": pa.array([], pa.int64()),
            "day": pa.array([], pa.date32()),
            "project_id": pa.array([], pa.int64()),
            "experiment_id": pa.array([], pa.int64()),
            "deployment_id": pa.array([], pa.int64()),
            "model_id": pa.array([], pa.int64()),
            **{
                k: pa.array([], pa.string())
                for k in STORAGE_KEYS
                if k
                not in {
                    "delivery_id",
                    "day",
                    "project_id",
                    "experiment_id",
                    "deployment_id",
                    "model_id",
                }
            },
            "effective_cost": pa.array([], DEC),
            "billed_cost": pa.array([], DEC),
            "stored_byte_seconds": pa.array([], BYTES),
            "moved_bytes": pa.array([], BYTES),
            "line_items": pa.array([], pa.int64()),
        }
    )


def _lookup(ids: pa.Array, mapping: dict[int, int]) -> pa.Array:
    if not mapping:
        return pa.nulls(len(ids), pa.int64())
    keys = pa.array(list(mapping), pa.int64())
    values = pa.array(list(mapping.values()), pa.int64())
    return pc.take(values, pc.index_in(ids, value_set=keys))
