"""App-sequence rules for producers without idempotence (contract §1 `--app-producer`/`--app-sequence`).

With `producer_id = -1` the broker checks nothing (§5.1); an application that stamps its own
producer name and sequence into each record lets the audit see what the broker could not: the
Sarama #2619 reordering (1,2,5,6,3,4,7 is one regression, at 3), duplicates, and holes
(librdkafka #2163: timed-out messages that were never sent).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from audit_rules.findings import fmt, to_findings
from audit_rules.logs import with_log_key
from audit_rules.profile import AppSequenceSpec


def extract(spec: str) -> Column:
    """The value named by `header:NAME` (a record header, UTF-8) or `json:FIELD` (a top-level field of a JSON
    value)."""
    source, _, name = AppSequenceSpec.check(spec).partition(":")
    if source == "header":
        at = F.array_position(F.col("header_keys"), name)
        return F.when(at > 0, F.element_at(F.col("header_values"), at.cast("int")).cast("string"))
    escaped = name.replace("'", "\\'")
    return F.get_json_object(F.col("value").cast("string"), f"$['{escaped}']")


def app_sequences(records: DataFrame, spec: AppSequenceSpec) -> DataFrame:
    """Records with `app_producer` and `app_sequence` (long) where both could be read."""
    r = with_log_key(records).select(
        "*",
        extract(spec.producer).alias("app_producer"),
        F.trim(extract(spec.sequence)).cast("long").alias("app_sequence"),
    )
    return r.where(F.col("app_producer").isNotNull() & F.col("app_sequence").isNotNull())


def app_sequence_rules(records: DataFrame, spec: AppSequenceSpec) -> DataFrame:
    """DUPLICATE_APP_SEQUENCE, APP_SEQUENCE_REGRESSION and APP_SEQUENCE_GAP per (log, app producer) in offset
    order."""
    r = app_sequences(records, spec)
    order = Window.partitionBy("log_key", "app_producer").orderBy("offset")
    same = Window.partitionBy("log_key", "app_producer", "app_sequence").orderBy("offset")
    r = (
        r.withColumn("_prev", F.lag("app_sequence").over(order))
        .withColumn("_prev_offset", F.lag("offset").over(order))
        .withColumn("_copy", F.row_number().over(same))
        .withColumn("_first_offset", F.first("offset").over(same))
    )
    duplicate = to_findings(
        r.where(F.col("_copy") > 1),
        "DUPLICATE_APP_SEQUENCE",
        fmt(
            "App producer %s wrote sequence %s again at offset %s (first at offset %s): the record is "
            "duplicated.",
            "app_producer",
            "app_sequence",
            "offset",
            "_first_offset",
        ),
        first_offset="offset",
        last_offset="offset",
        related_offset="_first_offset",
        evidence=F.col("app_producer"),
    )
    regression = to_findings(
        r.where((F.col("_copy") == 1) & (F.col("app_sequence") < F.col("_prev"))),
        "APP_SEQUENCE_REGRESSION",
        fmt(
            "App producer %s went back from sequence %s (offset %s) to %s at offset %s: records were "
            "written out of "
            "order (the Sarama #2619 retry signature).",
            "app_producer",
            "_prev",
            "_prev_offset",
            "app_sequence",
            "offset",
        ),
        first_offset="offset",
        last_offset="offset",
        related_offset="_prev_offset",
        evidence=F.col("app_producer"),
    )
    # Holes: distinct values in value order; a step of more than one skips values seen nowhere.
    values = r.where(F.col("_copy") == 1).select(
        "log_key", "dump_id", "replica", "topic", "partition", "app_producer", "app_sequence", "offset"
    )
    by_value = Window.partitionBy("log_key", "app_producer").orderBy("app_sequence")
    holes = (
        values.withColumn("_below", F.lag("app_sequence").over(by_value))
        .withColumn("_below_offset", F.lag("offset").over(by_value))
        .where(F.col("app_sequence") > F.col("_below") + 1)
        .withColumn("_missing", F.col("app_sequence") - F.col("_below") - 1)
    )
    gap = to_findings(
        holes,
        "APP_SEQUENCE_GAP",
        fmt(
            "App producer %s never wrote sequences %s-%s (%s value(s)) although %s (offset %s) and %s "
            "(offset %s) are "
            "in the log: records the client never sent, or lost.",
            "app_producer",
            F.col("_below") + 1,
            F.col("app_sequence") - 1,
            "_missing",
            "_below",
            "_below_offset",
            "app_sequence",
            "offset",
        ),
        first_offset="offset",
        last_offset="offset",
        related_offset="_below_offset",
        missing_records="_missing",
        evidence=F.col("app_producer"),
    )
    return duplicate.unionByName(regression).unionByName(gap)
