"""`findings.to_findings`: every FINDINGS column from a rule's rows, and finding ids that follow one
fixed formula (contract §3: the same input gives the same ids, release after release).

The expected ids are computed here in plain Python: sha256 over the kind and the evidence fields
(`-` for a null), joined by `|`, with the rule's extra evidence last when it has one; 32 hex digits.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from audit_rules.findings import file_evidence, fmt, to_findings, union_by_name, union_findings
from audit_rules.kinds import KINDS, Kind
from jobs.ingest import session_conf
from schemas.tables import FINDINGS

EVIDENCE = (
    "dump_id", "replica", "topic", "partition", "producer_id", "producer_epoch", "first_offset",
    "last_offset", "base_sequence", "last_sequence", "related_offset",
)  # fmt: skip


def expected_id(kind: str, row: dict[str, Any], extra: str | None = None) -> str:
    parts = [kind, *("-" if row[n] is None else str(row[n]) for n in EVIDENCE)]
    if extra is not None:
        parts.append(extra)
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]


def rows_of(spark: SparkSession) -> Any:
    return spark.createDataFrame(
        [
            ("d1", "r1", "orders", 3, 77, 2, 100, 104, 5, 9, "f.log", 4096, "it's a \\ test"),
            ("d1", None, "orders", 3, 78, 0, 200, 200, 0, 0, "f.log", 8192, "plain"),
        ],
        "dump_id string, replica string, topic string, partition int, producer_id bigint, "
        "producer_epoch smallint, base_offset bigint, last_offset bigint, base_sequence int, "
        "last_sequence int, file string, position bigint, note string",
    )


def test_fields_by_name_column_and_null_and_the_log_columns_of_the_rows(spark: SparkSession) -> None:
    df = rows_of(spark)
    out = to_findings(
        df,
        "SEQUENCE_GAP",
        fmt("Producer %s said '%s' at %s.", "producer_id", "note", F.col("base_offset") + 1),
        producer_id="producer_id",
        producer_epoch="producer_epoch",
        first_offset="base_offset",
        last_offset=F.col("last_offset"),
        base_sequence=F.col("base_sequence") * 1,
        last_sequence="last_sequence",
        expected_sequence=F.lit(3),
        related_offset=None,
        missing_records=F.col("last_sequence") - F.col("base_sequence"),
    )
    assert out.schema.fieldNames() == FINDINGS.schema.fieldNames()
    assert [f.dataType for f in out.schema.fields] == [f.dataType for f in FINDINGS.schema.fields]
    got = {r["producer_id"]: r.asDict() for r in out.collect()}
    spec = KINDS["SEQUENCE_GAP"]
    for src in df.collect():
        row = got[src["producer_id"]]
        evidence = {
            "dump_id": src["dump_id"], "replica": src["replica"], "topic": src["topic"],
            "partition": src["partition"], "producer_id": src["producer_id"],
            "producer_epoch": src["producer_epoch"], "first_offset": src["base_offset"],
            "last_offset": src["last_offset"], "base_sequence": src["base_sequence"],
            "last_sequence": src["last_sequence"], "related_offset": None,
        }  # fmt: skip
        assert {n: row[n] for n in EVIDENCE} == evidence
        assert (row["kind"], row["severity"], row["category"], row["rule"]) == (
            "SEQUENCE_GAP", spec.severity.label, spec.category, spec.rule,
        )  # fmt: skip
        assert row["expected_sequence"] == 3
        assert row["missing_records"] == src["last_sequence"] - src["base_sequence"]
        assert row["explained_by"] is None
        assert (
            row["message"]
            == f"Producer {src['producer_id']} said '{src['note']}' at {src['base_offset'] + 1}."
        )
        assert row["finding_id"] == expected_id("SEQUENCE_GAP", evidence)


def test_extra_evidence_a_given_rule_and_log_columns_left_out(spark: SparkSession) -> None:
    df = rows_of(spark).drop("replica")
    out = to_findings(
        df,
        "OFFSET_OVERLAP",
        F.lit("overlap"),
        evidence=F.concat_ws("@", "file", "position"),
        dump_id=None,
        first_offset="base_offset",
        rule=F.concat(F.lit("custom "), F.col("note")),
    )
    got = sorted(out.collect(), key=lambda r: r["first_offset"])
    srcs = sorted(df.collect(), key=lambda r: r["base_offset"])
    for row, src in zip(got, srcs, strict=True):
        evidence = dict.fromkeys(EVIDENCE)
        evidence.update(topic=src["topic"], partition=src["partition"], first_offset=src["base_offset"])
        # dump_id=None wins over the rows' own dump_id; replica is not a column of these rows.
        assert {n: row[n] for n in EVIDENCE} == evidence
        assert row["rule"] == "custom " + src["note"]
        assert row["finding_id"] == expected_id(
            "OFFSET_OVERLAP", evidence, f"{src['file']}@{src['position']}"
        )
    # The evidence column by name.
    named = to_findings(df, "OFFSET_OVERLAP", F.lit("overlap"), evidence="file").collect()
    assert {r["finding_id"] for r in named} == {
        expected_id(
            "OFFSET_OVERLAP",
            {**dict.fromkeys(EVIDENCE), "dump_id": "d1", "topic": "orders", "partition": 3},
            "f.log",
        )
    }


def test_texts_with_quotes_nested_fields_and_either_string_literal_mode(
    spark: SparkSession, monkeypatch: Any
) -> None:
    """`to_findings` writes its projection as SQL text: a registry text holding a quote or a backslash,
    a field named by a nested path and `spark.sql.parser.escapedStringLiterals` (which reads a
    literal's backslashes differently) give the same row as the registry and the columns say."""
    spec = KINDS["SEQUENCE_GAP"]
    monkeypatch.setitem(
        KINDS, "SEQUENCE_GAP", Kind("SEQUENCE_GAP", spec.severity, "it's \\ odd", "KIP-98 'rule' \\n")
    )
    df = rows_of(spark).select("*", F.struct(F.col("producer_id").alias("id")).alias("p"))
    rows = []
    for escaped in ("false", "true"):
        with session_conf(spark, {"spark.sql.parser.escapedStringLiterals": escaped}):
            out = to_findings(df, "SEQUENCE_GAP", fmt("%s: %s", "p.id", "note"), producer_id="p.id")
            rows.append(sorted((r.asDict() for r in out.collect()), key=lambda r: r["producer_id"]))
    assert rows[0] == rows[1]
    assert [(r["category"], r["rule"]) for r in rows[0]] == [("it's \\ odd", "KIP-98 'rule' \\n")] * 2
    assert [r["message"] for r in rows[0]] == ["77: it's a \\ test", "78: plain"]
    evidence = {**dict.fromkeys(EVIDENCE), "dump_id": "d1", "topic": "orders", "partition": 3}
    assert [r["finding_id"] for r in rows[0]] == [
        expected_id("SEQUENCE_GAP", {**evidence, "replica": "r1", "producer_id": 77}),
        expected_id("SEQUENCE_GAP", {**evidence, "producer_id": 78}),
    ]


def test_the_union_keeps_a_whole_repeat_once_and_both_sides_of_an_id_collision(spark: SparkSession) -> None:
    """A finding a rule repeats whole is one finding; two that share an id and differ elsewhere both
    stay, so that the findings suite's uniqueness check can fail on them (contract §3: one id per
    kind and evidence), rather than one of them dropped at the shuffle's whim."""
    df = rows_of(spark).where(F.col("producer_id") == 77)

    def gap(message: str) -> Any:
        return to_findings(df, "SEQUENCE_GAP", F.lit(message), first_offset="base_offset")

    once = union_findings([gap("a"), gap("a")]).collect()
    assert [r["message"] for r in once] == ["a"]
    both = union_findings([gap("a"), gap("b")]).collect()
    assert sorted(r["message"] for r in both) == ["a", "b"]
    assert len({r["finding_id"] for r in both}) == 1
    # Read in one task (`tasks`: the audit gives its session's cores), the same findings.
    one = union_findings([gap("a"), gap("a"), gap("b")], tasks=1)
    assert "Coalesce 1" in one._jdf.queryExecution().executedPlan().toString()
    assert sorted(r["message"] for r in one.collect()) == ["a", "b"]


def test_the_union_in_pairs_takes_every_frames_rows_by_name_whatever_their_count(spark: SparkSession) -> None:
    """Joined pairwise (a balanced tree, not a chain): each frame's rows once, its columns matched by
    name (every other frame lists them in the other order), for one frame, an even and an odd count.
    (The analysed plan cannot tell the two shapes apart: Spark flattens nested unions into one.)"""
    for count in (1, 2, 7):
        frames = [
            spark.createDataFrame([(i, f"f{i}")], "n int, name string").select(
                *(("n", "name") if i % 2 else ("name", "n"))
            )
            for i in range(count)
        ]
        union = union_by_name(frames)
        assert sorted((r["n"], r["name"]) for r in union.collect()) == [(i, f"f{i}") for i in range(count)]
        assert union.columns == ["name", "n"]


def test_a_files_evidence_is_its_partition_directory_and_name_not_where_the_dump_was_read(
    spark: SparkSession,
) -> None:
    """The same dump read from another directory gave its corruption findings other ids (the evidence
    held the whole path): the evidence names the file by its last two path components."""
    df = rows_of(spark).where(F.col("producer_id") == 78)
    ids = []
    for root in ("/mnt/incident-1/broker-2", "/tmp/copy/of/it"):
        moved = df.withColumn("file", F.lit(f"{root}/orders-3/00000000000000000000.log"))
        (row,) = to_findings(
            moved, "CRC_MISMATCH", F.lit("bad"), evidence=file_evidence("file", "position")
        ).collect()
        ids.append(row["finding_id"])
    evidence = {**dict.fromkeys(EVIDENCE), "dump_id": "d1", "topic": "orders", "partition": 3}
    assert ids == [expected_id("CRC_MISMATCH", evidence, "orders-3/00000000000000000000.log@8192")] * 2
    # A file of no partition keeps its whole path: a partitioned ledger's leaves reuse one name.
    names = spark.createDataFrame(
        [("/a/b/orders-3/0.log", "orders"), ("0.log", "orders"), ("/acks/topic=a/part-0.parquet", None)],
        "file string, topic string",
    )
    assert [r[0] for r in names.select(file_evidence("file")).collect()] == [
        "orders-3/0.log",
        "0.log",
        "/acks/topic=a/part-0.parquet",
    ]
