"""Turning rule hits into rows of the findings table (audit-contract §3).

Every rule ends in `to_findings(df, KIND, ...)`: severity, category and rule come from the registry
(`audit_rules.kinds`), unspecified fields are null, and `finding_id` is a hash of the kind and its
evidence, so the same input always yields the same ids.
"""

from __future__ import annotations

from functools import reduce
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
    evidence: Column | None = None,
    **fields: Column | str | None,
) -> DataFrame:
    """Select one finding of `kind` per row of `df`; `fields` name FINDINGS columns (a str is a column of df).

    `evidence` adds to the id what the fields do not hold (a file and byte position).
    """
    spec = KINDS[kind]
    columns: dict[str, Column] = {}
    for field in FINDINGS.schema.fields:
        name = field.name
        if name in fields:
            value = fields[name]
            col = F.lit(None) if value is None else (F.col(value) if isinstance(value, str) else value)
        elif name in ("dump_id", "replica", "topic", "partition") and name in df.columns:
            col = F.col(name)
        else:
            col = F.lit(None)
        columns[name] = col.cast(field.dataType)
    columns["kind"] = F.lit(kind)
    columns["severity"] = F.lit(spec.severity.label)
    columns["category"] = F.lit(spec.category)
    columns["rule"] = F.lit(spec.rule) if "rule" not in fields else columns["rule"]
    columns["message"] = message
    parts = [F.lit(kind), *[F.coalesce(columns[n].cast("string"), F.lit("-")) for n in _EVIDENCE]]
    if evidence is not None:
        parts.append((F.col(evidence) if isinstance(evidence, str) else evidence).cast("string"))
    columns["finding_id"] = F.substring(F.sha2(F.concat_ws("|", *parts), 256), 1, 32)
    return df.select(*[columns[f.name].alias(f.name) for f in FINDINGS.schema.fields])


def union_findings(frames: list[DataFrame]) -> DataFrame:
    """All rule outputs as one findings DataFrame (duplicate ids, if any rule repeats itself, removed)."""
    return reduce(DataFrame.unionByName, frames).dropDuplicates(["finding_id"])


def fmt(template: str, *cols: Column | str) -> Column:
    """`format_string` whose %s arguments print `?` when null, so a message is never null."""
    return F.format_string(
        template,
        *[F.coalesce((F.col(c) if isinstance(c, str) else c).cast("string"), F.lit("?")) for c in cols],
    )
