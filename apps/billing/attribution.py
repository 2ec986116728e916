"""Who each line belongs to: project, owner (experiment or deployment) and workload.

The order (DESIGN.md, Attribution):
1. Tags, read through the organisation's tag key aliases (keys compared without case or spaces;
   the dimension's own name, `project`, `experiment`, `deployment`, always counts). A project tag
   names a project by slug (or name); an experiment or deployment tag names it by external id (or
   name), inside the tagged project if there is one. An owner brings its project.
2. Registered resources, matched in time: where tags named no owner, a line whose ResourceId an
   experiment or deployment registered, during the line's charge period, belongs to that owner
   (never against a project its tags named). Several owners at once share the line by GPU count
   (equally if none has GPUs): the line is stored as one part per owner, the parts adding up
   exactly to the line.
3. Model API keys (`ModelApiKey`), for model API lines still without an owner from a tag or a
   registered resource: a line whose ResourceId, else SubAccountId, is a mapped key (without
   case) belongs to its project and deployment, as inference.
4. Allocation rules, for lines still without a project: the first rule (by priority, then age)
   whose shell-style pattern matches the line's account, sub-account, service or resource id.
5. The rest is unattributed.

Workload: the owner's (an experiment's kind; a deployment serves inference), else a rule's, else
storage or network by cost kind, else other; a line without a project is `unattributed`. GPU
compute that a rule gives a project alone without a workload counts as the project's usual
workload (`projects.models.usual_workload`: most of its registered runs and deployments), as a
GPU box claimed for a project is what the project trains (or serves) on, not "other".

Everything runs on whole columns; Python only looks at distinct tag sets and at lines several
owners shared.
"""

import json
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal, localcontext

import pyarrow as pa
import pyarrow.compute as pc

from apps.deployments.models import Deployment, DeploymentResource
from apps.experiments.models import Experiment, ExperimentResource
from apps.projects.models import AllocationRule, Project, TagKeyAlias, Workload, usual_workload

from .models import AttributedBy, CostKind, ModelApiKey

EARLIEST = -(2**62)
LATEST = 2**62
QUANTUM = Decimal("1e-15")
SPLIT_COLUMNS = (
    "billed_cost",
    "effective_cost",
    "list_cost",
    "contracted_cost",
    "consumed_quantity",
    "pricing_quantity",
    "commitment_discount_quantity",
    "tokens",
    "requests",
)
ATTRIBUTION_COLUMNS = ("project_id", "experiment_id", "deployment_id", "workload", "attributed_by")
DIMENSIONS = ("project", "experiment", "deployment")


def alias_key(key: str) -> str:
    return "".join(str(key).split()).casefold()


def _micros(moment: datetime | None, default: int) -> int:
    if moment is None:
        return default
    return int(moment.timestamp() * 1_000_000)


def _regex_from_pattern(pattern: str) -> str:
    """A shell-style pattern (`*`, `?`, `[...]`) as an anchored RE2 expression."""
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            escaped = "".join(c if c.isalnum() or c == "-" else f"\\x{{{ord(c):x}}}" for c in body)
            out.append(f"[{'^' if negate else ''}{escaped}]")
            i = end
        elif char.isalnum():
            out.append(char)
        else:
            out.append(f"\\x{{{ord(char):x}}}")
        i += 1
    return "(?s)^" + "".join(out) + "$"


@dataclass(frozen=True)
class Owner:
    experiment_id: int | None
    deployment_id: int | None
    project_id: int
    workload: str
    gpus: int


@dataclass(frozen=True)
class Rule:
    field: str
    regex: str
    project_id: int
    experiment_id: int | None
    deployment_id: int | None
    workload: str | None
    gpu_workload: str | None = None  # for GPU compute lines: the project's usual workload


