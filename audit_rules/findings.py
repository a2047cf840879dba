"""Turning rule hits into rows of the findings table (audit-contract §3).

Every rule ends in `to_findings(df, KIND, ...)`: severity, category and rule come from the registry
(`audit_rules.kinds`), unspecified fields are null, and `finding_id` is a hash of the kind and its
evidence, so the same input always yields the same ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from audit_rules.kinds import KINDS
from schemas.tables import FINDINGS

# The fields that identify a finding's evidence (its id), in a fixed order.
_EVIDENCE = (
    "dump_id",
    "replica",
    "topic",
    "partition",
    "producer_id",
    "producer_epoch",
    "first_offset",
    "last_offset",
    "base_sequence",
    "last_sequence",
    "related_offset",
)


# A finding about one batch: its producer, epoch, offsets and sequences, as named in the history.
BATCH_FIELDS: dict[str, Any] = {
    "producer_id": "producer_id",
    "producer_epoch": "producer_epoch",
    "first_offset": "base_offset",
    "last_offset": "last_offset",
    "base_sequence": "base_sequence",
    "last_sequence": "last_sequence",
}


def to_findings(
    df: DataFrame,
    kind: str,
    message: Column,
    *,
    evidence: Column | str | None = None,
    **fields: Column | str | None,
) -> DataFrame:
    """Select one finding of `kind` per row of `df`; `fields` name FINDINGS columns (a str is a column of df).

    `evidence` adds to the id what the fields do not hold (a file and byte position).

    The projection is SQL text (`selectExpr`), with the Column arguments added to `df` first under
    names of their own: built Column by Column, it took ~200 calls into the JVM per rule output, ~2 s
    of the driver's time in an audit (a py4j round trip each, ~0.3 ms).
    """
    spec = KINDS[kind]
    given: dict[str, Column] = {}

    def sql(value: Column | str | None, name: str) -> str:
        """`value` as SQL text over `df` (a Column joins `given` under a name of its own)."""
        if value is None:
            return "NULL"
        if isinstance(value, str):
            return _identifier(value)
        given[f"__finding_{name}"] = value
        return f"`__finding_{name}`"

    constants = {"kind": kind, "severity": spec.severity.label, "category": spec.category}
    if "rule" not in fields:
        constants["rule"] = spec.rule
    columns = set(df.columns)
    exprs: dict[str, str] = {}
    for field in FINDINGS.schema.fields:
        name = field.name
        if name in constants:
            literal = _string_literal(constants[name])
            exprs[name] = literal if literal is not None else sql(F.lit(constants[name]), name)
        elif name == "message":
            exprs[name] = sql(message, name)
        elif name != "finding_id":
            default = name if name in _LOG_FIELDS and name in columns else None
            value = fields.get(name, default)
            exprs[name] = f"CAST({sql(value, name)} AS {field.dataType.simpleString()})"
    parts = [exprs["kind"], *[f"coalesce(CAST({exprs[n]} AS STRING), '-')" for n in _EVIDENCE]]
    if evidence is not None:
        parts.append(f"CAST({sql(evidence, 'evidence')} AS STRING)")
    exprs["finding_id"] = f"substring(sha2(concat_ws('|', {', '.join(parts)}), 256), 1, 32)"
    rows = df.withColumns(given) if given else df
    return rows.selectExpr(*[f"{exprs[f.name]} AS `{f.name}`" for f in FINDINGS.schema.fields])


def file_evidence(file: Column | str, *more: Column | str) -> Column:
    """A finding's evidence naming a file of a partition (`topic` set): its last two path components,
    its partition directory and its name, and `more`, joined by `@`. Not the whole path: the finding's
    id already names the dump, replica, topic and partition, and the same dump read from another
    directory is the same input (contract §3: same input, same id). A file of no partition (a log
    directory's checkpoint, a part of a partitioned ack ledger, whose leaves reuse one name) keeps its
    whole path: nothing else in the id tells two of them apart."""
    path = F.col(file) if isinstance(file, str) else file
    name = F.when(F.col("topic").isNotNull(), F.regexp_extract(path, r"([^/]*/)?[^/]*$", 0)).otherwise(path)
    return F.concat_ws("@", name, *more)


def union_by_name(frames: Sequence[DataFrame]) -> DataFrame:
    """`frames` as one DataFrame (`unionByName`), joined pairwise as a balanced tree.

    Each union is analysed whole when it is made, its children's plans walked again, so a chain
    `((a + b) + c) + ...` walks the first frame's plan n times and pairs walk each about log2(n)
    times. The findings' union of the bundled sample's 20 rule outputs, in a warm test session:
    1.2-1.6 s of the driver's time as a chain, 0.7-0.9 s in pairs (the same frames, both ways, in
    each of three audits)."""
    level = list(frames)
    while len(level) > 1:
        paired = [a.unionByName(b) for a, b in zip(level[::2], level[1::2], strict=False)]
        level = paired + level[len(paired) * 2 :]
    return level[0]


def union_findings(frames: list[DataFrame], tasks: int | None = None) -> DataFrame:
    """All rule outputs as one findings DataFrame, a finding that a rule repeats whole kept once.

    Only whole repeats: two findings that share an id but differ elsewhere both stay, for the findings
    suite's uniqueness check to fail on. Dropping one by id alone would keep whichever the shuffle
    brought first, and hide the collision.

    `tasks` (the session's cores): the union is read in at most that many tasks. Each task of its
    stage deserializes the whole stage, every rule's last step: the bundled sample's findings ran 66
    such tasks, 3.0 s of deserialization in a warm test session, against 0.1 s in two."""
    union = union_by_name(frames)
    if tasks is not None:
        union = union.coalesce(tasks)
    return union.dropDuplicates()


def fmt(template: str, *cols: Column | str) -> Column:
    """`format_string` whose %s arguments print `?` when null, so a message is never null.

    A str names a column; its argument is SQL text (one call into the JVM, not six)."""
    args = [
        F.expr(f"coalesce(CAST({_identifier(c)} AS STRING), '?')")
        if isinstance(c, str)
        else F.coalesce(c.cast("string"), F.lit("?"))
        for c in cols
    ]
    return F.format_string(template, *args)


# The log's own columns, taken from a rule's rows when it does not name them.
_LOG_FIELDS = frozenset({"dump_id", "replica", "topic", "partition"})


def _identifier(name: str) -> str:
    """A column name as SQL text that resolves as `F.col(name)` does (a dot separates nested fields)."""
    if "`" in name:
        return name
    return ".".join(f"`{part}`" for part in name.split("."))


def _string_literal(text: str) -> str | None:
    """`text` as a SQL string literal, or None when it holds a quote or backslash (read differently
    under `spark.sql.parser.escapedStringLiterals`)."""
    return None if "'" in text or "\\" in text else f"'{text}'"