class Attributor:
    """The organisation's attribution facts, loaded once, applied to batches of lines."""

    def __init__(
        self,
        *,
        aliases: dict[str, set[str]],
        projects: dict[str, int],
        owners: list[Owner],
        owner_keys: dict[str, dict],
        uses: pa.Table,
        rules: list[Rule],
        api_keys: list[tuple[str, int, int | None]] = (),
    ):
        self.aliases = aliases
        self.projects = projects
        self.owners = owners
        self.owner_keys = owner_keys
        self.uses = uses
        self.use_keys = pc.unique(uses["rkey"]) if uses.num_rows else pa.array([], pa.string())
        self.rules = rules
        # (key without case, project, deployment) of the model API keys mapped.
        self.api_keys = pa.array([key for key, _, _ in api_keys], pa.string())
        self._key_project = pa.array([project for _, project, _ in api_keys], pa.int64())
        self._key_deployment = pa.array([deployment for _, _, deployment in api_keys], pa.int64())
        self._tags: dict[str | None, tuple[int | None, int | None]] = {}
        self._owner_project = pa.array([o.project_id for o in owners], pa.int64())
        self._owner_experiment = pa.array([o.experiment_id for o in owners], pa.int64())
        self._owner_deployment = pa.array([o.deployment_id for o in owners], pa.int64())
        self._owner_workload = pa.array([o.workload for o in owners], pa.string())
        self._rule_project = pa.array([r.project_id for r in rules], pa.int64())
        self._rule_experiment = pa.array([r.experiment_id for r in rules], pa.int64())
        self._rule_deployment = pa.array([r.deployment_id for r in rules], pa.int64())
        self._rule_workload = pa.array([r.workload for r in rules], pa.string())
        self._rule_gpu_workload = pa.array(
            [r.workload or r.gpu_workload for r in rules], pa.string()
        )

    @classmethod
    def load(cls) -> "Attributor":
        aliases = {dimension: {dimension} for dimension in DIMENSIONS}
        for dimension, key in TagKeyAlias.objects.values_list("dimension", "key"):
            aliases.setdefault(dimension, set()).add(alias_key(key))

        projects: dict[str, int] = {}
        for pk, _slug, name in Project.objects.values_list("id", "slug", "name"):
            projects.setdefault(name.casefold(), pk)
        for pk, slug, _name in Project.objects.values_list("id", "slug", "name"):
            projects[slug.casefold()] = pk  # a slug beats a name

        owners: list[Owner] = []
        owner_keys: dict[str, dict] = {
            dimension: {"scoped": {}, "global": {}} for dimension in ("experiment", "deployment")
        }
        windows: dict[tuple[str, int], tuple[int, datetime | None, datetime | None]] = {}
        for row in Experiment.objects.values_list(
            "id", "project_id", "name", "external_id", "kind", "gpu_count", "started_at", "ended_at"
        ):
            pk, project_id, name, external_id, kind, gpus, started, ended = row
            owners.append(Owner(pk, None, project_id, Experiment(kind=kind).workload, gpus))
            windows[("experiment", pk)] = (len(owners) - 1, started, ended)
            _register(owner_keys["experiment"], len(owners) - 1, project_id, name, external_id)
        for row in Deployment.objects.values_list(
            "id", "project_id", "name", "external_id", "gpu_count", "started_at", "ended_at"
        ):
            pk, project_id, name, external_id, gpus, started, ended = row
            owners.append(Owner(None, pk, project_id, Workload.INFERENCE.value, gpus))
            windows[("deployment", pk)] = (len(owners) - 1, started, ended)
            _register(owner_keys["deployment"], len(owners) - 1, project_id, name, external_id)

        keys, starts, ends, indexes = [], [], [], []
        for kind, model, fk in (
            ("experiment", ExperimentResource, "experiment_id"),
            ("deployment", DeploymentResource, "deployment_id"),
        ):
            for resource_id, started, ended, owner_pk in model.objects.values_list(
                "resource_id", "started_at", "ended_at", fk
            ):
                index, owner_started, owner_ended = windows[(kind, owner_pk)]
                keys.append(resource_id.strip().lower())
                starts.append(_micros(started or owner_started, EARLIEST))
                ends.append(_micros(ended or owner_ended, LATEST))
                indexes.append(index)
        uses = pa.table(
            {
                "rkey": pa.array(keys, pa.string()),
                "use_start": pa.array(starts, pa.int64()),
                "use_end": pa.array(ends, pa.int64()),
                "owner": pa.array(indexes, pa.int32()),
            }
        )

        experiment_workloads = {o.experiment_id: o.workload for o in owners if o.experiment_id}
        registered: dict[int, list[str]] = {}
        for owner in owners:
            registered.setdefault(owner.project_id, []).append(owner.workload)
        rules = []
        for rule in AllocationRule.objects.order_by("priority", "pk"):
            workload = rule.workload or None
            if not workload and rule.experiment_id:
                workload = experiment_workloads.get(rule.experiment_id)
            if not workload and rule.deployment_id:
                workload = Workload.INFERENCE.value
            rules.append(
                Rule(
                    rule.field,
                    _regex_from_pattern(rule.pattern),
                    rule.project_id,
                    rule.experiment_id,
                    rule.deployment_id,
                    workload,
                    None
                    if workload or rule.experiment_id or rule.deployment_id
                    else usual_workload(registered.get(rule.project_id, ())),
                )
            )
        api_keys = [
            (key.strip().lower(), project_id, deployment_id)
            for key, project_id, deployment_id in ModelApiKey.objects.order_by("pk").values_list(
                "key", "project_id", "deployment_id"
            )
        ]
        return cls(
            aliases=aliases,
            projects=projects,
            owners=owners,
            owner_keys=owner_keys,
            uses=uses,
            rules=rules,
            api_keys=api_keys,
        )

    # -- per distinct tag set ----------------------------------------------------------------

    def _from_tags(self, tags_json: str | None) -> tuple[int | None, int | None]:
        if tags_json is None:
            return None, None
        tags = json.loads(tags_json)
        named: dict[str, str] = {}
        for key, value in tags.items():
            if value is None or isinstance(value, (dict, list)) or str(value).strip() == "":
                continue
            normalised = alias_key(key)
            for dimension, keys in self.aliases.items():
                if normalised in keys and dimension not in named:
                    named[dimension] = str(value).strip().casefold()
        project_id = self.projects.get(named["project"]) if "project" in named else None
        owner = None
        for dimension in ("experiment", "deployment"):
            if owner is None and dimension in named:
                owner = self._owner(dimension, named[dimension], project_id)
        if owner is not None and project_id is None:
            project_id = self.owners[owner].project_id
        return project_id, owner

    def _owner(self, dimension: str, value: str, project_id: int | None) -> int | None:
        keys = self.owner_keys[dimension]
        if project_id is not None:
            return keys["scoped"].get((project_id, value))
        found = keys["global"].get(value)
        return None if found is None or found < 0 else found

    # -- per batch ---------------------------------------------------------------------------

    def attribute(self, lines: pa.Table) -> pa.Table:
        """The lines with their attribution columns; shared lines come back as their parts."""
        lines = lines.combine_chunks()
        length = lines.num_rows
        encoded = pc.dictionary_encode(lines["tags"].combine_chunks())
        found = []
        for value in encoded.dictionary.to_pylist():
            if value not in self._tags:
                if len(self._tags) > 100_000:
                    self._tags.clear()
                self._tags[value] = self._from_tags(value)
            found.append(self._tags[value])
        tag_project = pc.take(pa.array([f[0] for f in found], pa.int64()), encoded.indices)
        tag_owner = pc.take(pa.array([f[1] for f in found], pa.int32()), encoded.indices)

        resource_owner, shared = self._resource_owners(lines, tag_project, tag_owner)
        owner = pc.coalesce(tag_owner, resource_owner)
        project = pc.coalesce(tag_project, pc.take(self._owner_project, owner))
        key = self._api_keys(lines, project)
        project = pc.coalesce(project, pc.take(self._key_project, key))
        rule = self._rules(lines, project)

        project = pc.coalesce(project, pc.take(self._rule_project, rule))
        experiment = pc.coalesce(
            pc.take(self._owner_experiment, owner), pc.take(self._rule_experiment, rule)
        )
        deployment = pc.coalesce(
            pc.take(self._owner_deployment, owner),
            pc.take(self._key_deployment, key),
            pc.take(self._rule_deployment, rule),
        )
        by_kind = pc.if_else(
            pc.equal(lines["cost_kind"], CostKind.STORAGE.value),
            Workload.STORAGE.value,
            pc.if_else(
                pc.equal(lines["cost_kind"], CostKind.NETWORK.value),
                Workload.NETWORK.value,
                pc.if_else(
                    # Tokens bought from a hosted model are inference, unless a rule says not.
                    pc.equal(lines["cost_kind"], CostKind.MODEL_API.value),
                    Workload.INFERENCE.value,
                    Workload.OTHER.value,
                ),
            ),
        )
        rule_workload = pc.if_else(
            pc.equal(lines["cost_kind"], CostKind.GPU_COMPUTE.value),
            pc.take(self._rule_gpu_workload, rule),
            pc.take(self._rule_workload, rule),
        )
        key_workload = pc.if_else(
            pc.is_valid(key), Workload.INFERENCE.value, pa.scalar(None, pa.string())
        )
        workload = pc.coalesce(
            pc.take(self._owner_workload, owner), key_workload, rule_workload, by_kind
        )
        workload = pc.if_else(pc.is_null(project), Workload.UNATTRIBUTED.value, workload)
        by = pc.if_else(
            pc.or_(pc.is_valid(tag_project), pc.is_valid(tag_owner)),
            AttributedBy.TAG.value,
            pc.if_else(
                pc.or_(pc.is_valid(resource_owner), pc.is_valid(key)),
                AttributedBy.RESOURCE.value,
                pc.if_else(pc.is_valid(rule), AttributedBy.RULE.value, AttributedBy.NONE.value),
            ),
        )
        attributed = lines
        for name, column in zip(
            ATTRIBUTION_COLUMNS, (project, experiment, deployment, workload, by), strict=True
        ):
            attributed = _set_column(attributed, name, column)
        if shared:
            attributed = self._split(attributed, shared)
        assert attributed.num_rows >= length
        return attributed

    def _resource_owners(
        self, lines: pa.Table, tag_project: pa.Array, tag_owner: pa.Array
    ) -> tuple[pa.Array, dict[int, list[int]]]:
        """Owner per line from registered resources, and the lines several owners shared."""
        length = lines.num_rows
        none = pa.nulls(length, pa.int32())
        if not self.uses.num_rows or not length:
            return none, {}
        keys = pc.utf8_lower(lines["resource_id"].combine_chunks())
        wanted = pc.fill_null(
            pc.and_(pc.is_null(tag_owner), pc.is_in(keys, value_set=self.use_keys)), False
        )
        if not pc.any(wanted).as_py():
            return none, {}
        rows = pc.indices_nonzero(wanted)
        start = pc.cast(pc.take(lines["charge_period_start"], rows), pa.int64())
        end = pc.max_element_wise(
            pc.cast(pc.take(lines["charge_period_end"], rows), pa.int64()), pc.add(start, 1)
        )
        candidates = pa.table(
            {
                "row": rows,
                "rkey": pc.take(keys, rows),
                "line_start": start,
                "line_end": end,
                "tag_project": pc.take(tag_project, rows),
            }
        )
        matched = candidates.join(self.uses, "rkey", join_type="inner")
        matched = matched.filter(
            pc.and_(
                pc.less(matched["use_start"], matched["line_end"]),
                pc.greater(matched["use_end"], matched["line_start"]),
            )
        )
        owner_project = pc.take(self._owner_project, matched["owner"])
        matched = matched.filter(
            pc.or_kleene(
                pc.is_null(matched["tag_project"]),
                pc.equal(matched["tag_project"], owner_project),
            )
        )
        if not matched.num_rows:
            return none, {}
        per_row = (
            matched.group_by("row")
            .aggregate([("owner", "count_distinct"), ("owner", "min")])
            .sort_by("row")
        )
        rows_matched = per_row["row"].combine_chunks()
        first_owner = pc.cast(per_row["owner_min"].combine_chunks(), pa.int32())
        shared_rows = per_row.filter(pc.greater(per_row["owner_count_distinct"], 1))[
            "row"
        ].combine_chunks()
        shared: dict[int, list[int]] = {}
        if len(shared_rows):
            for item in (
                matched.filter(pc.is_in(matched["row"], value_set=shared_rows))
                .select(["row", "owner"])
                .to_pylist()
            ):
                shared.setdefault(item["row"], [])
                if item["owner"] not in shared[item["row"]]:
                    shared[item["row"]].append(item["owner"])
        # Every matched line takes its first owner here; shared ones are split afterwards.
        mask = pc.is_in(pa.array(range(length), pa.int64()), value_set=rows_matched)
        owners = pc.replace_with_mask(none, mask, first_owner)
        return owners, shared

    def _api_keys(self, lines: pa.Table, project: pa.Array) -> pa.Array:
        """The mapped key (an index into the mapping) of each model API line without a project
        yet: its ResourceId's, else its SubAccountId's."""
        key = pa.nulls(lines.num_rows, pa.int32())
        if not len(self.api_keys) or not lines.num_rows:
            return key
        pending = pc.and_(
            pc.is_null(project),
            pc.fill_null(pc.equal(lines["cost_kind"], CostKind.MODEL_API.value), False),
        )
        if not pc.any(pending).as_py():
            return key
        for column in ("resource_id", "sub_account_id"):
            values = pc.utf8_lower(lines[column].combine_chunks())
            found = pc.cast(pc.index_in(values, value_set=self.api_keys), pa.int32())
            take = pc.and_(pc.and_(pending, pc.is_null(key)), pc.is_valid(found))
            key = pc.if_else(take, found, key)
        return key

    def _rules(self, lines: pa.Table, project: pa.Array) -> pa.Array:
        rule = pa.nulls(lines.num_rows, pa.int32())
        if not self.rules:
            return rule
        pending = pc.is_null(project)
        if not pc.any(pending).as_py():
            return rule
        for index, item in enumerate(self.rules):
            values = lines[item.field].combine_chunks()
            hit = pc.fill_null(
                pc.match_substring_regex(values, item.regex, ignore_case=True), False
            )
            hit = pc.and_(hit, pc.and_(pending, pc.is_null(rule)))
            if pc.any(hit).as_py():
                rule = pc.if_else(hit, pa.scalar(index, pa.int32()), rule)
        return rule

    def _split(self, lines: pa.Table, shared: dict[int, list[int]]) -> pa.Table:
        """Replace each shared line by one part per owner, its money split by GPU count."""
        rows = sorted(shared)
        positions = pa.array(rows, pa.int64())
        keep = pc.invert(pc.is_in(pa.array(range(lines.num_rows), pa.int64()), value_set=positions))
        parts = []
        for row, line in zip(rows, lines.take(positions).to_pylist(), strict=True):
            owners = sorted(shared[row])
            weights = [max(self.owners[o].gpus, 0) for o in owners]
            if not sum(weights):
                weights = [1] * len(owners)
            total = sum(weights)
            remaining = {name: line[name] for name in SPLIT_COLUMNS}
            for position, (index, weight) in enumerate(zip(owners, weights, strict=True)):
                owner = self.owners[index]
                part = dict(line)
                last = position == len(owners) - 1
                for name in SPLIT_COLUMNS:
                    part.pop(name + "__text", None)
                    if line[name] is None:
                        continue
                    if last:
                        part[name] = remaining[name]
                    else:
                        with localcontext(prec=60):
                            share = (line[name] * weight / total).quantize(QUANTUM, ROUND_HALF_EVEN)
                        part[name] = share
                        remaining[name] -= share
                part["project_id"] = owner.project_id
                part["experiment_id"] = owner.experiment_id
                part["deployment_id"] = owner.deployment_id
                part["workload"] = owner.workload
                parts.append(part)
        split = pa.Table.from_pylist(parts, schema=lines.schema)
        return pa.concat_tables([lines.filter(keep), split])


def _register(keys: dict, index: int, project_id: int, name: str, external_id: str) -> None:
    """Index an owner by name and external id, in its project and across projects."""
    scoped, global_ = keys["scoped"], keys["global"]
    for value in (name, external_id):  # external id second: it wins inside a project
        if not value:
            continue
        key = value.strip().casefold()
        scoped[(project_id, key)] = index
        previous = global_.get(key)
        global_[key] = index if previous in (None, index) else -1  # -1: ambiguous


def _set_column(table: pa.Table, name: str, column: pa.Array) -> pa.Table:
    if name in table.column_names:
        return table.set_column(table.column_names.index(name), name, column)
    return table.append_column(name, column)
